// The worker's thread and loop: start and stop, one pass (tasks, posting within its slice,
// polling, expiry), resting when idle, and the drain at shutdown. A request's own life is
// worker_requests.cpp; how its operations reach the provider, worker_post.cpp.

#include "engine/worker.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "common/log.hpp"
#include "fabric/threads.hpp"

namespace fabric::engine {

namespace {
using Clock = std::chrono::steady_clock;

constexpr std::size_t kSubmissionBatch = 64;
constexpr std::size_t kTaskBatch = 64;
constexpr std::uint32_t kUnlimited = ~std::uint32_t{0};
constexpr auto kExpiryCheckInterval = std::chrono::milliseconds(5);
}  // namespace

Worker::Worker(std::uint32_t group, const EngineConfig& config, CallbackThread& callbacks,
               ImmTable& imms, Admission& admission, PeerIndex& peers)
    : index_(group),
      config_(config),
      callbacks_(callbacks),
      imms_(imms),
      admission_(admission),
      peers_(peers),
      registrar_(domains_, group),
      receives_(domains_, callbacks,
                [this](RecvSlot* slot) { post_task([this, slot] { receives_.post(slot); }); }),
      request_metrics_(peers.slots()) {
  domains_.set_peer_index(&peers);
}

Worker::~Worker() { (void)stop(); }

Status Worker::adopt(std::vector<std::unique_ptr<domain::Domain>> domains) {
  if (auto st = sleeper_.status(); !st.ok()) return st;
  if (auto st = domains_.adopt(std::move(domains)); !st.ok()) return st;
  sleeper_.watch(domains_.wait_fds());
  if (domains_.domain(0).limits().needs_local_desc) {
    auto staging =
        SendStaging::create(domains_.domain(0), config_.max_message_size, config_.send_slots);
    if (!staging) return staging.status();
    staging_.emplace(std::move(staging).value());
  }
  return Status::success();
}

void Worker::start(CpuSet cpus, Opener open) {
  thread_ = std::thread([this, cpus = std::move(cpus), open = std::move(open)] {
    const PlacedThread placed(fmt::format("fabric-wk{}", index_), cpus);
    // Opened here, after pinning: the provider's queues and our per-Domain state are first
    // touched on the group's NUMA node (docs/topology.md).
    auto opened = open();
    Status st = opened ? adopt(std::move(opened->domains)) : opened.status();
    if (!st.ok()) {
      started_.set_value(st);
      thread_ended_.set_value();
      return;
    }
    Opened out{opened->backend, opened->provider, {}, std::move(opened->nics)};
    out.reads = true;
    for (const auto& d : domains_.domains()) {
      out.addresses.emplace_back(d->address().begin(), d->address().end());
      out.reads = out.reads && d->limits().reads;
    }
    started_.set_value(std::move(out));
    run();
    thread_ended_.set_value();
  });
}

Result<Worker::Opened> Worker::wait_started(std::chrono::milliseconds timeout) {
  if (started_future_.wait_for(timeout) != std::future_status::ready) {
    return Status(Errc::timeout,
                  fmt::format("group {}: opening its Domains took more than {} ms", index_,
                              timeout.count()));
  }
  return started_future_.get();
}

bool Worker::admit() noexcept {
  if (!admission_.admit()) return false;
  outstanding_.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

void Worker::submit(OpPtr op) {
  submissions_.push(std::move(op));
  if (config_.post_on_submit) (void)post_submitted();
  wake();  // the rest of its WRITEs, and its completions, are the worker's
}

void Worker::post_task(Task task) {
  tasks_.enqueue(std::move(task));
  wake();
}

void Worker::wake() { sleeper_.wake(); }

bool Worker::wait_thread_ended(std::chrono::milliseconds timeout) const {
  return ended_.wait_for(timeout) == std::future_status::ready;
}

void Worker::request_stop() {
  stop_requested_.store(true, std::memory_order_seq_cst);
  // Unconditionally: the worker may be about to sleep.
  sleeper_.wake_always();
}

bool Worker::stop() {
  if (stopped_) return joined_;
  stopped_ = true;
  request_stop();
  if (!thread_.joinable()) {
    shutdown_sequence();
    return true;
  }
  // A provider call that never returns (a peer holding a lock in our shm region) must not hang
  // stop() for good: past the drain bound, the thread is left to itself.
  const auto bound = config_.drain_timeout + config_.stuck_worker_grace;
  if (!wait_thread_ended(bound)) {
    log::error("stop(): the worker thread is stuck inside the provider for more than {} ms; "
               "leaving it (and its Domains) behind",
               bound.count());
    thread_.detach();
    joined_ = false;
    return false;
  }
  thread_.join();
  return true;
}

// ---------------------------------------------------------------- main loop

void Worker::run() {
  auto last_busy = Clock::now();
  auto next_expiry_check = last_busy;
  while (!stop_requested_.load(std::memory_order_acquire)) {
    bool busy = false;
    Clock::time_point now;
    Rest rest = Rest::none;
    {
      std::unique_lock loop(loop_mutex_, std::try_to_lock);
      if (!loop) {
        // A caller inside assist() runs this pass for us. Tasks and request expiry are this
        // thread's alone: then ask callers to stand back and retry at once, so a caller that
        // progresses without pause cannot starve them. Otherwise back off as if idle, without
        // asking the Domains: the caller is inside them.
        if (tasks_.size_approx() != 0 || Clock::now() >= next_expiry_check) {
          worker_wants_loop_.store(true, std::memory_order_relaxed);
          std::this_thread::yield();
        } else if (!config_.busy_poll) {
          take_rest(idle_rest(last_busy, false));
        }
        continue;
      }
      worker_wants_loop_.store(false, std::memory_order_relaxed);
      busy = posted_by_caller_.exchange(false, std::memory_order_acq_rel);
      busy |= drain_tasks();
      busy |= post_pass();  // after the tasks: a slow one must not leave no time to post
      busy |= poll_domains();
      now = Clock::now();
      if (now >= next_expiry_check) {
        expire_stalled(now);
        next_expiry_check = now + kExpiryCheckInterval;
      }
      // Chosen inside the pass: asking a Domain is a provider call, one thread at a time
      // (FI_THREAD_DOMAIN); resting is outside it, so that callers can progress meanwhile.
      if (busy) {
        last_busy = now;
      } else if (!config_.busy_poll) {
        rest = idle_rest(last_busy, true);
      }
    }
    take_rest(rest);
  }
  // After any assist() pass in flight; later ones see stop_requested_ and do nothing.
  std::lock_guard loop(loop_mutex_);
  shutdown_sequence();
}

Worker::Rest Worker::idle_rest(Clock::time_point last_busy, bool may_ask_domains) {
  const auto idle = Clock::now() - last_busy;
  if (idle < config_.idle_spin) return Rest::none;
  if (idle < config_.idle_spin + config_.idle_yield) return Rest::yield;
  if (!may_ask_domains) return Rest::sleep;
  // No sleep while a provider holds bytes that only polling moves (tcp;ofi_rxm: a large
  // inbound WRITE brings no event until its last byte is read off the socket).
  if (domains_.provider_holds_unread_bytes()) return Rest::yield;
  return Rest::sleep_watching_domains;
}

void Worker::take_rest(Rest rest) {
  switch (rest) {
    case Rest::none:
      return;
    case Rest::yield:
      std::this_thread::yield();
      return;
    case Rest::sleep:
    case Rest::sleep_watching_domains:
      // Never so long that incoming immediates wait on an unpolled CQ for more than idle_sleep;
      // a submission or task wakes us at once, and so do bytes on a Domain's wait fd (tcp).
      sleeper_.sleep_for(config_.idle_sleep, rest == Rest::sleep_watching_domains, [this] {
        return !submissions_.empty() || tasks_.size_approx() != 0 ||
               posted_by_caller_.load(std::memory_order_seq_cst) ||
               stop_requested_.load(std::memory_order_seq_cst);
      });
      return;
  }
}

bool Worker::drain_tasks() {
  Task task;
  std::size_t n = 0;
  while (n < kTaskBatch && tasks_.try_dequeue(task)) {
    task();
    ++n;
  }
  return n > 0;
}

bool Worker::post_pass() {
  slice_.start(Clock::now());
  bool busy = false;
  if (!posting_backlog_) busy |= drain_submissions();
  busy |= progress_pending();
  posting_backlog_ = slice_.spent() && !pending_.empty();
  return busy;
}

bool Worker::drain_submissions(std::uint32_t first_posts) {
  if (taken_ == nullptr) taken_ = submissions_.take_all();
  std::size_t n = 0;
  for (; n < kSubmissionBatch && taken_ != nullptr && !slice_.spent(); ++n) {
    Op* op = taken_;
    taken_ = op->next_submitted;
    op->next_submitted = nullptr;
    if (config_.record_post_timings) op->timing.picked_up = now_ns();
    add_live(op);
    start_op(op, first_posts);
  }
  return n > 0;
}

bool Worker::progress_pending() {
  bool busy = false;
  receives_.retry_unposted();
  while (!waiting_for_staging_.empty() && staging_ && !draining_) {
    Op* op = waiting_for_staging_.front();
    auto slot = staging_->acquire();
    if (!slot) break;
    waiting_for_staging_.pop_front();
    SendPlan& send = op->send;
    send.slot = *slot;
    std::memcpy(staging_->data(*slot), send.message.data(), send.message.size());
    op->in_pending = true;
    pending_.push_back(op);
  }
  // One pass over the queue, oldest first. A request refused by its peer (`again`) goes to the
  // back and so does every later one to that peer, keeping each peer's requests in order; the
  // others post past it: a peer whose connection is not up, or that died with its receive
  // queue full, must not hold up the engine's requests to every other peer until it times out.
  // A full send queue refuses everyone: the pass stops there, the queue's order unchanged.
  refusing_peers_.clear();
  // A spent slice (post_slice.hpp) stops the pass the same way, each request keeping its place.
  for (std::size_t left = pending_.size(); left > 0;) {
    if (slice_.spent()) {
      rotate_pending(left);
      break;
    }
    --left;
    Op* op = pending_.front();
    pending_.pop_front();
    if (!op->posting_over()) {
      if (!refusing_peers_.empty() && targets_refusing_peer(op)) {
        pending_.push_back(op);
        continue;
      }
      if (!post_some(op, kUnlimited)) {
        pending_.push_back(op);
        if (last_refusal_.queue_full) {
          rotate_pending(left);
          break;
        }
        refusing_peers_.emplace_back(last_refusal_.domain, last_refusal_.peer);
        continue;
      }
      if (!op->posting_over()) {  // the slice ran out inside it
        pending_.push_back(op);
        rotate_pending(left);
        return true;
      }
    }
    busy = true;
    op->in_pending = false;
    // Its completions may all be in (or none owed, if refused): then nothing else finishes it.
    if (op->finished()) finish(op);
  }
  return busy;
}

bool Worker::targets_refusing_peer(const Op* op) const {
  // A scatter's or barrier's peers are many: it posts and is refused slice by slice.
  if (op->peers == nullptr || op->posts_past_failure()) return false;
  for (const auto& [d, peer] : refusing_peers_) {
    if (d < domains_.size() && op->peers[d] == peer) return true;
  }
  return false;
}

void Worker::rotate_pending(std::size_t n) {
  for (; n > 0; --n) {
    Op* op = pending_.front();
    pending_.pop_front();
    pending_.push_back(op);
  }
}

bool Worker::poll_domains() {
  std::array<domain::Event, 32> events;
  bool busy = false;
  for (std::size_t d = 0; d < domains_.size(); ++d) {
    const std::size_t n = domains_.domain(d).poll(events);
    // The completions of one poll share one clock read.
    const Clock::time_point now = n > 0 ? Clock::now() : Clock::time_point{};
    for (std::size_t i = 0; i < n; ++i) {
      domain::Event& ev = events[i];
      switch (ev.kind) {
        case domain::Event::Kind::imm_arrived:
          imms_.arrive(ev.imm);
          break;
        case domain::Event::Kind::recv_done:
          receives_.arrived(recv_slot(ev.token), ev.length, ev.status);
          break;
        case domain::Event::Kind::tx_done:
          on_tx_done(reinterpret_cast<Op*>(ev.token), d, std::move(ev.status), now);
          break;
      }
    }
    busy |= n > 0;
  }
  return busy;
}

// ---------------------------------------------------------------- shutdown

void Worker::shutdown_sequence() {
  // Take everything accepted so far, then let posted work drain for a while.
  drain_tasks();
  do {
    slice_.start(Clock::now());
  } while (drain_submissions());
  const auto deadline = Clock::now() + config_.drain_timeout;
  // Requests already reported (timed out) do not hold the drain up.
  while (outstanding_.load(std::memory_order_acquire) > 0 && Clock::now() < deadline) {
    drain_tasks();
    slice_.start(Clock::now());
    progress_pending();
    poll_domains();
  }
  draining_ = true;
  receives_.stop_posting();
  if (outstanding_.load(std::memory_order_acquire) > 0) {
    log::warn("stop(): failing {} requests that did not finish within drain_timeout",
              outstanding_.load());
  }
  const std::vector<Op*> left(live_.begin(), live_.end());
  pending_.clear();
  waiting_for_staging_.clear();
  for (Op* op : left) fail(op, Status(Errc::cancelled, "the engine stopped before completion"));
  registrar_.close_all();
  // Tasks that arrived late (re-posts, expectations) have nothing left to act on.
  Task task;
  while (tasks_.try_dequeue(task)) task();
  // Before the receive pools, staging and scratch buffers are freed: the provider must be done
  // with them.
  domains_.close_endpoints();
}

}  // namespace fabric::engine
