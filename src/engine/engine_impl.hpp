#pragma once
// TransferEngine::Impl: the state every engine_*.cpp shares (groups' workers, the entry gate,
// peer groups, counters) and the one submit path all submit_* calls go through.

#include <fmt/format.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/channel_router.hpp"
#include "engine/engine_metrics.hpp"
#include "engine/engine_shared.hpp"
#include "engine/group_plan.hpp"
#include "engine/imm_space.hpp"
#include "engine/peer_liveness.hpp"
#include "engine/validate.hpp"
#include "engine/worker.hpp"
#include "fabric/engine.hpp"
#include "watcher/watcher_thread.hpp"

namespace fabric {

namespace engine {
// What receives this engine's SENDs: nothing yet, submit_recvs pools or the channels' pool.
inline constexpr std::uint8_t kReceiveNone = 0;
inline constexpr std::uint8_t kReceiveRaw = 1;
inline constexpr std::uint8_t kReceiveChannels = 2;
}  // namespace engine

struct TransferEngine::Impl {
  Impl(const EngineConfig& c, ThreadCpus t)
      : config(c),
        threads(std::move(t)),
        shared(std::make_shared<engine::EngineShared>(c.max_outstanding_requests, threads.cpus,
                                                      c.metrics_peer_labels)) {}

  EngineConfig config;
  // Where every thread of this engine runs (fabric/threads.hpp), whoever called create().
  ThreadCpus threads;
  NetAddr address;
  std::vector<GroupInfo> group_info;
  engine::LocalIdentity identity;
  // The callback thread, the request bound and the immediate table of every group.
  std::shared_ptr<engine::EngineShared> shared;
  // Group g's worker at [g]. Group 0 also serves SENDs, receives, immediate-only writes and
  // barriers, which have no source memory to pick a group by.
  std::vector<std::unique_ptr<engine::Worker>> workers;
  std::atomic<std::uint64_t> next_peer_group{1};
  // Started on first use: an idle poller costs a core on small machines.
  std::mutex watcher_mutex;
  std::unique_ptr<watcher::WatcherThread> watcher;

  // Submitters announce themselves so stop() can wait until none is between
  // its accepting_ check and its enqueue.
  std::atomic<bool> accepting{true};
  std::atomic<std::uint32_t> entering{0};
  // Callers inside progress(). Apart from entering: stop() waits for these only once the
  // worker thread has ended, so a progress() pass stuck in the provider cannot hang it.
  std::atomic<std::uint32_t> progressing{0};
  std::mutex stop_mutex;
  bool stopped = false;

  // What metrics() reports beside the workers' request counts.
  engine::EngineCounters counters;
  // Reserved immediate blocks (reserve_imms); shared so a reservation can outlive the engine.
  std::shared_ptr<detail::ImmSpace> imm_space = std::make_shared<detail::ImmSpace>();

  // Open channels and their routed receive pool (TransferEngine::channel).
  std::shared_ptr<engine::ChannelRouter> channels = std::make_shared<engine::ChannelRouter>(*this);
  std::atomic<std::uint8_t> receive_mode{engine::kReceiveNone};
  // Peer liveness (watch_peer), made on the first watch; its thread stops with the engine.
  std::mutex liveness_mutex;
  std::shared_ptr<engine::PeerLiveness> liveness;
  bool liveness_closed = false;  // stop() began: no new service

  std::mutex counters_mutex;
  std::unordered_set<std::uint32_t> counter_imms;

  engine::Worker& group0() { return *workers.front(); }
  // The worker of the group that owns a request's source memory.
  engine::Worker& worker_of(const detail::Registration& src) { return *workers[src.group]; }

  // reg_mr's group: the named one, else the device's GPU group, else the host group.
  Result<std::uint32_t> group_for(Device device, std::optional<std::uint32_t> group) const {
    return engine::owning_group(group_info, config.host_group, device, group);
  }

  // Peer groups as submitters validate against them.
  std::shared_mutex groups_mutex;
  std::unordered_map<std::uint64_t, std::vector<NetAddr>> groups;

  Status check_group(const std::optional<PeerGroupHandle>& group, std::size_t peers,
                     const std::function<const NetAddr&(std::size_t)>& owner_of) {
    if (!group) return Status::success();
    std::shared_lock lock(groups_mutex);
    auto it = groups.find(group->id);
    if (it == groups.end()) {
      return {Errc::not_found, fmt::format("unknown peer group {}", group->id)};
    }
    if (it->second.size() != peers) {
      return {Errc::invalid_argument, fmt::format("peer group {} has {} peers, request has {}",
                                                  group->id, it->second.size(), peers)};
    }
    for (std::size_t i = 0; i < peers; ++i) {
      if (!(owner_of(i) == it->second[i])) {
        return {Errc::invalid_argument,
                fmt::format("destination {} does not belong to peer {} of group {}", i, i,
                            group->id)};
      }
    }
    return Status::success();
  }

  class Entry {
   public:
    explicit Entry(Impl& impl) : impl_(impl) {
      impl_.entering.fetch_add(1, std::memory_order_seq_cst);
      open_ = impl_.accepting.load(std::memory_order_seq_cst);
    }
    ~Entry() { impl_.entering.fetch_sub(1, std::memory_order_seq_cst); }
    [[nodiscard]] bool open() const { return open_; }

   private:
    Impl& impl_;
    bool open_ = false;
  };

  static Status shut() { return {Errc::shutdown, "the engine is stopped"}; }

  // 0 unless record_post_timings: one branch on the hot path otherwise.
  [[nodiscard]] std::uint64_t stamp() const noexcept {
    return config.record_post_timings ? engine::now_ns() : 0;
  }

  // The one path of every submit_*: the stamp (first, so a timing includes the checks), the
  // entry gate, the request's checks, a pooled Op from the worker that serves it, filled and
  // enqueued. check() runs before pick(), which may rely on what it checked; fill(op) may
  // still refuse (a plan that does not fit), and then the Op goes back to the pool without
  // on_done. Templates over the callers' lambdas, inlined: no allocation or indirection.
  template <typename Check, typename Pick, typename Fill>
  Status submit(engine::OpKind kind, PostKind post, OnDone& on_done, Check&& check, Pick&& pick,
                Fill&& fill) {
    const std::uint64_t called = stamp();
    Entry entry(*this);
    if (!entry.open()) return shut();
    if (auto st = check(); !st.ok()) return st;
    engine::Worker& worker = pick();
    engine::OpPtr op = worker.new_op();
    op->kind = kind;
    if (auto st = fill(*op); !st.ok()) return st;
    op->on_done = std::move(on_done);
    return enqueue(worker, std::move(op), called, post);
  }

  Status enqueue(engine::Worker& worker, engine::OpPtr op, std::uint64_t called, PostKind kind) {
    op->submitted_ns = config.metrics ? (called != 0 ? called : engine::now_ns()) : 0;
    if (config.record_post_timings) {
      op->timing.kind = kind;
      op->timing.called = called;
      op->timing.enqueued = engine::now_ns();
    }
    if (!worker.admit()) {
      return {Errc::again, fmt::format("{} requests outstanding (max_outstanding_requests)",
                                       config.max_outstanding_requests)};
    }
    // Accepted from here on: in flight for dereg_mr() before we return ok
    // (after admit(), so a refused request never holds the registration).
    if (op->src) op->src->in_flight.fetch_add(1, std::memory_order_acq_rel);
    worker.submit(std::move(op));
    return Status::success();
  }

  // Runs fn on every group's worker in turn, each bounded by control_timeout; the first error.
  Status on_every_group(const std::function<Status(engine::DomainGroup&)>& fn) {
    for (auto& w : workers) {
      auto* worker = w.get();
      auto done = worker->call<bool>(
          [worker, fn]() -> Result<bool> {
            if (auto st = fn(worker->domains()); !st.ok()) return st;
            return true;
          },
          config.control_timeout);
      if (!done) return done.status();
    }
    return Status::success();
  }

  // Stops every worker, letting them drain at once; false if one is stuck in the provider.
  bool stop_workers() {
    for (auto& w : workers) w->request_stop();
    bool all = true;
    for (auto& w : workers) all &= w->stop();
    return all;
  }
};

}  // namespace fabric
