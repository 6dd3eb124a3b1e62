#pragma once
// Counts immediate arrivals per value and serves expectations and counters.
// One per engine, shared by every group's worker (arrivals from any group's NICs count for the
// same immediate) and by the API threads; a mutex orders them.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "fabric/engine.hpp"
#include "fabric/imm_counter.hpp"
#include "fabric/status.hpp"

namespace fabric::engine {

class ImmTable {
 public:
  // Hands a reached expectation to whoever runs callbacks.
  using Fire = std::function<void(ImmCallback callback, std::uint32_t imm, std::uint64_t count)>;

  explicit ImmTable(Fire fire) : fire_(std::move(fire)) {}

  // Pending expectations of `imm` are served first, in the order they were
  // made; what is left goes to its counter, or is held for later ones.
  void arrive(std::uint32_t imm, std::uint64_t n = 1);
  // Every arrival counted so far, of any value (EngineMetrics::imms_received).
  [[nodiscard]] std::uint64_t arrivals() const noexcept {
    return arrivals_.load(std::memory_order_relaxed);
  }
  void expect(std::uint32_t imm, std::uint64_t count, ImmCallback callback);
  // Moves unconsumed arrivals into the counter; later arrivals go there too.
  // Refused (invalid_argument) while an expectation of the imm is pending:
  // the counter would take the arrivals that expectation is waiting for.
  [[nodiscard]] Status attach(const std::shared_ptr<ImmCounter>& counter);
  // Counts internally again, starting from what the counter still holds.
  void detach(std::uint32_t imm);

  // Arrivals held for `imm` that no expectation or counter has taken yet.
  [[nodiscard]] std::uint64_t unclaimed(std::uint32_t imm) const;
  // Immediates with any state (pending expectations, a counter, or held
  // arrivals); a drained one is forgotten, so fresh immediates per request
  // do not grow the table.
  [[nodiscard]] std::size_t tracked() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  struct Expectation {
    std::uint64_t count;
    ImmCallback callback;
  };
  struct Entry {
    std::uint64_t unclaimed = 0;
    std::deque<Expectation> expectations;
    std::shared_ptr<ImmCounter> counter;
  };
  // Fires what the held arrivals reach, hands the rest to a counter, and
  // erases the entry once nothing is left in it.
  void serve(std::unordered_map<std::uint32_t, Entry>::iterator it);

  Fire fire_;
  mutable std::mutex mutex_;
  std::unordered_map<std::uint32_t, Entry> entries_;
  std::atomic<std::uint64_t> arrivals_{0};
};

}  // namespace fabric::engine
