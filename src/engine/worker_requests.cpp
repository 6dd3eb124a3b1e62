// A request's life on the worker: started (its peers resolved, its first WRITE posted),
// completed operation by operation, delivered to the callback thread, expired when its peer
// falls silent, and finished. The loop that drives it is worker.cpp.

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/log.hpp"
#include "engine/worker.hpp"

namespace fabric::engine {

namespace {
using Clock = std::chrono::steady_clock;

// A new request posts its first WRITE at once; the rest waits its turn.
constexpr std::uint32_t kFirstPost = 1;
// A request whose peer answers other requests is slow, not lost, and waits on: but not for
// ever. Once the provider has completed as many operations as it held before the request's
// latest one, and this many request_timeouts have passed since without one completion of its
// own, the provider is taken to hold it for good (libfabric 1.17's shm does with WRITEs to a
// live peer posted as a third peer was killed), and it fails. Counted from when those ahead
// drained, not from the request's start: behind a window of 1 GiB that tcp drains in 2 s under
// a sanitizer, a healthy WRITE waits longer than this bound (DeepWindowTest).
constexpr int kHeldByProviderTimeouts = 6;
}  // namespace

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
    finish(op, to_ns(now));
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

bool Worker::held_by_provider(Op* op, Clock::time_point now) const {
  if (op->ahead_drained == Op::kNotDrained) {
    if (domains_.completions(op->queue_domain) < op->posted_ahead) return false;
    op->ahead_drained = now;
  }
  const auto since = std::max(op->last_progress, op->ahead_drained);
  return now - since > kHeldByProviderTimeouts * config_.request_timeout;
}

void Worker::expire_stalled(Clock::time_point now) {
  std::vector<Op*> expired;
  const auto timeout = config_.request_timeout;
  for (Op* op : live_) {
    if (op->delivered || now - op->last_progress <= timeout) continue;
    const bool peer_silent = now - last_heard(op) > timeout;
    // Only posted operations: a request still waiting for its turn to post is the queue's.
    const bool held = op->posted > op->done && held_by_provider(op, now);
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
                      "of {} operations done, {} posted, those posted before them "
                      "completed): the provider holds them",
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

}  // namespace fabric::engine
