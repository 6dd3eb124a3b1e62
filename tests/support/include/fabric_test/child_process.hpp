#pragma once
// The tests' child processes are the shared ones (src/proc), plus the
// CHILD_REQUIRE checks for child bodies.

#include <unistd.h>

#include <cstdio>
#include <string>

#include "fabric_proc/child_process.hpp"
#include "fabric_test/channel.hpp"

namespace fabric::test {
using proc::ChildExit;
using proc::ChildProcess;
using proc::current_thread_count;
using proc::kChildCheckFailed;
using proc::kChildException;
using proc::kChildOk;
using proc::spawn_child;
}  // namespace fabric::test

// For child bodies (which must return an exit code, not use gtest asserts):
// prints where and why to stderr, then returns kChildCheckFailed.
#define CHILD_REQUIRE(cond, ...)                                               \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "[child %d] %s:%d: CHILD_REQUIRE(%s) failed: %s\n", \
                   static_cast<int>(::getpid()), __FILE__, __LINE__, #cond,    \
                   std::string(__VA_ARGS__).c_str());                          \
      std::fflush(stderr);                                                     \
      return ::fabric::test::kChildCheckFailed;                                \
    }                                                                          \
  } while (0)

// Same, for a fabric::Status (or anything with ok() and to_string()).
#define CHILD_REQUIRE_OK(expr)                                                    \
  do {                                                                            \
    const auto child_require_status_ = (expr);                                    \
    CHILD_REQUIRE(child_require_status_.ok(), child_require_status_.to_string()); \
  } while (0)
