#pragma once
// A test seam: a Domain decorator that hands the wrapped Domain's events to
// the worker shuffled and late, so tests can show the engine never relies on
// the order (or promptness) in which completions and immediates arrive.
// docs/reordering.md describes the policy and how tests switch it on.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "doubles/forwarding_domain.hpp"

namespace fabric::domain {

struct ReorderOptions {
  std::uint64_t seed = 1;
  // An event is released at most this many polls after it was pulled.
  std::uint32_t max_hold_polls = 64;
  // Held events at most (plus one caller's batch): at the bound the wrapped
  // Domain is not polled, and random victims go out until below it.
  std::size_t max_held = 256;
  // Per poll, each held event not yet due is released with probability
  // 1/release_odds; the rest wait for their deadline or a later draw.
  std::uint32_t release_odds = 4;
};

// What one ReorderingDomain saw; the tests check nothing was lost.
struct ReorderStats {
  std::uint64_t pulled = 0;    // events taken from the wrapped Domain
  std::uint64_t released = 0;  // events handed to the caller
  std::uint64_t reordered = 0; // released after an event pulled later than it
  std::uint64_t max_delay_polls = 0;
};

class ReorderingDomain final : public ForwardingDomain {
 public:
  ReorderingDomain(std::unique_ptr<Domain> inner, ReorderOptions options);

  std::size_t poll(std::span<Event> out) override;

  [[nodiscard]] std::size_t held() const noexcept { return held_.size(); }
  [[nodiscard]] const ReorderStats& stats() const noexcept { return stats_; }

 private:
  struct Held {
    Event event;
    std::uint64_t sequence;  // pull order
    std::uint64_t pulled_at; // poll number
    std::uint64_t due;       // poll number by which it must go
  };

  void pull(std::size_t max);
  // Moves held_[i] to out[n]; held_ loses its order (it never had one to keep).
  void release(std::size_t i, std::span<Event> out, std::size_t& n);

  ReorderOptions options_;
  std::mt19937_64 rng_;
  std::vector<Held> held_;
  std::vector<Event> batch_;
  std::uint64_t polls_ = 0;
  std::uint64_t next_sequence_ = 0;
  std::uint64_t earliest_due_ = ~std::uint64_t{0};
  std::uint64_t max_released_sequence_ = 0;
  bool released_any_ = false;
  ReorderStats stats_;
};

// Global totals over every ReorderingDomain destroyed so far plus those alive
// (updated as they poll): lets a test assert the seam was really in the path.
ReorderStats reorder_totals();

}  // namespace fabric::domain
