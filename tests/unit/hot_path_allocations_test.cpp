// The submit -> post -> complete path allocates nothing per request in steady state
// (docs/benchmarks.md, "Heap allocations per request"). Global operator new is replaced by a
// counting one for this binary only; after a warm-up, 10^5 requests of one kind run with a
// bounded window and the count of C++ heap allocations made meanwhile, by every thread of the
// process (caller, workers, callback threads), is divided by the number of requests.
// Allocations inside the provider (libfabric is C and uses malloc) are not counted: they are
// the provider's, not the engine's.
#include <execinfo.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "fabric/fabric.hpp"

namespace {
std::atomic<std::uint64_t> g_allocations{0};

// While tracing, the first few allocations keep their call stacks, printed when a test finds
// allocations: they say which part of the path allocated.
constexpr int kTraces = 6;
constexpr int kTraceDepth = 24;
std::atomic<bool> g_tracing{false};
std::atomic<int> g_traced{0};
void* g_trace[kTraces][kTraceDepth];
int g_trace_depth[kTraces];

void note_allocation() {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (!g_tracing.load(std::memory_order_relaxed)) return;
  const int slot = g_traced.fetch_add(1, std::memory_order_relaxed);
  if (slot < kTraces) g_trace_depth[slot] = backtrace(g_trace[slot], kTraceDepth);
}

void* counted_alloc(std::size_t n) {
  note_allocation();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* counted_aligned_alloc(std::size_t n, std::align_val_t align) {
  note_allocation();
  const auto a = static_cast<std::size_t>(align);
  const std::size_t size = (n + a - 1) / a * a;
  if (void* p = std::aligned_alloc(a, size == 0 ? a : size)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t n, std::align_val_t a) { return counted_aligned_alloc(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_aligned_alloc(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace fabric {
namespace {

// 10^5 requests on shm; tcp;ofi_rxm on loopback is about ten times slower per request, so it
// runs 5 * 10^3 to keep CI short.
constexpr std::uint64_t kShmRequests = 100'000;
constexpr std::uint64_t kTcpRequests = 5'000;
constexpr std::uint64_t kShmWarmup = 4'000;
constexpr std::uint64_t kTcpWarmup = 2'000;
constexpr std::uint64_t kWindow = 32;  // well below max_outstanding_requests: no back-pressure
constexpr std::size_t kPeers = 8;
constexpr std::uint32_t kPages = 64;  // engine/op_pool.hpp: storage for 64 is made up front

// FABRIC_HOT_PATH_REQUESTS and FABRIC_HOT_PATH_WINDOW override the counts for instruction
// counting under callgrind (docs/benchmarks.md), where 10^5 requests take too long.
std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}
constexpr std::uint64_t kBytes = 64;
constexpr auto kWaitBound = std::chrono::seconds(60);  // every wait is bounded

EngineConfig config_for(const std::string& provider) {
  EngineConfig config;
  config.provider = provider;
  config.pinning = Pinning::off;
  return config;
}

struct Peer {
  std::unique_ptr<TransferEngine> engine;
  std::vector<std::byte> buffer = std::vector<std::byte>(64 * 1024);
  Registered reg;
  std::shared_ptr<ImmCounter> counter;
};

// One engine writing to itself and to kPeers other engines in this process.
class HotPathAllocations : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr std::uint32_t kImm = 7;

  void SetUp() override {
    for (std::size_t i = 0; i <= kPeers; ++i) {
      auto engine = TransferEngine::create(config_for(GetParam()));
      if (!engine.ok())
        GTEST_SKIP() << GetParam() << " unavailable: " << engine.status().to_string();
      Peer& p = i == 0 ? self_ : peers_.emplace_back();
      p.engine = std::move(engine).value();
      auto reg = p.engine->reg_mr(p.buffer.data(), p.buffer.size());
      ASSERT_TRUE(reg.ok()) << reg.status().to_string();
      p.reg = std::move(reg).value();
      auto counter = p.engine->imm_counter(kImm);
      ASSERT_TRUE(counter.ok()) << counter.status().to_string();
      p.counter = std::move(counter).value();
    }
  }

  void TearDown() override {
    for (auto& p : peers_) p.engine->stop();
    if (self_.engine) self_.engine->stop();
  }

  // Submits `n` requests through `submit` with at most kWindow outstanding; all must succeed.
  template <typename Submit>
  void run(std::uint64_t n, const std::shared_ptr<CompletionCounter>& done, Submit&& submit) {
    const std::uint64_t base = done->completed();
    const std::uint64_t window = env_or("FABRIC_HOT_PATH_WINDOW", kWindow);
    for (std::uint64_t i = 0; i < n; ++i) {
      if (i >= window) ASSERT_TRUE(done->wait(base + i - window + 1, kWaitBound).ok());
      const Status st = submit();
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    const Status st = done->wait(base + n, kWaitBound);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }

  // Heap allocations over the measured requests, after a warm-up of the same kind. A window
  // that allocated is measured once more: a one-off growth (a queue block, the pool under a
  // burst of scheduling delay) is not per request and does not recur; a per-request
  // allocation does.
  template <typename Submit>
  std::uint64_t allocations_in_window(const char* kind, std::uint64_t imms_per_request,
                                      std::vector<Peer*> receivers, Submit submit) {
    auto done = std::make_shared<CompletionCounter>();
    std::vector<std::uint64_t> before(receivers.size());
    for (std::size_t i = 0; i < receivers.size(); ++i) before[i] = receivers[i]->counter->value();
    const std::uint64_t requests =
        env_or("FABRIC_HOT_PATH_REQUESTS", GetParam() == "shm" ? kShmRequests : kTcpRequests);
    const std::uint64_t warmup = GetParam() == "shm" ? kShmWarmup : kTcpWarmup;
    run(warmup, done, [&] { return submit(done); });
    void* warm[1];
    (void)backtrace(warm, 1);  // loads the unwinder now, not inside the window
    std::uint64_t allocations = 0;
    std::uint64_t windows = 0;
    for (int attempt = 0; attempt < 2 && (attempt == 0 || allocations > 0); ++attempt) {
      g_traced.store(0);
      const std::uint64_t start = g_allocations.load();
      g_tracing.store(true);
      run(requests, done, [&] { return submit(done); });
      g_tracing.store(false);
      ++windows;
      allocations = g_allocations.load() - start;
      const int traced = std::min(g_traced.load(), kTraces);
      for (int t = 0; t < traced; ++t) {
        std::fprintf(stderr, "%s: allocation %d of window %llu:\n", kind, t,
                     static_cast<unsigned long long>(windows));
        backtrace_symbols_fd(g_trace[t], g_trace_depth[t], STDERR_FILENO);
      }
    }
    EXPECT_EQ(done->failed(), 0u);
    // The bytes and immediates landed: each receiver counted every request's immediates.
    for (std::size_t i = 0; i < receivers.size(); ++i) {
      const std::uint64_t want = before[i] + (warmup + windows * requests) * imms_per_request;
      EXPECT_TRUE(receivers[i]->counter->wait(want, kWaitBound).ok())
          << kind << " receiver " << i << " counted " << receivers[i]->counter->value() - before[i];
    }
    const double per_request = static_cast<double>(allocations) / static_cast<double>(requests);
    std::printf(
        "[ allocs   ] %s on %s: %llu allocations over %llu requests = %.4f per request%s\n", kind,
        GetParam().c_str(), static_cast<unsigned long long>(allocations),
        static_cast<unsigned long long>(requests), per_request,
        windows > 1 ? " (second window; the first allocated, stacks above)" : "");
    return allocations;
  }

  // One slice of kBytes to each peer, landing at dst_offset in its region.
  Scatter scatter_to_peers(std::uint64_t dst_offset) {
    Scatter s;
    s.src = self_.reg.handle;
    s.imm = kImm;
    for (std::size_t i = 0; i < kPeers; ++i) {
      s.slices.push_back({peers_[i].reg.desc, kBytes, i * kBytes, dst_offset});
    }
    return s;
  }

  std::vector<Peer*> all_peers() {
    std::vector<Peer*> out;
    for (auto& p : peers_) out.push_back(&p);
    return out;
  }

  // kBytes with kImm from this engine's buffer into itself, 4 KiB further on.
  [[nodiscard]] SingleWrite self_write() const {
    SingleWrite w;
    w.length = kBytes;
    w.imm = kImm;
    w.src = {self_.reg.handle, 0};
    w.dst = {self_.reg.desc, 4096};
    return w;
  }

  Peer self_;
  std::vector<Peer> peers_;
};

TEST_P(HotPathAllocations, SingleWriteAllocatesNothingPerRequest) {
  const SingleWrite w = self_write();
  const std::uint64_t allocations = allocations_in_window(
      "single write", self_.engine->num_domains(), {&self_},
      [&](const auto& done) { return self_.engine->submit_single_write(w, done); });
  EXPECT_EQ(allocations, 0u) << "heap allocations on the hot path (stacks above)";
}

TEST_P(HotPathAllocations, SingleWriteWithCallbackAllocatesNothingPerRequest) {
  const SingleWrite w = self_write();
  const std::uint64_t allocations = allocations_in_window(
      "single write, callback", self_.engine->num_domains(), {&self_}, [&](const auto& done) {
        // A callback small enough for std::function's own storage: any allocation counted is
        // the engine's.
        CompletionCounter* counter = done.get();
        return self_.engine->submit_single_write(
            w, DoneCallback([counter](const Status& st) { counter->complete(st); }));
      });
  EXPECT_EQ(allocations, 0u) << "heap allocations on the hot path (stacks above)";
}

TEST_P(HotPathAllocations, PagedWriteAllocatesNothingPerRequest) {
  PagedWrite p;
  p.page_length = kBytes;
  p.imm = kImm;
  p.src = self_.reg.handle;
  p.dst = self_.reg.desc;
  for (std::uint32_t i = 0; i < kPages; ++i) {
    p.src_pages.indices.push_back(i);
    p.dst_pages.indices.push_back(kPages - 1 - i);
  }
  p.src_pages.stride = p.dst_pages.stride = kBytes;
  p.dst_pages.offset = 8192;
  const std::uint64_t allocations = allocations_in_window(
      "paged write (64 pages)", kPages, {&self_},
      [&](const auto& done) { return self_.engine->submit_paged_writes(p, done); });
  EXPECT_EQ(allocations, 0u) << "heap allocations on the hot path (stacks above)";
}

TEST_P(HotPathAllocations, ImmOnlyWriteAllocatesNothingPerRequest) {
  const std::uint64_t allocations = allocations_in_window(
      "imm-only write", 1, {&self_},
      [&](const auto& done) { return self_.engine->submit_imm(kImm, self_.reg.desc, done); });
  EXPECT_EQ(allocations, 0u) << "heap allocations on the hot path (stacks above)";
}

TEST_P(HotPathAllocations, ScatterToEightPeersAllocatesNothingPerRequest) {
  const Scatter s = scatter_to_peers(1024);
  const std::uint64_t allocations = allocations_in_window(
      "scatter (8 peers)", 1, all_peers(),
      [&](const auto& done) { return self_.engine->submit_scatter(s, done); });
  EXPECT_EQ(allocations, 0u) << "heap allocations on the hot path (stacks above)";
}

TEST_P(HotPathAllocations, ScatterToPeerGroupAllocatesNothingPerRequest) {
  std::vector<NetAddr> members;
  for (auto& p : peers_) members.push_back(p.engine->main_address());
  auto group = self_.engine->add_peer_group(members);
  ASSERT_TRUE(group.ok()) << group.status().to_string();
  Scatter s = scatter_to_peers(2048);
  s.group = *group;
  const std::uint64_t allocations = allocations_in_window(
      "scatter (8-member group)", 1, all_peers(),
      [&](const auto& done) { return self_.engine->submit_scatter(s, done); });
  EXPECT_EQ(allocations, 0u) << "heap allocations on the hot path (stacks above)";
}

TEST_P(HotPathAllocations, BarrierToEightPeersAllocatesNothingPerRequest) {
  Barrier b;
  b.imm = kImm;
  for (auto& p : peers_) b.dsts.push_back(p.reg.desc);
  const std::uint64_t allocations = allocations_in_window(
      "barrier (8 peers)", 1, all_peers(),
      [&](const auto& done) { return self_.engine->submit_barrier(b, done); });
  EXPECT_EQ(allocations, 0u) << "heap allocations on the hot path (stacks above)";
}

// READs from peer 0's memory, registered once more with remote read, into our buffer. They
// carry no immediate: the completions alone say they are done.
Registered readable_region(Peer& owner) {
  auto reg = owner.engine->reg_mr(owner.buffer.data(), owner.buffer.size(), Device::host(),
                                  Access::remote_write | Access::remote_read);
  EXPECT_TRUE(reg.ok()) << reg.status().to_string();
  return reg.ok() ? std::move(reg).value() : Registered{};
}

TEST_P(HotPathAllocations, SingleReadAllocatesNothingPerRequest) {
  const Registered src = readable_region(peers_.front());
  ASSERT_FALSE(src.desc.empty());
  SingleRead r;
  r.length = kBytes;
  r.src = {src.desc, 0};
  r.dst = {self_.reg.handle, 4096};
  const std::uint64_t allocations = allocations_in_window(
      "single read", 0, {},
      [&](const auto& done) { return self_.engine->submit_single_read(r, done); });
  EXPECT_EQ(allocations, 0u) << "heap allocations on the hot path (stacks above)";
}

TEST_P(HotPathAllocations, PagedReadAllocatesNothingPerRequest) {
  const Registered src = readable_region(peers_.front());
  ASSERT_FALSE(src.desc.empty());
  PagedRead r;
  r.page_length = kBytes;
  r.src = src.desc;
  r.dst = self_.reg.handle;
  for (std::uint32_t i = 0; i < kPages; ++i) {
    r.src_pages.indices.push_back(i);
    r.dst_pages.indices.push_back(kPages - 1 - i);
  }
  r.src_pages.stride = r.dst_pages.stride = kBytes;
  r.dst_pages.offset = 8192;
  const std::uint64_t allocations = allocations_in_window(
      "paged read (64 pages)", 0, {},
      [&](const auto& done) { return self_.engine->submit_paged_reads(r, done); });
  EXPECT_EQ(allocations, 0u) << "heap allocations on the hot path (stacks above)";
}

INSTANTIATE_TEST_SUITE_P(Providers, HotPathAllocations, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fabric
