// The phase machine of one dispatch/combine iteration: each step checks the phase, plans or
// posts its WRITEs, waits for what its peers sent, and moves the phase on.

#include <algorithm>
#include <cstring>
#include <string>

#include "group_waits.hpp"

namespace fabric::moe {

Result<const SendPlan*> MoeGroup::begin_dispatch(std::span<const std::int32_t> topk_idx,
                                                 std::uint32_t group_tokens) {
  auto& m = *impl_;
  if (auto st = m.check(Phase::idle, "begin_dispatch"); !st.ok()) return st;
  m.timeline = Timeline{};
  m.timeline.begin_dispatch = Impl::now_ns();
  if (m.barrier_pending) {
    // Every peer finished reading what this rank wrote last time, and is done
    // with its own buffers that this rank is about to write.
    std::vector<std::uint32_t> expected(m.n(), 1);
    if (auto st = m.await_imms(ImmKind::barrier, expected); !st.ok()) return st;
    m.barrier_pending = false;
  }
  ++m.epoch;
  auto plan = plan_routes(m.config, m.epoch, topk_idx, group_tokens,
                          std::span<std::byte>(m.own.data(), m.own.size()));
  if (!plan.ok()) {
    --m.epoch;  // bad input loses nothing: the iteration did not start
    return plan.status();
  }
  m.send = std::move(plan.value());
  std::fill(m.dispatch_writes.begin(), m.dispatch_writes.end(), 0);
  std::fill(m.combine_writes.begin(), m.combine_writes.end(), 0);
  m.phase = Phase::planned;
  return &m.send;
}

Status MoeGroup::post_private() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::planned, "post_private"); !st.ok()) return st;
  const auto& own = m.layouts[m.self()];
  const auto& p = m.send;
  // This rank's own routes go straight into its private region for itself.
  {
    const std::uint32_t d = m.self();
    std::memmove(m.own.data() + own.header_offset(d) - p.list_bytes[d],
                 m.own.data() + p.header[d] - p.list_bytes[d], p.list_bytes[d] + own.header_bytes);
  }
  Scatter scatter;
  scatter.group = m.group;
  scatter.imm = m.imm(ImmKind::routes, m.self());
  for (const auto d : m.peers) {
    const bool direct = m.placement.same_node(d, m.self());
    const std::uint64_t slots = direct ? 0 : std::min(p.count[d], own.private_tokens);
    ScatterSlice slice;
    slice.dst = m.descs[d];
    slice.length = p.list_bytes[d] + own.header_bytes + slots * own.slot_bytes;
    slice.src_offset = p.header[d] - p.list_bytes[d];
    slice.dst_offset = m.layouts[d].header_offset(m.self()) - p.list_bytes[d];
    scatter.slices.push_back(slice);
    if (!direct) ++m.dispatch_writes[d];
  }
  m.timeline.peers_posted = static_cast<std::uint32_t>(scatter.slices.size());
  if (auto st = m.submit(std::move(scatter)); !st.ok()) return st;
  m.timeline.private_posted = Impl::now_ns();
  m.phase = Phase::private_posted;
  return Status::success();
}

Result<const ReceivePlan*> MoeGroup::complete_dispatch() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::staged, "complete_dispatch"); !st.ok()) return st;
  const std::uint32_t n = m.n();
  const std::uint32_t self = m.self();
  if (auto st = m.await_imms(ImmKind::routes, std::vector<std::uint32_t>(n, 1)); !st.ok()) {
    return st;
  }
  m.timeline.routes_in = Impl::now_ns();
  auto plan = plan_receive(m.config, m.epoch,
                           std::span<const std::byte>(m.own.data(), m.own.size()));
  if (!plan.ok()) return m.fail(plan.status());
  m.recv = std::move(plan.value());

  // The rest of each inter-node destination's tokens, now that every
  // source's counts say where they go.
  const auto& own = m.layouts[self];
  Scatter overflow;
  overflow.imm = m.imm(ImmKind::overflow, self);
  for (const auto d : m.peers) {
    if (m.placement.same_node(d, self) || m.send.count[d] <= own.private_tokens) continue;
    ScatterSlice slice;
    slice.dst = m.descs[d];
    slice.length = std::uint64_t{m.send.count[d] - own.private_tokens} * own.slot_bytes;
    slice.src_offset = m.send.slot(own, d, own.private_tokens);
    slice.dst_offset =
        m.layouts[d].exchange_slot(overflow_first_slot(m.config, m.recv.counts, self, d));
    overflow.slices.push_back(slice);
    ++m.dispatch_writes[d];
  }
  if (auto st = m.submit(std::move(overflow)); !st.ok()) return st;
  m.timeline.overflow_posted = Impl::now_ns();
  for (const auto d : m.peers)
    m.stats.max_writes_per_peer_dispatch =
        std::max<std::uint64_t>(m.stats.max_writes_per_peer_dispatch, m.dispatch_writes[d]);

  std::vector<std::uint32_t> expected(n, 0);
  std::vector<std::uint32_t> direct_sources;
  for (const auto s : m.peers) {
    const std::uint32_t sent = m.recv.counts[std::size_t{s} * n + self];
    if (m.placement.same_node(s, self)) {
      if (sent > 0) direct_sources.push_back(s);
    } else if (sent > own.private_tokens) {
      expected[s] = 1;
    }
  }
  if (auto st = m.await_imms(ImmKind::overflow, expected); !st.ok()) return st;
  if (auto st = m.await_flags(
          direct_sources,
          [&](std::uint32_t r) { return m.base[r] + m.layouts[r].flag_send_ready(); },
          "dispatch staging");
      !st.ok())
    return st;
  for (const auto s : direct_sources)
    m.stats.direct_bytes +=
        std::uint64_t{m.recv.counts[std::size_t{s} * n + self]} * own.slot_bytes;
  m.timeline.tokens_in = Impl::now_ns();
  m.phase = Phase::dispatched;
  return &m.recv;
}

Status MoeGroup::post_combine() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::dispatched, "post_combine"); !st.ok()) return st;
  const std::uint32_t self = m.self();
  const auto& own = m.layouts[self];
  Scatter scatter;
  scatter.imm = m.imm(ImmKind::combine, self);
  for (const auto& w : m.recv.combine_writes) {
    for (std::uint32_t member = 0; member < m.config.dp_size; ++member) {
      const std::uint32_t p = w.dp_group * m.config.dp_size + member;
      if (p == self || m.placement.same_node(p, self)) continue;
      ScatterSlice slice;
      slice.dst = m.descs[p];
      slice.length = w.rows * own.row_bytes;
      slice.src_offset = own.exchange_row(w.first_row);
      slice.dst_offset = m.layouts[p].combine_row(w.dst_row);
      scatter.slices.push_back(slice);
      ++m.combine_writes[p];
    }
  }
  if (auto st = m.submit(std::move(scatter)); !st.ok()) return st;
  m.timeline.combine_posted = Impl::now_ns();
  for (const auto d : m.peers)
    m.stats.max_writes_per_peer_combine =
        std::max<std::uint64_t>(m.stats.max_writes_per_peer_combine, m.combine_writes[d]);
  m.phase = Phase::combine_posted;
  return Status::success();
}


Status MoeGroup::await_combine() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::pushed, "await_combine"); !st.ok()) return st;
  const std::uint32_t self = m.self();
  std::vector<std::uint32_t> expected(m.n(), 0);
  for (const auto d : m.peers)
    if (!m.placement.same_node(d, self) && m.send.rows_from[d] > 0) expected[d] = 1;
  if (auto st = m.await_imms(ImmKind::combine, expected); !st.ok()) return st;
  if (auto st = m.await_flags(
          m.node_peers,
          [&](std::uint32_t r) { return m.own.data() + m.layouts[self].flag_combine_from(r); },
          "combine rows");
      !st.ok())
    return st;
  m.timeline.combine_in = Impl::now_ns();
  m.phase = Phase::combined;
  return Status::success();
}

Status MoeGroup::finish_combine() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::combined, "finish_combine"); !st.ok()) return st;
  // This rank's WRITEs read its send and exchange regions; they must be done
  // before any peer, told by the barrier, overwrites what they read.
  if (auto st = m.done->wait(m.submitted, m.config.timeout); !st.ok()) {
    return m.fail({st.code(), "moe: this rank's WRITEs of epoch " + std::to_string(m.epoch) +
                                  " did not complete: " + st.message()});
  }
  if (!m.peers.empty()) {
    Barrier barrier;
    barrier.group = m.group;
    barrier.imm = m.imm(ImmKind::barrier, m.self());
    for (const auto d : m.peers) barrier.dsts.push_back(m.descs[d]);
    auto st = m.engine->submit_barrier(barrier, m.done);
    if (!st.ok()) return m.fail(st);
    ++m.submitted;
  }
  ++m.stats.iterations;
  m.barrier_pending = true;
  m.phase = Phase::idle;
  return Status::success();
}

Status MoeGroup::quiesce() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::idle, "quiesce"); !st.ok()) return st;
  if (m.barrier_pending) {
    if (auto st = m.await_imms(ImmKind::barrier, std::vector<std::uint32_t>(m.n(), 1)); !st.ok())
      return st;
    m.barrier_pending = false;
  }
  if (auto st = m.done->wait(m.submitted, m.config.timeout); !st.ok()) return m.fail(st);
  if (const auto stray = stray_immediates(); stray != 0)
    return m.fail({Errc::malformed, "moe: " + std::to_string(stray) +
                                        " immediate(s) arrived beyond the plans"});
  return Status::success();
}

}  // namespace fabric::moe
