// Engine lifetime: stop() settles every outstanding request exactly once in
// bounded time, nothing is accepted afterwards, and engines leave no shared
// memory behind.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fabric_test/proc_inspect.hpp"
#include "remote_target.hpp"

namespace fabric::conformance {
namespace {

using LifecycleTest = ProviderTest;
using Clock = std::chrono::steady_clock;

TEST_P(LifecycleTest, StopWithWritesOutstandingDeliversEveryOnDoneExactlyOnce) {
  constexpr std::uint64_t kRegion = 1 << 20;
  constexpr std::uint64_t kLength = 64 * 1024;
  constexpr std::uint32_t kWrites = 3000;
  RemoteTarget target(config(), kRegion);

  ASSERT_ENGINE(engine, config());
  std::vector<std::byte> src(kRegion, std::byte{0x3c});
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(reg);
  ASSERT_TRUE(target.connect());

  // Every third request reports by callback, flag and counter respectively.
  auto calls = std::make_unique<std::atomic<int>[]>(kWrites);
  std::vector<std::shared_ptr<CompletionFlag>> flags;
  auto counter = std::make_shared<CompletionCounter>();
  std::uint64_t counted = 0;
  std::vector<std::uint32_t> accepted;
  const StopGuard stop_guard(engine.get());
  for (std::uint32_t i = 0; i < kWrites; ++i) {
    SingleWrite w;
    w.length = kLength;
    w.imm = 0x5709;
    w.src = {reg->handle, (i % 16) * kLength};
    w.dst = {target.dst(), ((i + 7) % 16) * kLength};
    OnDone on_done;
    if (i % 3 == 0) {
      on_done = OnDone([&calls, i](const Status&) { calls[i].fetch_add(1); });
    } else if (i % 3 == 1) {
      flags.push_back(std::make_shared<CompletionFlag>());
      on_done = OnDone(flags.back());
    } else {
      on_done = OnDone(counter);
    }
    const Status st = engine->submit_single_write(w, std::move(on_done));
    if (st.code() == Errc::again) {
      if (i % 3 == 1) flags.pop_back();
      continue;  // back-pressure is allowed; such a request was never accepted
    }
    ASSERT_OK(st) << "write " << i;
    accepted.push_back(i);
    if (i % 3 == 2) ++counted;
  }
  ASSERT_FALSE(accepted.empty());

  // Settled before stop(): if this were everything, the test would prove little.
  std::uint64_t settled = counter->completed();
  for (const auto i : accepted) {
    if (i % 3 == 0) settled += calls[i].load() > 0 ? 1 : 0;
  }
  for (const auto& f : flags) settled += f->done() ? 1 : 0;
  RecordProperty("accepted", static_cast<int>(accepted.size()));
  RecordProperty("settled_before_stop", static_cast<int>(settled));

  const auto begin = Clock::now();
  engine->stop();
  const auto took = Clock::now() - begin;
  // Past drain_timeout: failing what is left, delivering every callback, closing the Domains.
  // verbs runs here as Soft-RoCE inside a QEMU guest, where tearing down the queue pairs with
  // 2,744 requests failed took 5.2 s beyond drain_timeout on a loaded host (a fresh-clone run
  // of 2026-12-01), so it gets a wider, still bounded, margin.
  const auto margin = std::chrono::seconds(provider() == "verbs" ? 15 : 5);
  const auto bound = engine->config().drain_timeout + margin;
  EXPECT_LE(took, bound) << "stop() took "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                         << " ms with " << accepted.size() << " writes submitted";

  auto check_once = [&](const char* when) {
    for (const auto i : accepted) {
      if (i % 3 == 0) {
        EXPECT_EQ(calls[i].load(), 1) << "callback of write " << i << " " << when;
      }
    }
    for (std::size_t k = 0; k < flags.size(); ++k) {
      EXPECT_TRUE(flags[k]->done()) << "flag " << k << " " << when;
    }
    EXPECT_EQ(counter->completed(), counted) << "counter " << when;
  };
  check_once("right after stop()");
  engine->stop();  // idempotent; must not deliver anything again
  std::this_thread::sleep_for(kQuiet);
  check_once("a while after stop()");
  EXPECT_TRUE(target.finish());
}

TEST_P(LifecycleTest, SubmitAfterStopReturnsShutdown) {
  RemoteTarget target(config(), 4096);
  ASSERT_ENGINE(engine, config());
  std::vector<std::byte> src(4096);
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(reg);
  ASSERT_TRUE(target.connect());
  engine->stop();

  auto counter = std::make_shared<CompletionCounter>();
  SingleWrite single;
  single.length = 64;
  single.src = {reg->handle, 0};
  single.dst = {target.dst(), 0};
  EXPECT_EQ(engine->submit_single_write(single, counter).code(), Errc::shutdown);
  PagedWrite paged;
  paged.page_length = 64;
  paged.src = reg->handle;
  paged.src_pages = {{0}, 64, 0};
  paged.dst = target.dst();
  paged.dst_pages = {{0}, 64, 0};
  EXPECT_EQ(engine->submit_paged_writes(paged, counter).code(), Errc::shutdown);
  EXPECT_EQ(engine->submit_imm(1, target.dst(), counter).code(), Errc::shutdown);
  const std::vector<std::byte> message(16);
  EXPECT_EQ(engine->submit_send(target.addr(), message, counter).code(), Errc::shutdown);
  EXPECT_EQ(
      engine->submit_recvs(engine->config().max_message_size, 4, [](std::span<const std::byte>) {})
          .code(),
      Errc::shutdown);
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(counter->completed(), 0u) << "on_done ran for a submission refused after stop()";
  EXPECT_TRUE(target.untouched());
  EXPECT_TRUE(target.finish());
}

TEST_P(LifecycleTest, EnginesLeaveNoShmFilesBehind) {
  constexpr std::uint32_t kImm = 0x54a;
  const auto before = test::list_dev_shm();
  RemoteTarget target(config(), 4096);
  const pid_t child_pid = target.process().pid();
  std::set<std::string> used;
  {
    ASSERT_ENGINE(engine, config());
    std::vector<std::byte> src(4096);
    auto reg = engine->reg_mr(src.data(), src.size());
    ASSERT_OK(reg);
    ASSERT_TRUE(target.connect());
    auto flag = std::make_shared<CompletionFlag>();
    ASSERT_OK(engine->submit_imm(kImm, target.dst(), flag));
    ASSERT_OK(flag->wait(kWait));
    ASSERT_EQ(target.imm_arrivals(kImm, 1), 1u);
    // What both processes hold in /dev/shm while their engines are up.
    used = test::shm_files_used_by(::getpid());
    const auto child_used = test::shm_files_used_by(child_pid);
    used.insert(child_used.begin(), child_used.end());
  }
  EXPECT_TRUE(target.finish());

  std::vector<std::string> left;
  for (const auto& path : used) {
    const std::string name = path.substr(std::string("/dev/shm/").size());
    if (!before.contains(name) && ::access(path.c_str(), F_OK) == 0) left.push_back(path);
  }
  // Files nobody had mapped at the moment we looked, but named after our pids.
  for (const auto& name : test::list_dev_shm()) {
    if (before.contains(name) || used.contains("/dev/shm/" + name)) continue;
    if (test::name_mentions_pid(name, ::getpid()) || test::name_mentions_pid(name, child_pid)) {
      left.push_back("/dev/shm/" + name);
    }
  }
  for (const auto& path : left) ADD_FAILURE() << "left behind: " << path;
  if (provider() == "shm") {
    EXPECT_FALSE(used.empty()) << "the shm provider mapped nothing from /dev/shm: the check "
                                  "above proved nothing";
  }
}

FABRIC_INSTANTIATE_PROVIDERS(LifecycleTest);

}  // namespace
}  // namespace fabric::conformance
