#include "released_ids.hpp"

namespace fabric::kv {

void ReleasedIds::add(const std::string& id, State end) {
  if (capacity_ == 0) return;
  const std::uint64_t serial = next_serial_++;
  ids_.insert_or_assign(id, Released{end, serial});
  order_.emplace_back(id, serial);
  // An id released, prepared again and released again has stale queue entries: they are
  // dropped here without touching its newer record, and counted against the capacity until then.
  while (order_.size() > capacity_) {
    auto it = ids_.find(order_.front().first);
    if (it != ids_.end() && it->second.serial == order_.front().second) ids_.erase(it);
    order_.pop_front();
  }
}

std::optional<State> ReleasedIds::find(const std::string& id) const {
  auto it = ids_.find(id);
  if (it == ids_.end()) return std::nullopt;
  return it->second.end;
}

void ReleasedIds::forget(const std::string& id) { ids_.erase(id); }

}  // namespace fabric::kv
