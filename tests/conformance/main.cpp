#include <gtest/gtest.h>

#include "fabric_test/env.hpp"

#if defined(__SANITIZE_THREAD__)
// - Peers write into our buffers through the provider (recv() on libfabric's
//   progress thread, or another process entirely), ordered by messages that
//   ThreadSanitizer cannot follow across processes: ignore the accesses
//   libfabric itself makes through intercepted calls.
// - libfabric 1.17's library destructor unlocks a mutex whose lock TSan never
//   saw, which would turn every exit into a failure.
// Races in fabric-lib and in these tests are still reported.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libfabric.so\n"
         "mutex:_dl_call_fini\n";
}
#endif

int main(int argc, char** argv) {
  // Before any engine exists, in this process and in every child it forks.
  fabric::test::use_loopback_environment();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
