#pragma once
// The worker of one DomainGroup: takes requests from lock-free queues, posts
// WRITEs/SENDs to its Domains, polls their completion queues, counts
// immediates and hands finished work to the callback thread.

#include <concurrentqueue/concurrentqueue.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "domain/domain.hpp"
#include "engine/callback_thread.hpp"
#include "engine/imm_table.hpp"
#include "engine/op.hpp"
#include "engine/op_pool.hpp"
#include "engine/recv_pool.hpp"
#include "engine/ring_queue.hpp"
#include "engine/send_staging.hpp"
#include "fabric/engine.hpp"

namespace fabric::engine {

class Worker {
 public:
  using Task = std::function<void()>;

  Worker(std::vector<std::unique_ptr<domain::Domain>> domains, const EngineConfig& config,
         CallbackThread& callbacks);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Before start(): prepares per-domain state. Runs on the calling thread.
  Status prepare();
  // Runs the worker thread, first restricting it to `cpus` (empty: anywhere).
  void start(CpuSet cpus = {});

  [[nodiscard]] std::size_t num_domains() const noexcept { return domains_.size(); }
  [[nodiscard]] const domain::Domain& domain(std::size_t i) const { return *domains_.at(i); }

  // --- any thread ---
  // Reserves room for one more outstanding request; false is back-pressure.
  [[nodiscard]] bool admit() noexcept;
  // A recycled (or new) Op to fill in and submit.
  [[nodiscard]] OpPtr new_op() { return pool_.acquire(); }
  void submit(OpPtr op);
  [[nodiscard]] std::uint32_t outstanding() const noexcept {
    return outstanding_.load(std::memory_order_acquire);
  }
  void post_task(Task task);
  // Runs fn on the worker and waits for its result, at most `timeout`.
  template <typename T>
  Result<T> call(std::function<Result<T>()> fn, std::chrono::milliseconds timeout);
  // Drains (bounded by drain_timeout), fails what is left, joins. Idempotent.
  // false when the worker thread did not end within drain_timeout + stuck_worker_grace: it is
  // stuck inside a provider call (docs/reliability.md#shm-locks) and was detached, so the Worker
  // and everything it references must be leaked, never destroyed.
  [[nodiscard]] bool stop();
  // Whether the worker thread has returned, waiting at most `timeout`.
  [[nodiscard]] bool wait_thread_ended(std::chrono::milliseconds timeout) const;

  // --- worker thread only (through post_task/call) ---
  Result<Registered> register_memory(void* ptr, std::size_t length, Device device, Access access,
                                     const NetAddr& self, const void* engine);
  void deregister(std::shared_ptr<detail::Registration> reg, std::promise<Status> done);
  Status add_recv_pool(std::size_t buffer_size, std::uint32_t count, RecvCallback on_recv);
  ImmTable& imms() noexcept { return imms_; }
  Result<std::uint64_t> add_peer_group(const std::vector<NetAddr>& peers);
  Status fence_peer(const NetAddr& peer);

  // --- any thread ---
  std::vector<PostTiming> take_post_timings();
  // One pass of the loop (submissions, pending posts, completion queues; no tasks) on the
  // calling thread, unless the worker thread or another caller is in one or stop() began, or
  // the worker thread needs the next pass (it then yields once). Whether it found work.
  // worker_assist.cpp.
  [[nodiscard]] bool assist();

 private:
  void run();
  bool drain_tasks();
  bool drain_submissions();
  bool progress_pending();
  bool poll_domains();
  void start_op(Op* op);
  Status resolve_peers(Op* op);
  // The owner's handle on each Domain into out[0, K): from the peer cache, resolving (once per
  // engine instance) on a miss.
  Status resolve_owner(const NetAddr& owner, domain::PeerHandle* out);
  // Posts WRs of op while the provider accepts them; false once blocked.
  bool post_some(Op* op, std::uint32_t max_wrs);
  Status post_one(Op* op);
  // `now`: when the poll that returned the completion ran (one clock read per batch).
  void on_tx_done(Op* op, std::size_t domain, Status status,
                  std::chrono::steady_clock::time_point now);
  // Runs on_done (once) and, when the provider holds nothing of it, frees op.
  void finish(Op* op);
  void deliver(Op* op);
  void expire_stalled(std::chrono::steady_clock::time_point now);
  void fail(Op* op, Status status);
  void on_recv(RecvSlot* slot, std::size_t length, const Status& status);
  void post_recv(RecvSlot* slot);
  void retry_unposted_recvs();
  void release_registration_use(detail::Registration& reg);
  void close_registration(detail::Registration& reg);
  void shutdown_sequence();
  // The Domains' regions for device memory at ptr, registering its whole
  // allocation unless it already is; with the offset of ptr in them.
  Result<std::pair<std::vector<std::shared_ptr<domain::MemoryRegion>>, std::uint64_t>>
  device_regions(void* ptr, std::size_t length, Device device, Access access);
  void idle_wait(std::chrono::steady_clock::time_point last_busy);
  void wake();

  std::vector<std::unique_ptr<domain::Domain>> domains_;
  EngineConfig config_;
  CallbackThread& callbacks_;

  // Before the queue: Ops still queued go back to the pool when the queue is destroyed.
  OpPool pool_;
  moodycamel::ConcurrentQueue<OpPtr> submissions_;
  moodycamel::ConcurrentQueue<Task> tasks_;
  std::atomic<std::uint32_t> outstanding_{0};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> sleeping_{false};
  std::mutex sleep_mutex_;
  // Held for each pass of the loop, by the worker thread or a caller in assist(): the
  // worker-thread state below is touched by one pass at a time.
  std::mutex loop_mutex_;
  // Set by the worker thread when it needs the next pass (tasks, request expiry) while a caller
  // holds loop_mutex_; assist() stands back until the worker has had it.
  std::atomic<bool> worker_wants_loop_{false};
  std::condition_variable sleep_cv_;
  std::thread thread_;
  std::promise<void> thread_ended_;
  std::shared_future<void> ended_ = thread_ended_.get_future().share();
  bool stopped_ = false;
  bool joined_ = true;

  // Worker-thread state.
  // Every op the worker holds; each knows its index (Op::live_index) for O(1) removal.
  std::vector<Op*> live_;
  void add_live(Op* op);
  void remove_live(Op* op);
  RingQueue<Op*> pending_;
  std::vector<std::uint32_t> tx_in_flight_;  // per Domain
  std::vector<std::uint32_t> tx_depth_;      // per Domain: its limits().tx_depth, read once
  // Per Domain: when each peer last completed an operation of ours. A request waiting behind
  // others to the same peer (a deep window on a slow link) is not stalled while they complete.
  std::vector<std::unordered_map<domain::PeerHandle, std::chrono::steady_clock::time_point>>
      peer_progress_;
  [[nodiscard]] std::chrono::steady_clock::time_point last_heard(const Op* op) const;
  ImmTable imms_;
  std::vector<std::unique_ptr<RecvPool>> recv_pools_;
  std::deque<RecvSlot*> unposted_recvs_;
  std::optional<SendStaging> staging_;
  std::deque<Op*> waiting_for_staging_;
  // Zero-length immediate-only WRITEs still need a valid local buffer (EFA).
  std::unique_ptr<std::byte[]> scratch_;
  std::vector<std::unique_ptr<domain::MemoryRegion>> scratch_regions_;
  std::vector<std::shared_ptr<detail::Registration>> registrations_;
  std::vector<std::pair<std::shared_ptr<detail::Registration>, std::promise<Status>>>
      deferred_deregs_;
  bool draining_ = false;
  // record_post_timings: filled by the worker, taken by any thread.
  void record_timing(Op* op);
  std::mutex timings_mutex_;
  std::vector<PostTiming> timings_;
  std::unordered_map<std::uint64_t, std::vector<domain::PeerHandle>> peer_groups_;
  // Peers resolved so far, by NetAddr::instance_id (a restarted peer has a new one). The
  // address is kept to check a hit: two engines never share an instance id, but a forged or
  // corrupted descriptor could.
  struct CachedPeer {
    NetAddr address;
    std::array<domain::PeerHandle, NetAddr::kMaxDomains> handles{};
  };
  std::unordered_map<std::uint64_t, CachedPeer> peer_cache_;
  // GPU allocations registered so far, by (device, base, size, access): later
  // tensors of the same allocation reuse these regions while any is alive.
  std::map<std::tuple<int, std::uintptr_t, std::size_t, std::uint32_t>,
           std::vector<std::weak_ptr<domain::MemoryRegion>>>
      device_regions_;
  std::uint64_t next_group_id_ = 1;
};

template <typename T>
Result<T> Worker::call(std::function<Result<T>()> fn, std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<Result<T>>>();
  auto future = promise->get_future();
  post_task([promise, fn = std::move(fn)] { promise->set_value(fn()); });
  if (future.wait_for(timeout) != std::future_status::ready) {
    return Status(Errc::timeout, "the worker did not answer within control_timeout");
  }
  return future.get();
}

}  // namespace fabric::engine
