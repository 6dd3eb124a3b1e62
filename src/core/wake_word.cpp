#include "fabric/wake_word.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>

namespace fabric::detail {

namespace {
// The futex word is the atomic's own 32 bits (std::atomic<std::uint32_t> is lock-free and holds
// exactly that value on Linux).
std::uint32_t* futex_address(const std::atomic<std::uint32_t>& word) {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
  return const_cast<std::uint32_t*>(reinterpret_cast<const std::uint32_t*>(&word));
}
}  // namespace

void WakeWord::wake_all() noexcept {
  word_.fetch_add(1, std::memory_order_release);
  (void)syscall(SYS_futex, futex_address(word_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

void WakeWord::sleep_on(std::uint32_t seen, std::chrono::steady_clock::time_point deadline) const {
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return;
  // At most a second per sleep: the caller loops, and a far deadline must not overflow.
  const auto ns = std::min<std::chrono::nanoseconds::rep>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(left).count(), 1'000'000'000);
  timespec relative{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  // Returns at a wake-up, at the timeout, on a signal, or at once if the word moved on since
  // `seen` (a notify between the caller's check and this call): the caller re-checks in all.
  (void)syscall(SYS_futex, futex_address(word_), FUTEX_WAIT_PRIVATE, seen, &relative, nullptr, 0);
}

}  // namespace fabric::detail
