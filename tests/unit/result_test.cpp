#include "fabric/status.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace fabric {
namespace {

Result<int> failing() { return Status(Errc::not_found, "no provider 'efa' on this host"); }

TEST(Result, ValueOnAnErrorThrowsTheStatusText) {
  Result<int> r = failing();
  try {
    (void)r.value();
    FAIL() << "value() returned on an error";
  } catch (const BadResultAccess& e) {
    EXPECT_EQ(e.status().code(), Errc::not_found);
    EXPECT_EQ(e.status().message(), "no provider 'efa' on this host");
    EXPECT_NE(std::string(e.what()).find("not_found: no provider 'efa' on this host"),
              std::string::npos)
        << e.what();
  }
}

TEST(Result, EveryAccessorThrowsOnAnError) {
  const Result<int> c = failing();
  EXPECT_THROW((void)c.value(), BadResultAccess);
  EXPECT_THROW((void)*c, BadResultAccess);
  EXPECT_THROW((void)failing().value(), BadResultAccess);
  Result<std::unique_ptr<int>> p = Status(Errc::timeout, "late");
  EXPECT_THROW((void)p->get(), BadResultAccess);
}

TEST(Result, ValueIsReturnedWhenPresent) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r.value(), 7);
  std::unique_ptr<int> moved = std::move(r).value();
  EXPECT_EQ(*moved, 7);
}

TEST(Result, IsAStdRuntimeErrorForGenericHandlers) {
  try {
    (void)failing().value();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not_found"), std::string::npos);
    return;
  }
  FAIL() << "no exception";
}

}  // namespace
}  // namespace fabric
