#pragma once
// The worker of one DomainGroup: the loop. It opens the group's Domains on its own (pinned)
// thread, takes requests from lock-free queues, carries each out on the group's Domains (posting
// in turn, counting completions, failing the stalled) and hands finished work to the callback
// thread. What it knows about the Domains and peers is the DomainGroup's; registrations and
// receive buffers have their own units.

#include <concurrentqueue/concurrentqueue.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "backends/open_domains.hpp"
#include "domain/domain.hpp"
#include "engine/engine_metrics.hpp"
#include "engine/admission.hpp"
#include "engine/callback_thread.hpp"
#include "engine/domain_group.hpp"
#include "engine/imm_table.hpp"
#include "engine/op.hpp"
#include "engine/op_pool.hpp"
#include "engine/peer_index.hpp"
#include "engine/post_slice.hpp"
#include "engine/receives.hpp"
#include "engine/registrar.hpp"
#include "engine/ring_queue.hpp"
#include "engine/send_staging.hpp"
#include "engine/sleeper.hpp"
#include "engine/submission_queue.hpp"
#include "fabric/engine.hpp"

namespace fabric::engine {

class Worker {
 public:
  using Task = std::function<void()>;
  // Opens the group's Domains; runs on the worker thread once it is pinned.
  using Opener = std::function<Result<domain::OpenedDomains>()>;
  // What the group opened, for the engine's NetAddr and GroupInfo.
  struct Opened {
    Backend backend = Backend::libfabric;
    std::string provider;
    std::vector<std::vector<std::byte>> addresses;  // Domain i at [i]
    std::vector<DomainNic> nics;
    bool reads = false;  // every Domain can READ (domain::Limits::reads)
  };

  Worker(std::uint32_t group, const EngineConfig& config, CallbackThread& callbacks,
         ImmTable& imms, Admission& admission, PeerIndex& peers);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Runs the worker thread, named fabric-wk<group>: restricts it to `cpus` (empty: the mask it
  // was created with), opens the Domains and
  // allocates their state there (so it lands on the group's NUMA node), then serves requests.
  void start(CpuSet cpus, Opener open);
  // What start() opened, or why it failed; timeout if the thread did not say within `timeout`.
  Result<Opened> wait_started(std::chrono::milliseconds timeout);

  [[nodiscard]] std::uint32_t group() const noexcept { return index_; }
  [[nodiscard]] std::size_t num_domains() const noexcept { return domains_.size(); }

  // --- any thread ---
  // Reserves room for one more outstanding request (engine-wide); false is back-pressure.
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
  // Tells the thread to drain and end, without waiting: stopping every group's worker first
  // lets them drain at the same time.
  void request_stop();
  // Drains (bounded by drain_timeout), fails what is left, joins. Idempotent.
  // false when the worker thread did not end within drain_timeout + stuck_worker_grace: it is
  // stuck inside a provider call (docs/reliability.md#shm-locks) and was detached, so the Worker
  // and everything it references must be leaked, never destroyed.
  [[nodiscard]] bool stop();
  // Whether the worker thread has returned, waiting at most `timeout`.
  [[nodiscard]] bool wait_thread_ended(std::chrono::milliseconds timeout) const;

  // --- worker thread only (through post_task/call) ---
  DomainGroup& domains() noexcept { return domains_; }
  Registrar& registrar() noexcept { return registrar_; }
  Receives& receives() noexcept { return receives_; }
  // This group's requests as reported (TransferEngine::metrics()).
  [[nodiscard]] const RequestMetrics& request_metrics() const noexcept { return request_metrics_; }

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
  // Starts up to kSubmissionBatch queued requests, each posting at most `first_posts` WRITEs
  // at once (then it waits in pending_).
  bool drain_submissions(std::uint32_t first_posts = ~std::uint32_t{0});
  // One pass's posting within its slice (post_slice.hpp): new requests, then the queue; after
  // a pass whose slice ran out with requests still queued, only the queue, oldest first, so
  // that newcomers' first WRITEs do not take every slice from the requests before them.
  bool post_pass();
  // EngineConfig::post_on_submit: the caller's pass after its submission; false if it could
  // not have one (worker_assist.cpp).
  bool post_submitted();
  // For a caller's pass (assist, post_submitted): whether the worker thread needs the next
  // pass itself, and the loop lock if no pass is running and stop() has not begun (else
  // unlocked).
  [[nodiscard]] bool worker_needs_pass() const;
  [[nodiscard]] std::unique_lock<std::mutex> try_caller_pass();
  bool progress_pending();
  bool poll_domains();
  void start_op(Op* op, std::uint32_t first_posts);
  Status resolve_peers(Op* op);
  // The Domains and their state, once opened (on the worker thread).
  Status adopt(std::vector<std::unique_ptr<domain::Domain>> domains);
  // Posts up to max_wrs WRs of op while the provider accepts them; false once blocked
  // (worker_post.cpp).
  bool post_some(Op* op, std::uint32_t max_wrs);
  // The loop of post_some for WRITEs (Desc = domain::WriteDesc) and READs (domain::ReadDesc);
  // `describe(i, w)` fills operation i's addresses and key and returns its Domain and peer.
  template <typename Desc, typename Describe>
  bool post_rma(Op* op, std::uint32_t max_wrs, Describe&& describe);
  bool post_send_op(Op* op);
  // Why the last post_some returned false: a Domain's send queue full (no request can post on
  // it), or one peer refusing (`again`: its connection not up yet or gone, its receive queue
  // full, as a dead shm peer's stays). Set where post_some returns false.
  struct Refusal {
    bool queue_full = false;
    std::uint32_t domain = 0;
    domain::PeerHandle peer = 0;
  };
  Refusal last_refusal_;
  // The peers that refused a post in this progress_pending pass: later requests to them wait,
  // in order, while requests to others go on (worker_post.cpp: progress_pending).
  std::vector<std::pair<std::uint32_t, domain::PeerHandle>> refusing_peers_;
  [[nodiscard]] bool targets_refusing_peer(const Op* op) const;
  // Moves the n requests at the front of pending_ to its back (their order kept).
  void rotate_pending(std::size_t n);
  // Counts a WRITE or SEND the provider took on `domain`, and notes how many it took there
  // before it (held_by_provider); stamps PostTiming when asked.
  void note_posted(Op* op, std::uint32_t domain);
  // The op's peer `peer` (0, or a scatter's or barrier's index) refused a post with an error,
  // or answered nothing for request_timeout: it counts as lost (PeerIndex::lost). Failure
  // paths only.
  void note_peer_gone(const Op* op, std::uint32_t peer);
  // `now`: when the poll that returned the completion ran (one clock read per batch).
  void on_tx_done(Op* op, std::size_t domain, Status status,
                  std::chrono::steady_clock::time_point now);
  // Runs on_done (once) and, when the provider holds nothing of it, frees op.
  // `now_ns`: the clock read of the poll that completed `op` (0: none, read one if needed).
  void finish(Op* op, std::uint64_t now_ns = 0);
  void deliver(Op* op, std::uint64_t now_ns = 0);
  void expire_stalled(std::chrono::steady_clock::time_point now);
  void fail(Op* op, Status status);
  void shutdown_sequence();
  // What an idle worker does before its next pass: poll again at once, yield its CPU, or sleep
  // (on the Domains' wait fds too where it asked them, inside a pass, that nothing is pending).
  enum class Rest : std::uint8_t { none, yield, sleep, sleep_watching_domains };
  [[nodiscard]] Rest idle_rest(std::chrono::steady_clock::time_point last_busy,
                               bool may_ask_domains);
  void take_rest(Rest rest);
  void wake();

  const std::uint32_t index_;
  DomainGroup domains_;
  EngineConfig config_;
  CallbackThread& callbacks_;
  ImmTable& imms_;
  Admission& admission_;
  PeerIndex& peers_;
  std::promise<Result<Opened>> started_;
  std::future<Result<Opened>> started_future_ = started_.get_future();

  // Before the queue: Ops still queued go back to the pool when the queue is destroyed.
  OpPool pool_;
  SubmissionQueue submissions_;
  moodycamel::ConcurrentQueue<Task> tasks_;
  std::atomic<std::uint32_t> outstanding_{0};
  std::atomic<bool> stop_requested_{false};
  Sleeper sleeper_;
  // Held for each pass of the loop, by the worker thread or a caller in assist(): the
  // worker-thread state below is touched by one pass at a time.
  std::mutex loop_mutex_;
  // Set by the worker thread when it needs the next pass (tasks, request expiry) while a caller
  // holds loop_mutex_; assist() stands back until the worker has had it.
  std::atomic<bool> worker_wants_loop_{false};
  // Set by post_submitted() when a caller started requests: the worker counts that as
  // activity (its idle policy polls closely again, not in idle_sleep steps) and does not go to
  // sleep on it.
  std::atomic<bool> posted_by_caller_{false};
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
  // This pass's posting time: started by each pass (run, assist, post_submitted, shutdown), it
  // ends the pass's posts once spent, and the rest keeps its place for the next pass.
  PostSlice slice_;
  bool posting_backlog_ = false;  // the last pass's slice ran out with requests queued
  // Taken from submissions_ but not started yet (a pass starts kSubmissionBatch at most),
  // oldest first, linked by Op::next_submitted; empty once shutdown_sequence() has run.
  Op* taken_ = nullptr;
  [[nodiscard]] std::chrono::steady_clock::time_point last_heard(const Op* op) const;
  // Whether a posted request's provider keeps it (kHeldByProviderTimeouts); notes when the
  // operations posted before its latest one have drained.
  [[nodiscard]] bool held_by_provider(Op* op, std::chrono::steady_clock::time_point now) const;
  Registrar registrar_;
  Receives receives_;
  RequestMetrics request_metrics_;
  std::optional<SendStaging> staging_;
  std::deque<Op*> waiting_for_staging_;
  bool draining_ = false;
  // record_post_timings: filled by the worker, taken by any thread.
  void record_timing(Op* op);
  std::mutex timings_mutex_;
  std::vector<PostTiming> timings_;
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
