#pragma once
// One side's requests by id: the lookups, the release rule and the count of active requests
// that the Sender and the Receiver share. An Entry is the side's own record of a request, with
// its RequestStatus in `status`. Errors start with the side's name ("KV sender"). Not locked:
// the owner's mutex guards the table.

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "fabric/kv/state.hpp"
#include "fabric/status.hpp"

namespace fabric::kv {

template <typename Entry>
class RequestTable {
 public:
  using Map = std::unordered_map<std::string, Entry>;

  explicit RequestTable(std::string_view side) : side_(side) {}

  [[nodiscard]] Entry* find(const std::string& id) {
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : &it->second;
  }
  // The request, or not_found naming it.
  [[nodiscard]] Result<Entry*> get(std::string_view id) {
    if (Entry* e = find(std::string(id))) return e;
    return missing(id);
  }
  [[nodiscard]] Result<RequestStatus> status(std::string_view id) const {
    auto it = entries_.find(std::string(id));
    if (it == entries_.end()) return missing(id);
    return it->second.status;
  }
  [[nodiscard]] Status missing(std::string_view id) const {
    return {Errc::not_found, fmt::format("{}: no request {}", side_, id)};
  }
  // invalid_argument when `id` is taken: an id names one request until it is released.
  [[nodiscard]] Status check_new(const std::string& id) const {
    if (!entries_.contains(id)) return Status::success();
    return {Errc::invalid_argument, fmt::format("{}: request {} exists", side_, id)};
  }
  // After check_new.
  Entry& add(std::string id, Entry entry = {}) {
    return entries_.emplace(std::move(id), std::move(entry)).first->second;
  }
  void erase(const std::string& id) { entries_.erase(id); }

  // Forgets a request that has ended, after on_release(id, entry) kept what the side keeps of
  // it; a request still running is refused (its pages may still be written).
  template <typename OnRelease>
  [[nodiscard]] Status release(std::string_view id, OnRelease&& on_release) {
    auto it = entries_.find(std::string(id));
    if (it == entries_.end()) return missing(id);
    if (!is_terminal(it->second.status.state)) {
      return {Errc::invalid_argument, fmt::format("{}: request {} is still {}", side_, id,
                                                  state_name(it->second.status.state))};
    }
    on_release(it->first, it->second);
    entries_.erase(it);
    return Status::success();
  }

  [[nodiscard]] std::size_t active() const {
    std::size_t n = 0;
    for (const auto& [id, e] : entries_) n += is_terminal(e.status.state) ? 0 : 1;
    return n;
  }

  [[nodiscard]] typename Map::iterator begin() { return entries_.begin(); }
  [[nodiscard]] typename Map::iterator end() { return entries_.end(); }

 private:
  std::string_view side_;  // a literal
  Map entries_;
};

}  // namespace fabric::kv
