#include "engine/sleeper.hpp"

#include <fmt/format.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>

namespace fabric::engine {

Sleeper::Sleeper() : event_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!event_.valid()) error_ = errno;
  fds_.push_back(pollfd{event_.get(), POLLIN, 0});
}

Status Sleeper::status() const {
  if (error_ == 0) return Status::success();
  return {Errc::provider,
          fmt::format("eventfd for the worker's sleep: {}", std::strerror(error_))};
}

void Sleeper::watch(std::span<const int> fds) {
  fds_.resize(1);
  for (int fd : fds) {
    if (fd >= 0) fds_.push_back(pollfd{fd, POLLIN, 0});
  }
}

void Sleeper::wake() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_relaxed)) wake_always();
}

void Sleeper::wake_always() noexcept {
  const std::uint64_t one = 1;
  // EAGAIN only when the counter is near overflow: it is readable then anyway.
  (void)!::write(event_.get(), &one, sizeof one);
}

void Sleeper::wait(std::chrono::microseconds limit, bool with_watched) noexcept {
  const auto us = limit.count();
  const timespec timeout{static_cast<time_t>(us / 1'000'000),
                         static_cast<long>(us % 1'000'000) * 1000};
  const nfds_t n = with_watched ? static_cast<nfds_t>(fds_.size()) : 1;
  if (::ppoll(fds_.data(), n, &timeout, nullptr) <= 0) return;  // the limit, or a signal
  if ((fds_[0].revents & POLLIN) != 0) {
    std::uint64_t count = 0;
    (void)!::read(event_.get(), &count, sizeof count);  // re-arms it; nonblocking
  }
}

}  // namespace fabric::engine
