#pragma once
// A pollable count of WRITE-with-immediate arrivals for one immediate value.

#include <atomic>
#include <chrono>
#include <cstdint>

#include "fabric/status.hpp"
#include "fabric/timeout.hpp"
#include "fabric/wake_word.hpp"

namespace fabric {

class ImmCounter {
 public:
  explicit ImmCounter(std::uint32_t imm) : imm_(imm) {}

  [[nodiscard]] std::uint32_t imm() const noexcept { return imm_; }
  // Arrivals not yet consumed.
  [[nodiscard]] std::uint64_t value() const noexcept {
    return count_.load(std::memory_order_acquire);
  }
  // Takes n arrivals if at least n are there.
  [[nodiscard]] bool try_consume(std::uint64_t n) noexcept;
  // Waits until value() >= n or the timeout (Errc::timeout); does not consume.
  // nanoseconds::max() (or any longer duration) waits without a deadline.
  [[nodiscard]] Status wait(std::uint64_t n, std::chrono::nanoseconds timeout) const;
  template <typename Rep, typename Period>
  [[nodiscard]] Status wait(std::uint64_t n, std::chrono::duration<Rep, Period> timeout) const {
    return wait(n, saturating_nanoseconds(timeout));
  }
  // wait() then try_consume(), atomically with respect to other consumers.
  [[nodiscard]] Status wait_and_consume(std::uint64_t n, std::chrono::nanoseconds timeout);
  template <typename Rep, typename Period>
  [[nodiscard]] Status wait_and_consume(std::uint64_t n, std::chrono::duration<Rep, Period> timeout) {
    return wait_and_consume(n, saturating_nanoseconds(timeout));
  }

  void add(std::uint64_t n) noexcept {
    count_.fetch_add(n, std::memory_order_acq_rel);
    wake_.notify();
  }

 private:
  std::uint32_t imm_;
  std::atomic<std::uint64_t> count_{0};
  detail::WakeWord wake_;  // a waiter past its polling sleeps here
};

}  // namespace fabric
