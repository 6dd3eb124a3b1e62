#include "fabric/imm_counter.hpp"

#include "core/blocking_wait.hpp"

namespace fabric {

bool ImmCounter::try_consume(std::uint64_t n) noexcept {
  std::uint64_t cur = count_.load(std::memory_order_acquire);
  while (cur >= n) {
    if (count_.compare_exchange_weak(cur, cur - n, std::memory_order_acq_rel)) return true;
  }
  return false;
}

Status ImmCounter::wait(std::uint64_t n, std::chrono::nanoseconds timeout) const {
  if (detail::wait_blocking(wake_, timeout, [&] { return value() >= n; })) {
    return Status::success();
  }
  return {Errc::timeout, "imm counter did not reach the target within the timeout"};
}

Status ImmCounter::wait_and_consume(std::uint64_t n, std::chrono::nanoseconds timeout) {
  if (detail::wait_blocking(wake_, timeout, [&] { return try_consume(n); })) {
    return Status::success();
  }
  return {Errc::timeout, "imm counter did not reach the target within the timeout"};
}

}  // namespace fabric
