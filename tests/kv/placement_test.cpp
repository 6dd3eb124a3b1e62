// The engine places its own threads (docs/concepts.md, "Threads and CPUs"): a host thread pinned
// to one CPU, with a thread spinning beside it there, creates two engines, a KV Sender and
// Receiver and a watcher, and drives transfers for a while. Every thread the library started
// must run where the policy says (every CPU of the process, or FABRIC_CPUS), as the kernel
// reports it in /proc, never on the creator's one CPU; and no request may fail, which is what a
// peer wrongly declared silent would cause.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <ostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "fabric/engine.hpp"
#include "fabric/kv/layout.hpp"
#include "fabric/kv/receiver.hpp"
#include "fabric/kv/sender.hpp"
#include "fabric/threads.hpp"

namespace fabric {
// Failures print the cpulist, not the vector's bytes.
void PrintTo(const CpuSet& set, std::ostream* os) { *os << '"' << set.to_string() << '"'; }

}  // namespace fabric

namespace fabric::kv {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kLayers = 2;
constexpr std::uint32_t kPages = 64;
constexpr std::uint32_t kTokensPerPage = 16;
constexpr std::uint32_t kTokens = 200;

// The kernel's view of a thread: its name and the CPUs it may run on.
struct TaskView {
  std::string comm;
  std::string cpus;
};

TaskView task_view(pid_t tid) {
  const std::string dir = "/proc/self/task/" + std::to_string(tid);
  TaskView v;
  std::ifstream(dir + "/comm") >> v.comm;
  std::ifstream status(dir + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      v.cpus = line.substr(line.find_first_not_of(" \t", 18));
    }
  }
  return v;
}

// Spins on one CPU until told to stop, as vLLM's pinned OpenMP master does between steps.
class Spinner {
 public:
  explicit Spinner(int cpu)
      : thread_([this, cpu] {
          if (!pin_current_thread(CpuSet{{cpu}}).ok()) failed_ = true;
          while (!stop_.load(std::memory_order_relaxed)) {
          }
        }) {}
  ~Spinner() {
    stop_ = true;
    thread_.join();
  }
  [[nodiscard]] bool failed() const { return failed_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::thread thread_;
};

struct Outcome {
  std::string error;  // the first failure, empty if none
  std::uint32_t done = 0;
  std::vector<ThreadPlacement> threads;  // library_threads() in the middle of the run
  std::string engine_cpus;               // both engines' thread_cpus()
};

EngineConfig tcp_config() {
  EngineConfig c;
  c.provider = "tcp";
  c.bind_address = "127.0.0.1";
  return c;
}

// The host thread's whole job: engines, Sender, Receiver, watcher, then transfers for `run_for`.
Outcome host_thread_body(std::chrono::seconds run_for) {
  Outcome out;
  auto fail = [&out](const std::string& what, const Status& st) {
    if (out.error.empty()) out.error = what + ": " + st.to_string();
    return out;
  };
  auto tx_engine = TransferEngine::create(tcp_config());
  if (!tx_engine) return fail("prefill engine", tx_engine.status());
  auto rx_engine = TransferEngine::create(tcp_config());
  if (!rx_engine) return fail("decode engine", rx_engine.status());
  out.engine_cpus = (*tx_engine)->thread_cpus().cpus.to_string() + "/" +
                    (*rx_engine)->thread_cpus().cpus.to_string();
  std::atomic<std::uint64_t> watched{0};
  auto watcher = (*rx_engine)->alloc_uvm_watcher(
      [&watched](std::uint64_t, std::uint64_t v) {
        watched = v;
        return true;
      },
      WatcherMemory::host);
  if (!watcher) return fail("watcher", watcher.status());

  auto shard = shard_heads(2, 1, 0);
  const KvLayout layout = vllm_nhd(CacheShape{kLayers, kPages, kTokensPerPage, 2, *shard, 8, 2});
  std::vector<std::byte> tx_memory(layout.span_bytes() * 2 + 4096);
  std::vector<std::byte> rx_memory(tx_memory.size());
  auto reg = (*tx_engine)->reg_mr(tx_memory.data(), tx_memory.size());
  if (!reg) return fail("reg_mr", reg.status());
  SenderConfig scfg;
  scfg.layout = layout;
  scfg.regions.assign(layout.num_regions, reg->handle);
  // The default liveness: what a deployment gets.
  auto sender = Sender::create(**tx_engine, scfg);
  if (!sender) return fail("Sender", sender.status());
  ReceiverConfig rcfg;
  rcfg.layout = layout;
  rcfg.regions.assign(layout.num_regions, RegionMemory{rx_memory.data(), rx_memory.size()});
  auto receiver = Receiver::create(**rx_engine, rcfg);
  if (!receiver) return fail("Receiver", receiver.status());
  auto source = (*receiver)->connect((*tx_engine)->main_address(), 30s);
  if (!source) return fail("connect", source.status());

  std::vector<std::uint32_t> pages;
  for (std::uint32_t p = 0; p < (kTokens + kTokensPerPage - 1) / kTokensPerPage; ++p) {
    pages.push_back(p);
  }
  const std::uint32_t sources[] = {*source};
  const auto end = Clock::now() + run_for;
  const auto middle = Clock::now() + run_for / 2;
  for (std::uint32_t n = 0; Clock::now() < end; ++n) {
    const std::string id = "req-" + std::to_string(n);
    if (auto st = (*sender)->prepare(id, pages, kTokens); !st.ok()) return fail("prepare", st);
    auto expected = (*receiver)->request(id, pages, kTokens, sources);
    if (!expected) return fail("request", expected.status());
    for (std::uint32_t l = 0; l < kLayers; ++l) {
      if (auto st = (*sender)->layer_done(id, l); !st.ok()) return fail("layer_done", st);
    }
    auto got = (*receiver)->wait(id, 30s);
    if (!got) return fail("wait " + id, got.status());
    if (got->state != State::done) return fail(id + " " + std::string(state_name(got->state)),
                                               got->error);
    (void)(*receiver)->release(id);
    // The sender's side turns done once its writes completed; bounded like the receiver's.
    const auto sender_deadline = Clock::now() + 30s;
    for (;;) {
      auto s = (*sender)->poll(id);
      if (!s) return fail("sender poll " + id, s.status());
      if (is_terminal(s->state)) {
        if (s->state != State::done) return fail("sender " + id, s->error);
        break;
      }
      if (Clock::now() > sender_deadline) return fail("sender " + id, Status(Errc::timeout, ""));
      std::this_thread::yield();
    }
    (void)(*sender)->release(id);
    ++out.done;
    if (out.threads.empty() && Clock::now() > middle) out.threads = library_threads();
  }
  if (out.threads.empty()) out.threads = library_threads();
  return out;
}

class Placement : public ::testing::Test {
 protected:
  void SetUp() override {
    auto all = process_cpus();
    ASSERT_TRUE(all.ok()) << all.status().to_string();
    if (all->size() < 2) GTEST_SKIP() << "the test needs 2 CPUs, this process has " << all->size();
    cpus_ = *all;
  }
  void TearDown() override { unsetenv(kCpusEnv); }

  // Runs the host thread pinned to the first CPU, a spinner beside it, and checks placement.
  void run_pinned_host(std::chrono::seconds run_for, const CpuSet& expected) {
    const int host_cpu = cpus_.cpus.front();
    Spinner spinner(host_cpu);
    Outcome outcome;
    std::thread host([&] {
      ASSERT_TRUE(pin_current_thread(CpuSet{{host_cpu}}).ok());
      outcome = host_thread_body(run_for);
    });
    host.join();
    ASSERT_FALSE(spinner.failed());
    EXPECT_EQ(outcome.error, "");
    EXPECT_GT(outcome.done, 0u);
    EXPECT_EQ(outcome.engine_cpus, expected.to_string() + "/" + expected.to_string());

    std::map<std::string, int> seen;  // thread name -> how many
    for (const ThreadPlacement& t : outcome.threads) {
      ++seen[t.name];
      EXPECT_EQ(t.cpus, expected) << t.name;
      // The registry could be wrong about itself: ask the kernel. A thread that already ended
      // has no entry left, which the registry would not list either.
      const TaskView v = task_view(t.tid);
      if (!v.comm.empty()) {
        EXPECT_EQ(v.comm, t.name);
        EXPECT_EQ(v.cpus, expected.to_string()) << t.name;
      }
    }
    // Two engines: two workers, two callback threads, one watcher, two KV tickers, and each
    // engine's liveness thread (its KV side watches the other).
    EXPECT_EQ(seen["fabric-wk0"], 2);
    EXPECT_EQ(seen["fabric-cb"], 2);
    EXPECT_EQ(seen["fabric-watch"], 1);
    EXPECT_EQ(seen["fabric-kv-tick"], 2);
    EXPECT_EQ(seen["fabric-live"], 2);
  }

  CpuSet cpus_;
};

TEST_F(Placement, ThreadsOfAnEngineCreatedOnAPinnedBusyCpuUseEveryCpuAndNoPeerGoesSilent) {
  // 30 s: four times the default silence bound (2 ping intervals + request_timeout = 7 s).
  run_pinned_host(30s, cpus_);
}

TEST_F(Placement, FabricCpusPlacesEveryThreadWhereItSays) {
  const CpuSet last{{cpus_.cpus.back()}};
  ASSERT_EQ(setenv(kCpusEnv, last.to_string().c_str(), 1), 0);
  run_pinned_host(10s, last);
}

TEST_F(Placement, EngineConfigThreadCpusWinsOverFabricCpus) {
  ASSERT_EQ(setenv(kCpusEnv, CpuSet{{cpus_.cpus.front()}}.to_string().c_str(), 1), 0);
  EngineConfig c = tcp_config();
  c.thread_cpus = CpuSet{{cpus_.cpus.back()}};
  auto engine = TransferEngine::create(c);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  EXPECT_EQ((*engine)->thread_cpus().cpus, c.thread_cpus);
  EXPECT_EQ((*engine)->thread_cpus().source, "EngineConfig::thread_cpus");
  EXPECT_EQ((*engine)->groups()[0].cpus, c.thread_cpus);
}

TEST_F(Placement, MalformedFabricCpusFailsCreateNamingTheVariable) {
  ASSERT_EQ(setenv(kCpusEnv, "1-0", 1), 0);
  auto engine = TransferEngine::create(tcp_config());
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), Errc::invalid_argument);
  EXPECT_NE(engine.status().message().find("FABRIC_CPUS=\"1-0\""), std::string::npos)
      << engine.status().message();
}

TEST_F(Placement, ThreadCpusOutsideTheProcessFailCreate) {
  EngineConfig c = tcp_config();
  c.thread_cpus = CpuSet{{cpus_.cpus.back() + 4096}};
  auto engine = TransferEngine::create(c);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), Errc::invalid_argument);
  EXPECT_NE(engine.status().message().find("none of which this process may use"),
            std::string::npos)
      << engine.status().message();
}

}  // namespace
}  // namespace fabric::kv
