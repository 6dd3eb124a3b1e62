#include <gtest/gtest.h>

#include "fabric_test/env.hpp"

int main(int argc, char** argv) {
  // Before any engine exists, here and in every peer this process starts (they inherit it).
  fabric::test::use_loopback_environment();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
