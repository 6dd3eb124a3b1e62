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
// A new request posts its first WRITE at once; the rest waits its turn.
constexpr std::uint32_t kFirstPost = 1;
constexpr std::uint32_t kUnlimited = ~std::uint32_t{0};
constexpr auto kExpiryCheckInterval = std::chrono::milliseconds(5);
// A request whose peer answers other requests is slow, not lost, and waits on: but not for
// ever. Past this many request_timeouts without one completion of its own, the provider is
// taken to hold it for good (libfabric 1.17's shm does with WRITEs to a live peer posted as a
// third peer was killed), and it fails.
constexpr int kHeldByProviderTimeouts = 6;
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
      busy |= drain_submissions();
      busy |= progress_pending();
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

bool Worker::drain_submissions(std::uint32_t first_posts) {
  if (taken_ == nullptr) taken_ = submissions_.take_all();
  std::size_t n = 0;
  for (; n < kSubmissionBatch && taken_ != nullptr; ++n) {
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
  for (std::size_t left = pending_.size(); left > 0;) {
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

// ---------------------------------------------------------------- requests

void Worker::start_op(Op* op, std::uint32_t first_posts) {
  op->last_progress = Clock::now();
  // The request's use of its source was counted when it was accepted, so a
  // dereg_mr() since then waits for it. Only a dereg that overtook the
  // submission (another thread, between its checks and its acceptance) has
  // closed the regions already.
  if (op->src && op->src->regions.empty()) {
    op->error = Status(Errc::invalid_argument,
                       "the source registration was deregistered before the request was accepted");
    finish(op);
    return;
  }
  if (auto st = resolve_peers(op); !st.ok()) {
    op->error = std::move(st);
    finish(op);
    return;
  }

  switch (op->kind) {
    case OpKind::single:
    case OpKind::single_read:
      op->total = static_cast<std::uint32_t>(op->single.pieces.size());
      break;
    case OpKind::scatter:
      op->total = static_cast<std::uint32_t>(op->scatter.pieces.size());
      break;
    case OpKind::paged:
    case OpKind::paged_read:
      op->total = static_cast<std::uint32_t>(op->paged.src.indices.size());
      break;
    case OpKind::barrier:
      op->total = static_cast<std::uint32_t>(op->barrier.dsts.size());
      break;
    case OpKind::imm:
    case OpKind::send:
      op->total = 1;
      break;
  }
  if (op->total == 0) {
    finish(op);
    return;
  }

  if (SendPlan* send = op->kind == OpKind::send ? &op->send : nullptr; send && staging_) {
    auto slot = staging_->acquire();
    if (!slot) {
      waiting_for_staging_.push_back(op);
      return;
    }
    send->slot = *slot;
    std::memcpy(staging_->data(*slot), send->message.data(), send->message.size());
  }

  // Older requests keep their place: a newcomer posts one WRITE, then queues.
  (void)post_some(op, pending_.empty() ? first_posts : kFirstPost);
  if (op->finished()) {  // refused outright: nothing is owed by the provider
    finish(op);
    return;
  }
  if (!op->posting_over()) {
    op->in_pending = true;
    pending_.push_back(op);
  }
}

Status Worker::resolve_peers(Op* op) {
  const std::size_t k = domains_.size();
  // The owners whose Domains this op writes to, in peer order.
  const std::vector<MrDesc>* dsts = op->kind == OpKind::scatter   ? &op->scatter.dsts
                                    : op->kind == OpKind::barrier ? &op->barrier.dsts
                                                                  : nullptr;
  if (op->group) {
    const auto* table = domains_.peer_group(*op->group);
    if (table == nullptr || dsts == nullptr || table->size() != dsts->size()) {
      return {Errc::not_found, fmt::format("unknown peer group {}", *op->group)};
    }
    // Each peer's handles for the group its slice's memory belongs to (checked at submit).
    op->own_peers.resize(dsts->size() * k);
    for (std::size_t p = 0; p < dsts->size(); ++p) {
      const auto& handles = (*table)[p];
      std::copy_n(handles.begin() + std::size_t{(*dsts)[p].group()} * k, k,
                  op->own_peers.begin() + p * k);
    }
    op->peers = op->own_peers.data();
    return Status::success();
  }
  if (dsts != nullptr) {
    op->own_peers.resize(dsts->size() * k);
    for (std::size_t p = 0; p < dsts->size(); ++p) {
      const MrDesc& dst = (*dsts)[p];
      if (auto st = domains_.resolve_owner(dst, op->own_peers.data() + p * k); !st.ok()) {
        return st;
      }
    }
  } else {
    op->own_peers.resize(k);
    // SENDs go to the peer's group 0, whose Domain 0 holds the receive buffers.
    const Status st =
        op->kind == OpKind::send
            ? domains_.resolve_owner(op->send.to, 0, op->own_peers.data(), &op->peer_slot)
            : domains_.resolve_owner(op->dst, op->own_peers.data(), &op->peer_slot);
    if (!st.ok()) return st;
  }
  op->peers = op->own_peers.data();
  return Status::success();
}

void Worker::record_timing(Op* op) {
  std::lock_guard lock(timings_mutex_);
  if (timings_.size() < config_.max_post_timings) timings_.push_back(op->timing);
}

std::vector<PostTiming> Worker::take_post_timings() {
  std::lock_guard lock(timings_mutex_);
  return std::exchange(timings_, {});
}

void Worker::on_tx_done(Op* op, std::size_t domain, Status status, Clock::time_point now) {
  ++op->done;
  op->last_progress = now;
  const bool answered = status.ok() && op->peers != nullptr && !op->posts_past_failure();
  domains_.completed(domain, answered ? &op->peers[domain] : nullptr, now);
  if (!status.ok() && op->error.ok()) op->error = std::move(status);
  if (op->finished() && !op->in_pending) {
    // The poll's own clock read: one per poll, not one more per request for its latency.
    finish(op, static_cast<std::uint64_t>(
                   std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count()));
  }
}

void Worker::deliver(Op* op, std::uint64_t now) {
  if (op->delivered) return;
  op->delivered = true;
  if (config_.metrics) request_metrics_.record(*op, now != 0 ? now : now_ns());
  outstanding_.fetch_sub(1, std::memory_order_acq_rel);
  admission_.release();
  if (op->on_done.needs_callback_thread()) {
    // A completion record, not a task: no closure to allocate per request.
    callbacks_.post_completion(std::move(op->on_done), op->error);
  } else {
    op->on_done.deliver(op->error);
  }
}

void Worker::finish(Op* op, std::uint64_t now) {
  // Reported before now: expire_stalled gave up on it while its operations were still out.
  if (op->delivered && config_.metrics) request_metrics_.held(false);
  deliver(op, now);
  if (op->src) registrar_.release_use(*op->src);
  if (op->kind == OpKind::send && op->send.slot >= 0 && staging_) {
    staging_->release(op->send.slot);
  }
  remove_live(op);
  pool_.release(op);
}

void Worker::add_live(Op* op) {
  op->live_index = static_cast<std::uint32_t>(live_.size());
  live_.push_back(op);
}

void Worker::remove_live(Op* op) {
  Op* last = live_.back();
  live_[op->live_index] = last;
  last->live_index = op->live_index;
  live_.pop_back();
}

Clock::time_point Worker::last_heard(const Op* op) const {
  // A scatter's or barrier's peers are several: each must answer for its own slices.
  if (op->peers == nullptr || op->posts_past_failure()) return op->last_progress;
  return domains_.last_heard(op->peers, op->last_progress);
}

void Worker::expire_stalled(Clock::time_point now) {
  std::vector<Op*> expired;
  const auto timeout = config_.request_timeout;
  for (Op* op : live_) {
    if (op->delivered || now - op->last_progress <= timeout) continue;
    const bool peer_silent = now - last_heard(op) > timeout;
    // Only posted operations: a request still waiting for its turn to post is the queue's.
    const bool held =
        op->posted > op->done && now - op->last_progress > kHeldByProviderTimeouts * timeout;
    if (peer_silent || held) expired.push_back(op);
  }
  // How full the providers' send queues are tells who stalled: operations
  // posted but never completed are the provider's; a request never posted
  // while the queues are full waits behind completions the provider owes.
  const std::uint64_t queued = domains_.in_flight();
  const std::uint64_t depth = domains_.depth();
  for (Op* op : expired) {
    if (op->error.ok() && now - last_heard(op) <= timeout) {
      op->error = Status(
          Errc::timeout,
          fmt::format("no completion for {} ms although the peer completes other requests ({} "
                      "of {} operations done, {} posted): the provider holds them",
                      std::chrono::duration_cast<std::chrono::milliseconds>(
                          now - op->last_progress)
                          .count(),
                      op->done, op->total, op->posted));
    } else if (op->error.ok()) {
      // A scatter's or barrier's silent peer is one of several, not told apart here.
      if (!op->posts_past_failure()) note_peer_gone(op, 0);
      op->error = Status(
          Errc::timeout,
          fmt::format("no completion from the peer for {} ms ({} of {} operations done, {} "
                      "posted; the provider holds {} of {} send-queue entries); the peer may be "
                      "dead or unreachable",
                      config_.request_timeout.count(), op->done, op->total, op->posted, queued,
                      depth));
    }
    if (std::erase(waiting_for_staging_, op) > 0) {
      finish(op);
    } else if (op->finished() && !op->in_pending) {
      finish(op);
    } else {
      // Posted operations still belong to the provider: report now, free the
      // op when the last of them completes (or at stop()).
      deliver(op);
      if (config_.metrics) request_metrics_.held(true);
    }
  }
}

void Worker::note_peer_gone(const Op* op, std::uint32_t peer) {
  const NetAddr* owner = nullptr;
  switch (op->kind) {
    case OpKind::send: owner = &op->send.to; break;
    case OpKind::scatter:
      if (peer < op->scatter.dsts.size()) owner = &op->scatter.dsts[peer].owner();
      break;
    case OpKind::barrier:
      if (peer < op->barrier.dsts.size()) owner = &op->barrier.dsts[peer].owner();
      break;
    default: owner = &op->dst.owner(); break;
  }
  if (owner != nullptr) peers_.lost(owner->instance_id());
}

void Worker::fail(Op* op, Status status) {
  if (op->error.ok()) op->error = std::move(status);
  op->done = op->posted;
  finish(op);
}

// ---------------------------------------------------------------- shutdown

void Worker::shutdown_sequence() {
  // Take everything accepted so far, then let posted work drain for a while.
  drain_tasks();
  while (drain_submissions()) {
  }
  const auto deadline = Clock::now() + config_.drain_timeout;
  // Requests already reported (timed out) do not hold the drain up.
  while (outstanding_.load(std::memory_order_acquire) > 0 && Clock::now() < deadline) {
    drain_tasks();
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
