#pragma once
// How long one pass of the worker may spend posting before it gives its other duties a turn.
//
// Some providers do the data movement inside the post call: libfabric 1.17's shm copies a
// large WRITE into the target (CMA) before fi_writemsg returns, about 12 ms per 64 MiB here.
// A pass that posted every queued WRITE of 96 such requests stayed inside the provider for
// 1.3 s: no completion was polled, no registration ran, no request was expired, so
// request_timeout was kept 0.6-1.3 s late. The worker now stops posting once a pass has spent
// its slice, and the rest waits, in order, for the next pass (docs/reliability.md).
//
// The clock is read after every large post, and otherwise once in so many posts, so that a
// small post, well under a microsecond, pays a decrement and a compare rather than a clock read.

#include <chrono>
#include <cstdint>

#include "engine/steady_ns.hpp"

namespace fabric::engine {

class PostSlice {
 public:
  using Clock = std::chrono::steady_clock;
  // Two of them fit in the worker's 5 ms expiry check interval.
  static constexpr auto kLength = std::chrono::milliseconds(2);
  static constexpr std::int32_t kPostsPerCheck = 32;
  // About 50 us of copying on shm here: small against the slice, large against a clock read.
  static constexpr std::uint64_t kLargePost = std::uint64_t{256} << 10;

  // A new pass: its slice starts now.
  void start(Clock::time_point now) noexcept {
    last_read_ = now;
    ends_ = now + kLength;
    spent_ = false;
    posts_left_ = kPostsPerCheck;
  }

  // After each post of `length` bytes; true once the slice is spent (the caller stops posting).
  bool after_post(std::uint64_t length) noexcept {
    if (--posts_left_ > 0 && length < kLargePost) [[likely]] return false;
    // Once spent, every later post comes back here and is told so.
    if (!spent_) {
      last_read_ = Clock::now();
      if (last_read_ < ends_) {
        posts_left_ = kPostsPerCheck;
        return false;
      }
    }
    spent_ = true;
    posts_left_ = 0;
    return true;
  }

  [[nodiscard]] bool spent() const noexcept { return spent_; }

  // The pass's latest clock read (its start, or the check after a large post or after
  // kPostsPerCheck small ones): what a post in this pass is stamped with (after its
  // after_post), earlier than the post by at most those few small posts, so metrics' post
  // latency costs no clock read of its own.
  [[nodiscard]] std::uint64_t last_read_ns() const noexcept {
    return to_ns(last_read_);
  }

 private:
  Clock::time_point last_read_{};
  Clock::time_point ends_{};
  bool spent_ = false;
  std::int32_t posts_left_ = 0;
};

}  // namespace fabric::engine
