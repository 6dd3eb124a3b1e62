#pragma once
// The ids a Sender released most recently, up to a fixed count. A decoder that asks for one of
// them after the release (its step stalled past receiver_timeout, so the prefiller expired and
// freed the request) is told at once that the request is gone. Without this the ask would look
// like one that came before its prepare and wait receiver_timeout for a prepare that never comes.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>

#include "fabric/kv/state.hpp"

namespace fabric::kv {

class ReleasedIds {
 public:
  explicit ReleasedIds(std::size_t capacity) : capacity_(capacity) {}

  // Remembers `id` as released in state `end`, forgetting the oldest id past the capacity.
  void add(const std::string& id, State end);
  // How `id` ended, if it was released and not forgotten since.
  [[nodiscard]] std::optional<State> find(const std::string& id) const;
  // `id` was prepared again: it is live, not released.
  void forget(const std::string& id);
  [[nodiscard]] std::size_t size() const { return ids_.size(); }

 private:
  struct Released {
    State end;
    std::uint64_t serial;  // which add() of this id the order queue's entry belongs to
  };
  std::size_t capacity_;
  std::uint64_t next_serial_ = 0;
  std::deque<std::pair<std::string, std::uint64_t>> order_;  // oldest first
  std::unordered_map<std::string, Released> ids_;
};

}  // namespace fabric::kv
