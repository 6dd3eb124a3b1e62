// Worker::post_some: how an accepted request's WRITEs reach the provider.
//
// One loop per request kind. What every WRITE of a request shares (its source's descriptor and
// its destination's base and key on each Domain) is read once per call, not once per WRITE: a
// 64-page write used to pay two virtual calls, a shared-state read and a switch on the kind for
// every page (docs/benchmarks.md, "Instructions per request").

#include <array>
#include <cstring>
#include <type_traits>

#include "engine/worker.hpp"

namespace fabric::engine {

namespace {

domain::Token op_token(Op* op) { return reinterpret_cast<domain::Token>(op); }

// Where one WRITE goes: the Domain that posts it and the peer (index into the op's peers).
struct Target {
  std::uint32_t domain = 0;
  std::uint32_t peer = 0;
};

// Per Domain: the source region's descriptor.
std::array<void*, NetAddr::kMaxDomains> source_descs(const Op& op, std::size_t domains) {
  std::array<void*, NetAddr::kMaxDomains> descs{};
  for (std::size_t d = 0; d < domains; ++d) descs[d] = op.src->regions[d]->local_desc();
  return descs;
}

// Per Domain: the source region's descriptor and the destination's address base and key.
struct Endpoints {
  std::array<void*, NetAddr::kMaxDomains> local_desc{};
  std::array<std::uint64_t, NetAddr::kMaxDomains> remote_base{};
  std::array<std::uint64_t, NetAddr::kMaxDomains> rkey{};

  Endpoints(const Op& op, std::size_t domains, std::uint64_t dst_offset)
      : local_desc(source_descs(op, domains)) {
    const auto keys = op.dst.keys();
    for (std::size_t d = 0; d < domains; ++d) {
      remote_base[d] = keys[d].addr_base + dst_offset;
      rkey[d] = keys[d].rkey;
    }
  }
};

// Domains in turn from the one of WRITE `first` (paged and barrier requests): a counter
// instead of a division per WRITE.
class RoundRobin {
 public:
  RoundRobin(std::uint32_t first, std::size_t domains)
      : next_(static_cast<std::uint32_t>(first % domains)),
        domains_(static_cast<std::uint32_t>(domains)) {}
  std::uint32_t take() noexcept {
    const std::uint32_t d = next_;
    next_ = d + 1 == domains_ ? 0 : d + 1;
    return d;
  }

 private:
  std::uint32_t next_;
  std::uint32_t domains_;
};

// One WRITE or READ on Domain d.
Status post_one(DomainGroup& domains, std::uint32_t d, const domain::WriteDesc& w) {
  return domains.post_write(d, w);
}
Status post_one(DomainGroup& domains, std::uint32_t d, const domain::ReadDesc& r) {
  return domains.post_read(d, r);
}

}  // namespace

bool Worker::post_some(Op* op, std::uint32_t max_wrs) {
  const std::size_t k = domains_.size();
  switch (op->kind) {
    case OpKind::single: {
      const SinglePlan& plan = op->single;
      const auto* base = static_cast<const std::byte*>(op->src->ptr) + plan.src_offset;
      const Endpoints ends(*op, k, plan.dst_offset);
      return post_rma<domain::WriteDesc>(op, max_wrs, [&](std::uint32_t i, domain::WriteDesc& w) {
        const WritePiece& piece = plan.pieces[i];
        w.local = base + piece.offset;
        w.length = piece.length;
        w.local_desc = ends.local_desc[piece.domain];
        w.remote_addr = ends.remote_base[piece.domain] + piece.offset;
        w.rkey = ends.rkey[piece.domain];
        return Target{piece.domain, 0};
      });
    }
    case OpKind::paged: {
      const PagedPlan& plan = op->paged;
      const auto* base = static_cast<const std::byte*>(op->src->ptr) + plan.src.offset;
      const Endpoints ends(*op, k, plan.dst.offset);
      RoundRobin domains(op->posted, k);
      return post_rma<domain::WriteDesc>(op, max_wrs, [&](std::uint32_t i, domain::WriteDesc& w) {
        const std::uint32_t d = domains.take();
        w.local = base + std::uint64_t{plan.src.indices[i]} * plan.src.stride;
        w.length = plan.page_length;
        w.local_desc = ends.local_desc[d];
        w.remote_addr = ends.remote_base[d] + std::uint64_t{plan.dst.indices[i]} * plan.dst.stride;
        w.rkey = ends.rkey[d];
        return Target{d, 0};
      });
    }
    case OpKind::imm: {
      const RemoteKey key = op->dst.keys()[0];
      return post_rma<domain::WriteDesc>(op, max_wrs, [&](std::uint32_t, domain::WriteDesc& w) {
        w.local = domains_.scratch();
        w.length = 0;
        w.local_desc = domains_.scratch_desc(0);
        w.remote_addr = key.addr_base;
        w.rkey = key.rkey;
        return Target{0, 0};
      });
    }
    case OpKind::scatter: {
      const ScatterPlan& plan = op->scatter;
      const auto* base = static_cast<const std::byte*>(op->src->ptr);
      const auto local_desc = source_descs(*op, k);
      return post_rma<domain::WriteDesc>(op, max_wrs, [&](std::uint32_t i, domain::WriteDesc& w) {
        const ScatterPiece& piece = plan.pieces[i];
        const RemoteKey& key = plan.dsts[piece.peer].keys()[piece.domain];
        w.local = base + piece.src_offset;
        w.length = piece.length;
        w.local_desc = local_desc[piece.domain];
        w.remote_addr = key.addr_base + piece.dst_offset;
        w.rkey = key.rkey;
        return Target{piece.domain, piece.peer};
      });
    }
    case OpKind::barrier: {
      const BarrierPlan& plan = op->barrier;
      RoundRobin domains(op->posted, k);
      return post_rma<domain::WriteDesc>(op, max_wrs, [&](std::uint32_t i, domain::WriteDesc& w) {
        const std::uint32_t d = domains.take();
        const RemoteKey& key = plan.dsts[i].keys()[d];
        w.local = domains_.scratch();
        w.length = 0;
        w.local_desc = domains_.scratch_desc(d);
        w.remote_addr = key.addr_base;
        w.rkey = key.rkey;
        return Target{d, i};
      });
    }
    case OpKind::single_read: {
      // The plan's src side is the peer's memory, its dst side ours (op.hpp).
      const SinglePlan& plan = op->single;
      auto* base = static_cast<std::byte*>(op->src->ptr) + plan.dst_offset;
      const Endpoints ends(*op, k, plan.src_offset);
      return post_rma<domain::ReadDesc>(op, max_wrs, [&](std::uint32_t i, domain::ReadDesc& r) {
        const WritePiece& piece = plan.pieces[i];
        r.local = base + piece.offset;
        r.length = piece.length;
        r.local_desc = ends.local_desc[piece.domain];
        r.remote_addr = ends.remote_base[piece.domain] + piece.offset;
        r.rkey = ends.rkey[piece.domain];
        return Target{piece.domain, 0};
      });
    }
    case OpKind::paged_read: {
      const PagedPlan& plan = op->paged;
      auto* base = static_cast<std::byte*>(op->src->ptr) + plan.dst.offset;
      const Endpoints ends(*op, k, plan.src.offset);
      RoundRobin domains(op->posted, k);
      return post_rma<domain::ReadDesc>(op, max_wrs, [&](std::uint32_t i, domain::ReadDesc& r) {
        const std::uint32_t d = domains.take();
        r.local = base + std::uint64_t{plan.dst.indices[i]} * plan.dst.stride;
        r.length = plan.page_length;
        r.local_desc = ends.local_desc[d];
        r.remote_addr = ends.remote_base[d] + std::uint64_t{plan.src.indices[i]} * plan.src.stride;
        r.rkey = ends.rkey[d];
        return Target{d, 0};
      });
    }
    case OpKind::send:
      return post_send_op(op);
  }
  return true;
}

template <typename Desc, typename Describe>
bool Worker::post_rma(Op* op, std::uint32_t max_wrs, Describe&& describe) {
  // A scatter or barrier reaches several peers, each counting its own immediates: one gone peer
  // must not starve the others, so their slices are still posted and the request fails at the
  // end. A single-peer request stops at its first refused WRITE.
  const bool multi_peer = op->posts_past_failure();
  const std::size_t k = domains_.size();
  Desc w;
  if constexpr (std::is_same_v<Desc, domain::WriteDesc>) w.imm = op->imm;  // READs carry none
  w.token = op_token(op);
  for (std::uint32_t n = 0; n < max_wrs && !op->posting_over(); ++n) {
    const Target to = describe(op->posted, w);
    if (domains_.full(to.domain)) {
      last_refusal_ = {true, to.domain, 0};
      return false;
    }
    w.peer = op->peers[std::size_t{to.peer} * k + to.domain];
    Status st = post_one(domains_, to.domain, w);
    if (st.ok()) [[likely]] {
      // The slice first: after a large post it reads the clock, and note_posted stamps that.
      const bool slice_spent = slice_.after_post(w.length);
      note_posted(op, to.domain);
      if (slice_spent) return true;  // the rest waits for the next pass
      continue;
    }
    if (st.code() == Errc::again) {
      last_refusal_ = {false, to.domain, w.peer};
      return false;
    }
    if (st.code() == Errc::provider) note_peer_gone(op, to.peer);
    if (!multi_peer) {
      op->error = std::move(st);
      return true;
    }
    if (op->error.ok()) op->error = std::move(st);
    // Refused: counted as posted and done, there is no completion to wait for.
    ++op->posted;
    ++op->done;
  }
  return true;
}

bool Worker::post_send_op(Op* op) {
  if (op->posting_over()) return true;
  if (domains_.full(0)) {
    last_refusal_ = {true, 0, 0};
    return false;
  }
  const SendPlan& plan = op->send;
  const void* buf = staging_ ? static_cast<const void*>(staging_->data(plan.slot))
                             : static_cast<const void*>(plan.message.data());
  void* desc = staging_ ? staging_->desc() : nullptr;
  Status st = domains_.post_send(op->peers[0], buf, plan.message.size(), desc, op_token(op));
  if (st.ok()) {
    (void)slice_.after_post(plan.message.size());
    note_posted(op, 0);
    return true;
  }
  if (st.code() == Errc::again) {
    last_refusal_ = {false, 0, op->peers[0]};
    return false;
  }
  if (st.code() == Errc::provider) note_peer_gone(op, 0);
  op->error = std::move(st);
  return true;
}

void Worker::note_posted(Op* op, std::uint32_t domain) {
  ++op->posted;
  op->queue_domain = domain;
  op->posted_ahead = domains_.posted(domain) - 1;
  op->ahead_drained = domains_.completions(domain) >= op->posted_ahead
                          ? std::chrono::steady_clock::time_point::min()
                          : Op::kNotDrained;
  if (config_.metrics && op->fully_posted()) request_metrics_.posted(*op, slice_.last_read_ns());
  if (!config_.record_post_timings) [[likely]] return;
  const std::uint64_t t = now_ns();
  if (op->posted == 1) op->timing.first_post = t;
  if (op->fully_posted()) {
    op->timing.last_post = t;
    op->timing.posts = op->posted;
    record_timing(op);
  }
}

}  // namespace fabric::engine
