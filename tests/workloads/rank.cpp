// One process of workloads.one_engine: ONE engine, and on it this rank's part of the KV, weights
// and MoE workloads, set up in turn and then run at the same time on three threads.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "../moe/ranks.hpp"
#include "fabric/engine.hpp"
#include "fabric/threads.hpp"
#include "fabric_test/victim.hpp"
#include "kv_work.hpp"
#include "moe_work.hpp"
#include "plan.hpp"
#include "published.hpp"
#include "weights_work.hpp"

namespace fabric::workloads::test {

namespace {

using moe::test::relay_all_gather;
using moe::test::report;

int error(fabric::test::Channel& ch, const std::string& what, int code) {
  std::fprintf(stderr, "[rank %d] %s\n", static_cast<int>(::getpid()), what.c_str());
  (void)report(ch, "error " + what);
  return code;
}

void line(std::ostringstream& o, const char* name, const Outcome& w) {
  o << ' ' << name << "_done=" << w.done << ' ' << name << "_failed=" << w.failed << ' ' << name
    << "_fail_ms=" << w.fail_ms;
}

// The victim dies without a word once nothing of its own is in flight (a kill inside a post
// into a peer's shm region could wedge that peer; fabric_test/victim.hpp). The wait is bounded:
// dying with a request in flight is still a death.
[[noreturn]] void die_when_idle(const std::vector<std::unique_ptr<TransferEngine>>& engines) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const auto busy = [&] {
    return std::any_of(engines.begin(), engines.end(),
                       [](const auto& e) { return e->outstanding_requests() > 0; });
  };
  while (busy() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ::raise(SIGKILL);
  std::abort();
}

// Which threads the process has with its one engine and its workloads set up (before the
// test's own three start): the library's by name, and every thread of the process (the main
// thread and the provider's included), for docs/api.md "One engine, several workloads".
std::string thread_census() {
  std::vector<std::string> names;
  for (const auto& t : library_threads()) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  std::string joined;
  for (const auto& n : names) joined += (joined.empty() ? "" : ",") + n;
  std::size_t all = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++all;
  return "library_threads=" + joined + " library_thread_count=" + std::to_string(names.size()) +
         " process_threads=" + std::to_string(all);
}

// /proc/self/status's VmRSS (now) or VmHWM (the peak so far), in KiB; -1 if unreadable.
long long status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1);
  }
  return -1;
}

}  // namespace

int run_rank(const Plan& plan, std::uint32_t rank, fabric::test::Channel& ch) {
  const bool victim = static_cast<std::int32_t>(rank) == plan.victim;
  EngineConfig ec;
  ec.provider = plan.provider;
  ec.request_timeout = plan.request_timeout;
  ec.drain_timeout = std::chrono::milliseconds(500);
  std::fprintf(stderr, "[one engine] rank %u is pid %d\n", rank, static_cast<int>(::getpid()));
  if (plan.engines != 1 && plan.engines != 3) return error(ch, "plan: 1 or 3 engines", 3);
  std::vector<std::unique_ptr<TransferEngine>> engines;
  for (std::uint32_t i = 0; i < plan.engines; ++i) {
    auto engine = TransferEngine::create(victim ? fabric::test::victim_config(ec) : ec);
    if (!engine.ok()) return error(ch, "engine: " + engine.status().to_string(), 3);
    engines.push_back(std::move(engine).value());
  }
  // One engine for all three workloads, or one each.
  TransferEngine& kv_engine = *engines[0];
  TransferEngine& weights_engine = *engines[plan.engines == 3 ? 1 : 0];
  TransferEngine& moe_engine = *engines[plan.engines == 3 ? 2 : 0];

  // Every workload on its engine, each with its own immediates.
  std::unique_ptr<KvSenderWork> kv_tx;
  std::unique_ptr<KvReceiverWork> kv_rx;
  if (rank == kKvReceiver) {
    auto r = KvReceiverWork::create(kv_engine, plan);
    if (!r.ok()) return error(ch, "kv receiver: " + r.status().to_string(), 4);
    kv_rx = std::move(r).value();
  } else {
    auto s = KvSenderWork::create(kv_engine);
    if (!s.ok()) return error(ch, "kv sender: " + s.status().to_string(), 4);
    kv_tx = std::move(s).value();
  }
  Published mine;
  mine.addr = weights_engine.main_address().encode();
  mine.kv_addr = kv_engine.main_address().encode();
  std::unique_ptr<WeightsTrainer> trainer;
  std::unique_ptr<WeightsInference> inference;
  if (rank == kTrainer) {
    auto t = WeightsTrainer::create(weights_engine);
    if (!t.ok()) return error(ch, "weights trainer: " + t.status().to_string(), 4);
    trainer = std::move(t).value();
    trainer->publish(mine);
  } else {
    auto i = WeightsInference::create(weights_engine);
    if (!i.ok()) return error(ch, "weights inference: " + i.status().to_string(), 4);
    inference = std::move(i).value();
    inference->publish(mine);
  }
  auto gathered = relay_all_gather(ch)(encode(mine));
  if (!gathered.ok()) return error(ch, "exchange: " + gathered.status().to_string(), 4);
  std::vector<Published> all;
  std::vector<NetAddr> addrs;  // each rank's KV engine
  for (const auto& b : *gathered) {
    auto p = decode_published(b);
    if (!p.ok()) return error(ch, "exchange: " + p.status().to_string(), 4);
    auto a = NetAddr::decode(p->kv_addr);
    if (!a.ok()) return error(ch, "exchange: " + a.status().to_string(), 4);
    addrs.push_back(*a);
    all.push_back(std::move(p).value());
  }
  if (all.size() != kRanks) return error(ch, "exchange: " + std::to_string(all.size()) + " ranks", 4);
  auto moe = MoeWork::create(moe_engine, plan, rank, ch);
  if (!moe.ok()) return error(ch, "moe group: " + moe.status().to_string(), 4);
  if (kv_rx) {
    if (auto st = kv_rx->connect({addrs[0], addrs[1]}, plan.wait_bound); !st.ok())
      return error(ch, "kv connect: " + st.to_string(), 4);
  }
  // Every rank is set up: go.
  if (auto go = relay_all_gather(ch)({}); !go.ok()) return error(ch, "start: " + go.status().to_string(), 4);
  const std::string threads = thread_census();
  const long long rss_kib = status_kib("VmRSS");

  Outcome kv, weights, moe_out;
  {
    std::jthread kv_thread([&] {
      kv = kv_tx ? kv_tx->run(rank, victim ? plan.kv_before_death : plan.kv_requests, plan.wait_bound)
                 : kv_rx->run(plan);
    });
    std::jthread weights_thread([&] {
      weights = trainer ? trainer->run(plan, all) : inference->run(plan, rank, all[kTrainer]);
    });
    std::jthread moe_thread([&] { moe_out = (*moe)->run(plan, rank, ch); });
  }
  for (const auto* w : {&kv, &weights, &moe_out}) {
    if (!w->ok()) return error(ch, w->error, 5);
  }
  if (victim) {
    if (auto st = inference->ack_last(plan, all[kTrainer]); !st.ok()) return error(ch, st.to_string(), 5);
    die_when_idle(engines);
  }
  std::ostringstream o;
  o << "ok pid=" << ::getpid();
  line(o, "kv", kv);
  line(o, "weights", weights);
  line(o, "moe", moe_out);
  std::uint64_t imms_received = 0;
  for (const auto& engine : engines) imms_received += engine->metrics().imms_received;
  o << " moe_stray=" << (*moe)->stray() << " imms_received=" << imms_received
    << " imms_claimed=" << (kv.imms + weights.imms + moe_out.imms) << ' ' << threads
    << " engines=" << engines.size() << " rss_kib=" << rss_kib << " hwm_kib=" << status_kib("VmHWM");
  // Every rank has its counts before any leaves its MoE group: a peer's leave notice
  // (~MoeGroup) is an immediate too, and no workload here claims it.
  if (plan.victim < 0) {
    if (auto all = relay_all_gather(ch)({}); !all.ok()) return error(ch, "counted: " + all.status().to_string(), 5);
  }
  (void)report(ch, o.str());
  return 0;
}

}  // namespace fabric::workloads::test
