#pragma once
// Counts immediate arrivals per value and serves expectations and counters.
// Owned by one worker; never touched by other threads.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <unordered_map>

#include "fabric/engine.hpp"
#include "fabric/imm_counter.hpp"

namespace fabric::engine {

class ImmTable {
 public:
  // Hands a reached expectation to whoever runs callbacks.
  using Fire = std::function<void(ImmCallback callback, std::uint32_t imm, std::uint64_t count)>;

  explicit ImmTable(Fire fire) : fire_(std::move(fire)) {}

  void arrive(std::uint32_t imm, std::uint64_t n = 1);
  void expect(std::uint32_t imm, std::uint64_t count, ImmCallback callback);
  // Moves unconsumed arrivals into the counter; later arrivals go there too.
  void attach(const std::shared_ptr<ImmCounter>& counter);
  // Counts internally again, starting from what the counter still holds.
  void detach(std::uint32_t imm);

  // Arrivals held for `imm` that no expectation or counter has taken yet.
  [[nodiscard]] std::uint64_t unclaimed(std::uint32_t imm) const;

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
  void serve(std::uint32_t imm, Entry& entry);

  Fire fire_;
  std::unordered_map<std::uint32_t, Entry> entries_;
};

}  // namespace fabric::engine
