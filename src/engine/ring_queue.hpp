#pragma once
// A FIFO of trivially copyable values in one growing ring buffer. Unlike std::deque, which
// allocates and frees a block every few hundred bytes of traffic, it allocates only when it
// grows past its largest size so far: the worker's pending queue costs nothing per request.

#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

namespace fabric::engine {

template <typename T>
class RingQueue {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] T& front() noexcept { return slots_[head_]; }

  void push_back(T value) {
    if (size_ == slots_.size()) grow();
    slots_[(head_ + size_) % slots_.size()] = value;
    ++size_;
  }
  void pop_front() noexcept {
    head_ = (head_ + 1) % slots_.size();
    --size_;
  }
  void clear() noexcept {
    head_ = 0;
    size_ = 0;
  }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 64 : slots_.size() * 2);
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = slots_[(head_ + i) % slots_.size()];
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace fabric::engine
