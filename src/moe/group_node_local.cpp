// The steps between node peers, through their mapped arenas instead of the NIC: staging flags
// raised, combine rows copied directly, and the flags that say the copies are done.

#include <cstring>

#include "group_impl.hpp"

namespace fabric::moe {

Status MoeGroup::mark_staged() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::private_posted, "mark_staged"); !st.ok()) return st;
  store_flag(m.own.data() + m.layouts[m.self()].flag_send_ready(), m.epoch);
  m.phase = Phase::staged;
  return Status::success();
}

Status MoeGroup::push_combine_direct() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::combine_posted, "push_combine_direct"); !st.ok()) return st;
  const std::uint32_t self = m.self();
  const auto& own = m.layouts[self];
  for (const auto& w : m.recv.combine_writes) {
    for (std::uint32_t member = 0; member < m.config.dp_size; ++member) {
      const std::uint32_t p = w.dp_group * m.config.dp_size + member;
      if (p != self && !m.placement.same_node(p, self)) continue;
      std::memcpy(m.base[p] + m.layouts[p].combine_row(w.dst_row),
                  m.own.data() + own.exchange_row(w.first_row), w.rows * own.row_bytes);
      if (p != self) m.stats.direct_bytes += w.rows * own.row_bytes;
    }
  }
  return Status::success();
}

Status MoeGroup::mark_combine_pushed() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::combine_posted, "mark_combine_pushed"); !st.ok()) return st;
  for (const auto p : m.node_peers)
    store_flag(m.base[p] + m.layouts[p].flag_combine_from(m.self()), m.epoch);
  m.phase = Phase::pushed;
  return Status::success();
}

}  // namespace fabric::moe
