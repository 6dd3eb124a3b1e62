#pragma once
// The engine-wide bound on accepted requests (EngineConfig::max_outstanding_requests), shared by
// every group's worker: a caller sees one limit however its requests spread over groups.

#include <atomic>
#include <cstdint>

namespace fabric::engine {

class Admission {
 public:
  explicit Admission(std::uint32_t max) : max_(max) {}

  // Reserves room for one more request; false is back-pressure.
  [[nodiscard]] bool admit() noexcept {
    std::uint32_t cur = outstanding_.load(std::memory_order_relaxed);
    do {
      if (cur >= max_) return false;
    } while (!outstanding_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel));
    return true;
  }
  void release() noexcept { outstanding_.fetch_sub(1, std::memory_order_acq_rel); }
  [[nodiscard]] std::uint32_t outstanding() const noexcept {
    return outstanding_.load(std::memory_order_acquire);
  }
  [[nodiscard]] std::uint32_t max() const noexcept { return max_; }

 private:
  const std::uint32_t max_;
  std::atomic<std::uint32_t> outstanding_{0};
};

}  // namespace fabric::engine
