#include "engine/worker.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "common/log.hpp"
#include "engine/device_allocation.hpp"

namespace fabric::engine {

namespace {
using Clock = std::chrono::steady_clock;

// Whether a cached peer's Domains are the owner's: byte compares only (the backend and
// provider of every owner were checked at submit, against this engine's own).
bool same_domain_addresses(const NetAddr& cached, const NetAddr& owner) {
  if (cached.num_domains() != owner.num_domains()) return false;
  for (std::size_t d = 0; d < owner.num_domains(); ++d) {
    const auto a = cached.domain_address(d);
    const auto b = owner.domain_address(d);
    if (a.size() != b.size() || std::memcmp(a.data(), b.data(), a.size()) != 0) return false;
  }
  return true;
}
constexpr std::size_t kScratchBytes = 64;
constexpr std::size_t kSubmissionBatch = 64;
constexpr std::size_t kTaskBatch = 64;
// A new request posts its first WRITE at once; the rest waits its turn.
constexpr std::uint32_t kFirstPost = 1;
constexpr std::uint32_t kUnlimited = ~std::uint32_t{0};
constexpr auto kExpiryCheckInterval = std::chrono::milliseconds(5);

domain::Token op_token(Op* op) { return reinterpret_cast<domain::Token>(op); }
}  // namespace

Worker::Worker(std::vector<std::unique_ptr<domain::Domain>> domains, const EngineConfig& config,
               CallbackThread& callbacks)
    : domains_(std::move(domains)),
      config_(config),
      callbacks_(callbacks),
      tx_in_flight_(domains_.size(), 0),
      tx_depth_(domains_.size(), 0),
      peer_progress_(domains_.size()),
      imms_([this](ImmCallback cb, std::uint32_t imm, std::uint64_t count) {
        callbacks_.post([cb = std::move(cb), imm, count] {
          if (cb) cb(imm, count);
        });
      }) {
  for (std::size_t d = 0; d < domains_.size(); ++d) tx_depth_[d] = domains_[d]->limits().tx_depth;
}

Worker::~Worker() { (void)stop(); }

Status Worker::prepare() {
  scratch_ = std::make_unique<std::byte[]>(kScratchBytes);
  for (auto& d : domains_) {
    auto region =
        d->register_memory(domain::MemorySpan::host(scratch_.get(), kScratchBytes),
                            static_cast<Access>(0));
    if (!region) return region.status();
    scratch_regions_.push_back(std::move(region).value());
  }
  if (domains_.front()->limits().needs_local_desc) {
    auto staging =
        SendStaging::create(*domains_.front(), config_.max_message_size, config_.send_slots);
    if (!staging) return staging.status();
    staging_.emplace(std::move(staging).value());
  }
  return Status::success();
}

void Worker::start(CpuSet cpus) {
  thread_ = std::thread([this, cpus = std::move(cpus)] {
    if (!cpus.empty()) {
      if (auto st = pin_current_thread(cpus); !st.ok()) {
        log::warn("worker stays unpinned: {}", st.to_string());
      }
    }
    run();
    thread_ended_.set_value();
  });
}

bool Worker::admit() noexcept {
  std::uint32_t cur = outstanding_.load(std::memory_order_relaxed);
  do {
    if (cur >= config_.max_outstanding_requests) return false;
  } while (!outstanding_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel));
  return true;
}

void Worker::submit(OpPtr op) {
  submissions_.enqueue(std::move(op));
  wake();
}

void Worker::post_task(Task task) {
  tasks_.enqueue(std::move(task));
  wake();
}

void Worker::wake() {
  if (sleeping_.load(std::memory_order_seq_cst)) {
    std::lock_guard lock(sleep_mutex_);
    sleep_cv_.notify_one();
  }
}

bool Worker::wait_thread_ended(std::chrono::milliseconds timeout) const {
  return ended_.wait_for(timeout) == std::future_status::ready;
}

bool Worker::stop() {
  if (stopped_) return joined_;
  stopped_ = true;
  stop_requested_.store(true, std::memory_order_seq_cst);
  if (!thread_.joinable()) {
    shutdown_sequence();
    return true;
  }
  {
    // Unconditionally: the worker may be about to sleep.
    std::lock_guard lock(sleep_mutex_);
    sleep_cv_.notify_one();
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
    {
      std::unique_lock loop(loop_mutex_, std::try_to_lock);
      if (!loop) {
        // A caller inside assist() runs this pass for us. Tasks and request expiry are this
        // thread's alone: then ask callers to stand back and retry at once, so a caller that
        // progresses without pause cannot starve them. Otherwise back off as if idle.
        if (tasks_.size_approx() != 0 || Clock::now() >= next_expiry_check) {
          worker_wants_loop_.store(true, std::memory_order_relaxed);
          std::this_thread::yield();
        } else if (!config_.busy_poll) {
          idle_wait(last_busy);
        }
        continue;
      }
      worker_wants_loop_.store(false, std::memory_order_relaxed);
      busy = drain_tasks();
      busy |= drain_submissions();
      busy |= progress_pending();
      busy |= poll_domains();
      now = Clock::now();
      if (now >= next_expiry_check) {
        expire_stalled(now);
        next_expiry_check = now + kExpiryCheckInterval;
      }
    }
    if (busy) {
      last_busy = now;
    } else if (!config_.busy_poll) {
      idle_wait(last_busy);
    }
  }
  // After any assist() pass in flight; later ones see stop_requested_ and do nothing.
  std::lock_guard loop(loop_mutex_);
  shutdown_sequence();
}

void Worker::idle_wait(Clock::time_point last_busy) {
  const auto idle = Clock::now() - last_busy;
  if (idle < config_.idle_spin) return;
  if (idle < config_.idle_spin + config_.idle_yield) {
    std::this_thread::yield();
    return;
  }
  // Sleep, but never so long that incoming immediates wait on an unpolled CQ
  // for more than idle_sleep; a submission wakes us at once.
  std::unique_lock lock(sleep_mutex_);
  sleeping_.store(true, std::memory_order_seq_cst);
  if (submissions_.size_approx() == 0 && tasks_.size_approx() == 0 &&
      !stop_requested_.load(std::memory_order_seq_cst)) {
    sleep_cv_.wait_for(lock, config_.idle_sleep);
  }
  sleeping_.store(false, std::memory_order_relaxed);
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

bool Worker::drain_submissions() {
  std::array<OpPtr, kSubmissionBatch> batch;
  const std::size_t n = submissions_.try_dequeue_bulk(batch.begin(), batch.size());
  for (std::size_t i = 0; i < n; ++i) {
    Op* op = batch[i].release();
    if (config_.record_post_timings) op->timing.picked_up = now_ns();
    add_live(op);
    start_op(op);
  }
  return n > 0;
}

bool Worker::progress_pending() {
  bool busy = false;
  retry_unposted_recvs();
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
  while (!pending_.empty()) {
    Op* op = pending_.front();
    if (!op->posting_over() && !post_some(op, kUnlimited)) break;
    busy = true;
    pending_.pop_front();
    op->in_pending = false;
    // Its completions may all be in (or none owed, if refused): then nothing else finishes it.
    if (op->finished()) finish(op);
  }
  return busy;
}

bool Worker::poll_domains() {
  std::array<domain::Event, 32> events;
  bool busy = false;
  for (std::size_t d = 0; d < domains_.size(); ++d) {
    const std::size_t n = domains_[d]->poll(events);
    // The completions of one poll share one clock read.
    const Clock::time_point now = n > 0 ? Clock::now() : Clock::time_point{};
    for (std::size_t i = 0; i < n; ++i) {
      domain::Event& ev = events[i];
      switch (ev.kind) {
        case domain::Event::Kind::imm_arrived:
          imms_.arrive(ev.imm);
          break;
        case domain::Event::Kind::recv_done:
          on_recv(recv_slot(ev.token), ev.length, ev.status);
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

void Worker::start_op(Op* op) {
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
      op->total = static_cast<std::uint32_t>(op->single.pieces.size());
      break;
    case OpKind::scatter:
      op->total = static_cast<std::uint32_t>(op->scatter.pieces.size());
      break;
    case OpKind::paged:
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
  (void)post_some(op, pending_.empty() ? kUnlimited : kFirstPost);
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
  if (op->group) {
    auto it = peer_groups_.find(*op->group);
    if (it == peer_groups_.end()) {
      return {Errc::not_found, fmt::format("unknown peer group {}", *op->group)};
    }
    op->peers = it->second.data();
    return Status::success();
  }
  // The owners whose Domains this op writes to, in peer order.
  const std::vector<MrDesc>* dsts = op->kind == OpKind::scatter   ? &op->scatter.dsts
                                    : op->kind == OpKind::barrier ? &op->barrier.dsts
                                                                  : nullptr;
  if (dsts != nullptr) {
    op->own_peers.resize(dsts->size() * k);
    for (std::size_t p = 0; p < dsts->size(); ++p) {
      if (auto st = resolve_owner((*dsts)[p].owner(), op->own_peers.data() + p * k); !st.ok()) {
        return st;
      }
    }
  } else {
    op->own_peers.resize(k);
    const NetAddr& owner = op->kind == OpKind::send ? op->send.to : op->dst.owner();
    if (auto st = resolve_owner(owner, op->own_peers.data()); !st.ok()) return st;
  }
  op->peers = op->own_peers.data();
  return Status::success();
}

Status Worker::resolve_owner(const NetAddr& owner, domain::PeerHandle* out) {
  const std::size_t k = domains_.size();
  if (auto it = peer_cache_.find(owner.instance_id());
      it != peer_cache_.end() && same_domain_addresses(it->second.address, owner)) {
    std::copy_n(it->second.handles.begin(), k, out);
    return Status::success();
  }
  CachedPeer resolved;
  for (std::size_t d = 0; d < k; ++d) {
    auto handle = domains_[d]->resolve_peer(owner.domain_address(d));
    if (!handle) return handle.status();
    resolved.handles[d] = *handle;
  }
  std::copy_n(resolved.handles.begin(), k, out);
  resolved.address = owner;
  peer_cache_.insert_or_assign(owner.instance_id(), std::move(resolved));
  return Status::success();
}

Result<std::uint64_t> Worker::add_peer_group(const std::vector<NetAddr>& peers) {
  const std::size_t k = domains_.size();
  std::vector<domain::PeerHandle> table(peers.size() * k);
  for (std::size_t p = 0; p < peers.size(); ++p) {
    for (std::size_t d = 0; d < k; ++d) {
      auto handle = domains_[d]->resolve_peer(peers[p].domain_address(d));
      if (!handle) return handle.status();
      table[p * k + d] = *handle;
    }
  }
  const std::uint64_t id = next_group_id_++;
  peer_groups_.emplace(id, std::move(table));
  return id;
}

Status Worker::fence_peer(const NetAddr& peer) {
  // The Domains forget the peer's address; so does the cache, or the next request would use
  // the handle they dropped.
  peer_cache_.erase(peer.instance_id());
  for (std::size_t d = 0; d < domains_.size(); ++d) {
    if (auto st = domains_[d]->fence_peer(peer.domain_address(d)); !st.ok()) return st;
  }
  return Status::success();
}

bool Worker::post_some(Op* op, std::uint32_t max_wrs) {
  // A scatter or barrier reaches several peers, each counting its own immediates: one gone peer
  // must not starve the others, so their slices are still posted and the request fails at the
  // end. A single-peer request stops at its first refused WRITE.
  const bool multi_peer = op->posts_past_failure();
  std::uint32_t n = 0;
  while (!op->posting_over() && n < max_wrs) {
    Status st = post_one(op);
    if (st.code() == Errc::again) return false;
    if (!st.ok()) {
      if (!multi_peer) {
        op->error = std::move(st);
        return true;
      }
      if (op->error.ok()) op->error = std::move(st);
      // Refused: counted as posted and done, there is no completion to wait for.
      ++op->posted;
      ++op->done;
    }
    ++n;
  }
  return true;
}

Status Worker::post_one(Op* op) {
  const std::uint32_t i = op->posted;
  const auto keys = op->dst.keys();
  const auto local = [&](std::uint64_t offset) {
    return static_cast<const std::byte*>(op->src->ptr) + offset;
  };
  std::uint32_t d = 0;
  std::uint32_t peer = 0;
  std::optional<std::uint64_t> rkey;
  domain::WriteDesc w;
  w.imm = op->imm;
  w.token = op_token(op);
  switch (op->kind) {
    case OpKind::single: {
      const SinglePlan& plan = op->single;
      const WritePiece& piece = plan.pieces[i];
      d = piece.domain;
      w.local = local(plan.src_offset + piece.offset);
      w.length = piece.length;
      w.local_desc = op->src->regions[d]->local_desc();
      w.remote_addr = keys[d].addr_base + plan.dst_offset + piece.offset;
      break;
    }
    case OpKind::paged: {
      const PagedPlan& plan = op->paged;
      d = static_cast<std::uint32_t>(i % domains_.size());
      w.local = local(plan.src.offset + std::uint64_t{plan.src.indices[i]} * plan.src.stride);
      w.length = plan.page_length;
      w.local_desc = op->src->regions[d]->local_desc();
      w.remote_addr =
          keys[d].addr_base + plan.dst.offset + std::uint64_t{plan.dst.indices[i]} * plan.dst.stride;
      break;
    }
    case OpKind::imm:
      w.local = scratch_.get();
      w.length = 0;
      w.local_desc = scratch_regions_[0]->local_desc();
      w.remote_addr = keys[0].addr_base;
      break;
    case OpKind::scatter: {
      const ScatterPiece& piece = op->scatter.pieces[i];
      d = piece.domain;
      peer = piece.peer;
      const RemoteKey& key = op->scatter.dsts[peer].keys()[d];
      w.local = local(piece.src_offset);
      w.length = piece.length;
      w.local_desc = op->src->regions[d]->local_desc();
      w.remote_addr = key.addr_base + piece.dst_offset;
      rkey = key.rkey;
      break;
    }
    case OpKind::barrier: {
      d = static_cast<std::uint32_t>(i % domains_.size());
      peer = i;
      const RemoteKey& key = op->barrier.dsts[peer].keys()[d];
      w.local = scratch_.get();
      w.length = 0;
      w.local_desc = scratch_regions_[d]->local_desc();
      w.remote_addr = key.addr_base;
      rkey = key.rkey;
      break;
    }
    case OpKind::send:
      break;
  }
  if (tx_in_flight_[d] >= tx_depth_[d]) return Status(Errc::again, {});
  const Status st = [&] {
    if (op->kind == OpKind::send) {
      const SendPlan& plan = op->send;
      const void* buf = staging_ ? static_cast<const void*>(staging_->data(plan.slot))
                                 : static_cast<const void*>(plan.message.data());
      void* desc = staging_ ? staging_->desc() : nullptr;
      return domains_[0]->post_send(op->peers[0], buf, plan.message.size(), desc, op_token(op));
    }
    w.peer = op->peers[std::size_t{peer} * domains_.size() + d];
    w.rkey = rkey ? *rkey : keys[d].rkey;
    return domains_[d]->post_write(w);
  }();
  if (st.ok()) {
    ++op->posted;
    ++tx_in_flight_[d];
    if (config_.record_post_timings) {
      const std::uint64_t t = now_ns();
      if (op->posted == 1) op->timing.first_post = t;
      if (op->fully_posted()) {
        op->timing.last_post = t;
        op->timing.posts = op->posted;
        record_timing(op);
      }
    }
  }
  return st;
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
  --tx_in_flight_[domain];
  ++op->done;
  op->last_progress = now;
  if (status.ok() && op->peers != nullptr && !op->posts_past_failure()) {
    peer_progress_[domain][op->peers[domain]] = op->last_progress;
  }
  if (!status.ok() && op->error.ok()) op->error = std::move(status);
  if (op->finished() && !op->in_pending) finish(op);
}

void Worker::deliver(Op* op) {
  if (op->delivered) return;
  op->delivered = true;
  outstanding_.fetch_sub(1, std::memory_order_acq_rel);
  if (op->on_done.needs_callback_thread()) {
    // A completion record, not a task: no closure to allocate per request.
    callbacks_.post_completion(std::move(op->on_done), op->error);
  } else {
    op->on_done.deliver(op->error);
  }
}

void Worker::finish(Op* op) {
  deliver(op);
  if (op->src) release_registration_use(*op->src);
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
  Clock::time_point latest = op->last_progress;
  // A scatter's or barrier's peers are several: each must answer for its own slices.
  if (op->peers == nullptr || op->posts_past_failure()) return latest;
  for (std::size_t d = 0; d < domains_.size(); ++d) {
    const auto it = peer_progress_[d].find(op->peers[d]);
    if (it != peer_progress_[d].end()) latest = std::max(latest, it->second);
  }
  return latest;
}

void Worker::expire_stalled(Clock::time_point now) {
  std::vector<Op*> expired;
  for (Op* op : live_) {
    if (!op->delivered && now - op->last_progress > config_.request_timeout &&
        now - last_heard(op) > config_.request_timeout) {
      expired.push_back(op);
    }
  }
  // How full the providers' send queues are tells who stalled: operations
  // posted but never completed are the provider's; a request never posted
  // while the queues are full waits behind completions the provider owes.
  std::uint64_t queued = 0;
  std::uint64_t depth = 0;
  for (std::size_t d = 0; d < domains_.size(); ++d) {
    queued += tx_in_flight_[d];
    depth += domains_[d]->limits().tx_depth;
  }
  for (Op* op : expired) {
    if (op->error.ok()) {
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
    }
  }
}

void Worker::fail(Op* op, Status status) {
  if (op->error.ok()) op->error = std::move(status);
  op->done = op->posted;
  finish(op);
}

// ---------------------------------------------------------------- receives

Status Worker::add_recv_pool(std::size_t buffer_size, std::uint32_t count, RecvCallback on_recv) {
  auto pool = std::make_unique<RecvPool>();
  pool->buffer_size = buffer_size;
  pool->on_recv = std::move(on_recv);
  pool->memory = std::make_unique<std::byte[]>(buffer_size * count);
  auto region = domains_.front()->register_memory(
      domain::MemorySpan::host(pool->memory.get(), buffer_size * count), static_cast<Access>(0));
  if (!region) return region.status();
  pool->region = std::move(region).value();
  pool->slots.resize(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    pool->slots[i] = RecvSlot{pool.get(), pool->memory.get() + std::size_t{i} * buffer_size};
  }
  RecvPool* raw = pool.get();
  recv_pools_.push_back(std::move(pool));
  for (auto& slot : raw->slots) post_recv(&slot);
  return Status::success();
}

void Worker::post_recv(RecvSlot* slot) {
  if (draining_) return;
  Status st = domains_.front()->post_recv(slot->data, slot->pool->buffer_size,
                                          slot->pool->region->local_desc(), recv_token(slot));
  if (st.code() == Errc::again) {
    unposted_recvs_.push_back(slot);
  } else if (!st.ok()) {
    log::error("posting a receive buffer failed: {}", st.to_string());
    unposted_recvs_.push_back(slot);
  }
}

void Worker::retry_unposted_recvs() {
  std::size_t n = unposted_recvs_.size();
  while (n-- > 0 && !unposted_recvs_.empty()) {
    RecvSlot* slot = unposted_recvs_.front();
    unposted_recvs_.pop_front();
    Status st = domains_.front()->post_recv(slot->data, slot->pool->buffer_size,
                                            slot->pool->region->local_desc(), recv_token(slot));
    if (!st.ok()) {
      unposted_recvs_.push_front(slot);
      return;
    }
  }
}

void Worker::on_recv(RecvSlot* slot, std::size_t length, const Status& status) {
  if (!status.ok()) {
    if (!draining_) log::warn("receive failed: {}", status.to_string());
    post_recv(slot);
    return;
  }
  callbacks_.post([this, slot, length] {
    slot->pool->on_recv(std::span<const std::byte>(slot->data, length));
    // Re-post from the worker: Domains are single-threaded.
    post_task([this, slot] { post_recv(slot); });
  });
}

// ---------------------------------------------------------------- memory

Result<Registered> Worker::register_memory(void* ptr, std::size_t length, Device device,
                                           Access access, const NetAddr& self,
                                           const void* engine) {
  auto reg = std::make_shared<detail::Registration>();
  reg->ptr = ptr;
  reg->length = length;
  reg->device = device;
  reg->access = access;
  reg->engine = engine;
  std::vector<RemoteKey> keys;
  if (device.is_host()) {
    for (auto& d : domains_) {
      auto region = d->register_memory(domain::MemorySpan::host(ptr, length), access);
      if (!region) return region.status();
      keys.push_back(region.value()->remote_key());
      reg->regions.push_back(std::move(region).value());
    }
  } else {
    auto found = device_regions(ptr, length, device, access);
    if (!found) return found.status();
    auto& [regions, offset] = *found;
    for (const auto& region : regions) {
      // Remote addresses are relative to the key's base: move it to ptr.
      RemoteKey key = region->remote_key();
      key.addr_base += offset;
      keys.push_back(key);
    }
    reg->regions = std::move(regions);
  }
  auto desc = MrDesc::make(self, reinterpret_cast<std::uint64_t>(ptr), length, std::move(keys));
  if (!desc) return desc.status();
  registrations_.push_back(reg);
  return Registered{MrHandle(reg), std::move(desc).value()};
}

Result<std::pair<std::vector<std::shared_ptr<domain::MemoryRegion>>, std::uint64_t>>
Worker::device_regions(void* ptr, std::size_t length, Device device, Access access) {
  auto alloc = find_device_allocation(ptr, length, device);
  if (!alloc) return alloc.status();
  const std::uint64_t offset = reinterpret_cast<std::uintptr_t>(ptr) - alloc->base;
  const auto key = std::make_tuple(device.index, alloc->base, alloc->size,
                                   static_cast<std::uint32_t>(access));
  std::vector<std::shared_ptr<domain::MemoryRegion>> regions;
  if (auto it = device_regions_.find(key); it != device_regions_.end()) {
    for (const auto& weak : it->second) {
      if (auto region = weak.lock()) regions.push_back(std::move(region));
    }
    if (regions.size() == domains_.size()) return std::make_pair(std::move(regions), offset);
    regions.clear();
  }
  const domain::MemorySpan span{reinterpret_cast<void*>(alloc->base), alloc->size, device,
                                alloc->dmabuf.get(), 0};
  std::vector<std::weak_ptr<domain::MemoryRegion>> cached;
  for (auto& d : domains_) {
    auto region = d->register_memory(span, access);
    if (!region) return region.status();
    regions.push_back(std::move(region).value());
    cached.push_back(regions.back());
  }
  std::erase_if(device_regions_, [](const auto& entry) {
    return entry.second.empty() || entry.second.front().expired();
  });
  device_regions_[key] = std::move(cached);
  log::debug("registered the {} allocation [{:#x}, +{}) on {} Domain(s)", device.to_string(),
             alloc->base, alloc->size, domains_.size());
  return std::make_pair(std::move(regions), offset);
}

void Worker::deregister(std::shared_ptr<detail::Registration> reg, std::promise<Status> done) {
  reg->alive.store(false, std::memory_order_release);
  if (reg->in_flight.load(std::memory_order_acquire) > 0) {
    deferred_deregs_.emplace_back(std::move(reg), std::move(done));
    return;
  }
  close_registration(*reg);
  done.set_value(Status::success());
}

void Worker::release_registration_use(detail::Registration& reg) {
  if (reg.in_flight.fetch_sub(1, std::memory_order_acq_rel) > 1 ||
      reg.alive.load(std::memory_order_acquire)) {
    return;
  }
  for (auto it = deferred_deregs_.begin(); it != deferred_deregs_.end(); ++it) {
    if (it->first.get() == &reg) {
      close_registration(reg);
      it->second.set_value(Status::success());
      deferred_deregs_.erase(it);
      return;
    }
  }
}

void Worker::close_registration(detail::Registration& reg) {
  reg.regions.clear();
  std::erase_if(registrations_, [&](const auto& r) { return r.get() == &reg; });
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
  if (outstanding_.load(std::memory_order_acquire) > 0) {
    log::warn("stop(): failing {} requests that did not finish within drain_timeout",
              outstanding_.load());
  }
  const std::vector<Op*> left(live_.begin(), live_.end());
  pending_.clear();
  waiting_for_staging_.clear();
  for (Op* op : left) fail(op, Status(Errc::cancelled, "the engine stopped before completion"));
  for (auto& [reg, promise] : deferred_deregs_) {
    reg->regions.clear();
    promise.set_value(Status::success());
  }
  deferred_deregs_.clear();
  for (auto& reg : registrations_) {
    reg->alive.store(false, std::memory_order_release);
    reg->regions.clear();
  }
  registrations_.clear();
  // Tasks that arrived late (re-posts, expectations) have nothing left to act on.
  Task task;
  while (tasks_.try_dequeue(task)) task();
  // Before the receive pools, staging and scratch buffers are freed (members of this Worker,
  // destroyed before the Domains): the provider must be done with them.
  for (auto& d : domains_) d->close_endpoint();
}

}  // namespace fabric::engine
