#include "doubles/reordering_domain.hpp"

#include <algorithm>
#include <atomic>
#include <limits>

namespace fabric::domain {

namespace {
// At most one inner poll of this many per outer poll.
constexpr std::size_t kPullBatch = 64;
constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

std::atomic<std::uint64_t> g_pulled{0};
std::atomic<std::uint64_t> g_released{0};
std::atomic<std::uint64_t> g_reordered{0};
std::atomic<std::uint64_t> g_max_delay{0};
}  // namespace

ReorderStats reorder_totals() {
  ReorderStats s;
  s.pulled = g_pulled.load(std::memory_order_relaxed);
  s.released = g_released.load(std::memory_order_relaxed);
  s.reordered = g_reordered.load(std::memory_order_relaxed);
  s.max_delay_polls = g_max_delay.load(std::memory_order_relaxed);
  return s;
}

ReorderingDomain::ReorderingDomain(std::unique_ptr<Domain> inner, ReorderOptions options)
    : ForwardingDomain(std::move(inner)), options_(options), rng_(options.seed), batch_(kPullBatch) {
  if (options_.max_held == 0) options_.max_held = 1;
  if (options_.release_odds == 0) options_.release_odds = 1;
}

void ReorderingDomain::pull(std::size_t max) {
  const std::size_t n = inner().poll(std::span<Event>(batch_).first(max));
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t due = polls_ + rng_() % (std::uint64_t{options_.max_hold_polls} + 1);
    earliest_due_ = std::min(earliest_due_, due);
    held_.push_back(Held{std::move(batch_[i]), next_sequence_++, polls_, due});
  }
  stats_.pulled += n;
  if (n > 0) g_pulled.fetch_add(n, std::memory_order_relaxed);
}

void ReorderingDomain::release(std::size_t i, std::span<Event> out, std::size_t& n) {
  Held& h = held_[i];
  if (h.sequence < max_released_sequence_ && released_any_) ++stats_.reordered;
  if (!released_any_ || h.sequence > max_released_sequence_) {
    max_released_sequence_ = h.sequence;
    released_any_ = true;
  }
  stats_.max_delay_polls = std::max(stats_.max_delay_polls, polls_ - h.pulled_at);
  out[n++] = std::move(h.event);
  if (i + 1 != held_.size()) held_[i] = std::move(held_.back());
  held_.pop_back();
}

std::size_t ReorderingDomain::poll(std::span<Event> out) {
  ++polls_;
  // Never more in than can go out in one call, and nothing while full: the
  // wrapped Domain keeps the rest queued, so held_ (and so every delay) stays bounded.
  if (held_.size() < options_.max_held) pull(std::min(out.size(), kPullBatch));
  std::size_t n = 0;
  const std::uint64_t reordered_before = stats_.reordered;

  // Deadlines first: nothing waits past max_hold_polls while out has room.
  if (!held_.empty() && polls_ >= earliest_due_) {
    earliest_due_ = kNever;
    std::size_t i = 0;
    while (i < held_.size()) {
      if (held_[i].due <= polls_ && n < out.size()) {
        release(i, out, n);
      } else {
        earliest_due_ = std::min(earliest_due_, held_[i].due);
        ++i;
      }
    }
  }
  // Over the bound: random victims, whatever their deadline.
  while (held_.size() > options_.max_held && n < out.size()) {
    release(rng_() % held_.size(), out, n);
  }
  // A random few early, so both short and long delays occur.
  if (!held_.empty() && n < out.size()) {
    const std::size_t mean = held_.size() / options_.release_odds;
    std::size_t k = rng_() % (2 * mean + 2);
    while (k-- > 0 && !held_.empty() && n < out.size()) {
      release(rng_() % held_.size(), out, n);
    }
  }
  // The deadline pass emits in held_ order; shuffle so that is no order either.
  std::shuffle(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n), rng_);

  stats_.released += n;
  if (n > 0) {
    g_released.fetch_add(n, std::memory_order_relaxed);
    g_reordered.fetch_add(stats_.reordered - reordered_before, std::memory_order_relaxed);
    std::uint64_t seen = g_max_delay.load(std::memory_order_relaxed);
    while (stats_.max_delay_polls > seen &&
           !g_max_delay.compare_exchange_weak(seen, stats_.max_delay_polls,
                                              std::memory_order_relaxed)) {
    }
  }
  return n;
}

}  // namespace fabric::domain
