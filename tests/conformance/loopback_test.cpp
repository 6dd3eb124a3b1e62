// IP providers stay on loopback: once an engine is up and has talked to a
// peer, every inet socket either process has bound is on 127.0.0.1 or ::1.

#include <unistd.h>

#include <string>
#include <vector>

#include "fabric_test/proc_inspect.hpp"
#include "remote_target.hpp"

namespace fabric::conformance {
namespace {

using LoopbackTest = ProviderTest;

// Sockets of `pid` bound anywhere but loopback; counts the bound ones seen.
std::vector<std::string> off_loopback(pid_t pid, std::size_t& bound) {
  std::vector<std::string> bad;
  for (const auto& s : test::inet_sockets_of(pid)) {
    if (s.unbound) continue;
    ++bound;
    if (!s.loopback) bad.push_back("pid " + std::to_string(pid) + ": " + s.to_string());
  }
  return bad;
}

TEST_P(LoopbackTest, EveryBoundInetSocketIsOnLoopback) {
  if (!ip_provider()) GTEST_SKIP() << provider() << " uses no inet sockets";
  constexpr std::uint32_t kImm = 0x100b;
  RemoteTarget target(config(), 4096);

  ASSERT_ENGINE(engine, config());
  std::vector<std::byte> src(4096, std::byte{1});
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(reg);
  ASSERT_TRUE(target.connect());
  // Talk first: providers open their connections lazily.
  auto flag = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine->submit_imm(kImm, target.dst(), flag));
  ASSERT_OK(flag->wait(kWait));
  ASSERT_EQ(target.imm_arrivals(kImm, 1), 1u);

  std::size_t bound = 0;
  auto bad = off_loopback(::getpid(), bound);
  const auto child_bad = off_loopback(target.process().pid(), bound);
  bad.insert(bad.end(), child_bad.begin(), child_bad.end());
  EXPECT_GT(bound, 0u) << "no bound inet socket found at all: is the provider really " << provider()
                       << ", or is /proc unreadable?";
  for (const auto& b : bad) ADD_FAILURE() << "socket off loopback: " << b;
  engine->stop();
  EXPECT_TRUE(target.finish());
}

FABRIC_INSTANTIATE_PROVIDERS(LoopbackTest);

}  // namespace
}  // namespace fabric::conformance
