#include "engine/peer_index.hpp"

#include <algorithm>

namespace fabric::engine {

std::uint32_t PeerIndex::known(std::uint64_t instance) {
  std::lock_guard lock(mutex_);
  auto [it, fresh] = peers_.try_emplace(instance);
  if (!fresh) return it->second.slot;
  ++known_;
  if (labelled_ == 0) return kNoSlot;
  // A fenced peer resolved again keeps the label it had.
  const auto had = std::find(labelled_ids_.begin(), labelled_ids_.end(), instance);
  if (had != labelled_ids_.end()) {
    it->second.slot = static_cast<std::uint32_t>(had - labelled_ids_.begin());
  } else if (labelled_ids_.size() < labelled_) {
    it->second.slot = static_cast<std::uint32_t>(labelled_ids_.size());
    labelled_ids_.push_back(instance);
  } else {
    it->second.slot = labelled_;
  }
  return it->second.slot;
}

void PeerIndex::lost(std::uint64_t instance) {
  std::lock_guard lock(mutex_);
  auto it = peers_.find(instance);
  if (it == peers_.end() || it->second.lost) return;
  it->second.lost = true;
  --known_;
  ++lost_;
}

void PeerIndex::fenced(std::uint64_t instance) {
  std::lock_guard lock(mutex_);
  auto it = peers_.find(instance);
  if (it == peers_.end()) return;
  if (!it->second.lost) {
    --known_;
    ++lost_;
  }
  peers_.erase(it);
}

PeerIndex::Counts PeerIndex::counts() const {
  std::lock_guard lock(mutex_);
  return {known_, lost_};
}

std::vector<std::uint64_t> PeerIndex::labelled_peers() const {
  std::lock_guard lock(mutex_);
  return labelled_ids_;
}

}  // namespace fabric::engine
