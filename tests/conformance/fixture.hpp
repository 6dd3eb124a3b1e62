#pragma once
// Shared pieces of the conformance suite: the provider parameter, engine
// configuration, timing bounds and status assertions.
//
// Every test runs real processes. The parent forks its children FIRST (see
// fabric_test/child_process.hpp for why), then creates its own engine; the
// processes exchange NetAddr/MrDesc over the control Channel.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <ostream>
#include <string>

#include "fabric/fabric.hpp"
#include "fabric_test/channel.hpp"
#include "fabric_test/child_process.hpp"

namespace fabric {
// Readable gtest output for library values (found by argument-dependent lookup).
inline void PrintTo(Errc code, std::ostream* os) { *os << errc_name(code); }
inline void PrintTo(const Status& status, std::ostream* os) { *os << status.to_string(); }
}  // namespace fabric

namespace fabric::conformance {

using namespace std::chrono_literals;
using test::ChildProcess;

// A child's hard deadline; below ctest's 120 s per test so the harness, not
// ctest, reports a stuck child.
inline constexpr std::chrono::seconds kChildLifetime{100};
// Bound on any single operation we expect to finish (a write landing, a
// completion arriving, a control message).
inline constexpr std::chrono::milliseconds kWait{20000};
// How long a negative check watches for something that must NOT happen (a
// surplus immediate, a duplicate completion). Short: it costs every test.
inline constexpr std::chrono::milliseconds kQuiet{150};

// FABRIC_TEST_GROUPS=N (N in 2..16; README.md, "Building"): every engine
// the suite configures has N host groups and registers host memory on the
// last, so the suite's writes leave and land through group N-1 while SENDs,
// immediate-only writes and barriers stay on group 0. Unset: one group.
void apply_test_groups(EngineConfig& config);

// "verbs" is the verbs backend (run inside the rxe VM: tests/verbs/README.md);
// every other name is a libfabric provider.
inline EngineConfig engine_config(const std::string& provider) {
  EngineConfig config;
  config.provider = provider;
  config.bind_address = "127.0.0.1";
  if (provider == "verbs") {
    config.backend = Backend::verbs;
    // rxe under QEMU's software emulation moves 10-30 MB/s: one 64 MiB WRITE
    // takes seconds with no completion in between, which must not read as a
    // dead peer.
    config.request_timeout = std::chrono::seconds(60);
  }
  apply_test_groups(config);
  return config;
}

// Why this machine cannot run `provider`, or empty when it can.
inline std::string unavailable_reason(const std::string& provider) {
  if (provider == "verbs" && !backend_available(Backend::verbs)) {
    return "no active ibverbs port here; the verbs suite runs inside the rxe VM "
           "(ctest -R verbs.rxe_vm)";
  }
  return {};
}

// In a fixture's SetUp(): skip (with the reason) when the provider cannot run.
#define FABRIC_SKIP_IF_UNAVAILABLE(provider)                                    \
  do {                                                                          \
    if (auto why = ::fabric::conformance::unavailable_reason(provider); !why.empty()) { \
      GTEST_SKIP() << why;                                                      \
    }                                                                           \
  } while (false)

// TEST_P suites derive from this; the parameter is the provider name.
class ProviderTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Derived SetUp()s call this first and return when IsSkipped().
  void SetUp() override { FABRIC_SKIP_IF_UNAVAILABLE(provider()); }
  [[nodiscard]] const std::string& provider() const { return GetParam(); }
  [[nodiscard]] EngineConfig config() const { return engine_config(provider()); }
  [[nodiscard]] bool ip_provider() const { return provider() == "tcp" || provider() == "sockets" || provider() == "udp"; }
};

inline std::string provider_param_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

inline Status status_of(const Status& status) { return status; }
template <typename T>
Status status_of(const Result<T>& result) {
  return result.status();
}
// Success, or the Status text (code and the library's message).
template <typename S>
::testing::AssertionResult is_ok(const S& value) {
  const Status status = status_of(value);
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.to_string();
}

// Stops an engine when the scope ends. Declare it AFTER the locals its
// callbacks use: an early ASSERT return then stops callbacks before those
// locals are destroyed.
class StopGuard {
 public:
  explicit StopGuard(TransferEngine* engine) : engine_(engine) {}
  StopGuard(const StopGuard&) = delete;
  StopGuard& operator=(const StopGuard&) = delete;
  ~StopGuard() {
    if (engine_) engine_->stop();
  }

 private:
  TransferEngine* engine_;
};

// For child bodies: the engine, or nullptr after saying why on stderr.
std::unique_ptr<TransferEngine> child_engine(const EngineConfig& config);

}  // namespace fabric::conformance

#define FABRIC_INSTANTIATE_PROVIDERS(Suite)                                              \
  INSTANTIATE_TEST_SUITE_P(Providers, Suite, ::testing::Values("shm", "tcp", "sockets", "udp", "verbs"), \
                           ::fabric::conformance::provider_param_name)

#define ASSERT_OK(value) ASSERT_TRUE(::fabric::conformance::is_ok(value))
#define EXPECT_OK(value) EXPECT_TRUE(::fabric::conformance::is_ok(value))

// The parent's engine; fails the test (fatally) when it cannot be created.
#define ASSERT_ENGINE(var, config)                                       \
  auto var##_result_ = ::fabric::TransferEngine::create(config);         \
  ASSERT_TRUE(var##_result_.ok()) << "TransferEngine::create: "          \
                                  << var##_result_.status().to_string(); \
  std::unique_ptr<::fabric::TransferEngine> var = std::move(var##_result_).value()
