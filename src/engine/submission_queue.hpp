#pragma once
// Accepted requests on their way from any caller's thread to one worker.
//
// An intrusive lock-free stack that the worker takes whole and reverses, so that it starts them
// in the order they were pushed. A push is one compare-exchange on the head and allocates
// nothing (the link lives in the pooled Op); an empty check, which the worker makes on every
// pass of its loop, is one load. The general-purpose queue it replaces cost about 110
// instructions per push, most of them finding the calling thread's producer.

#include <atomic>
#include <cstddef>

#include "engine/op.hpp"
#include "engine/op_pool.hpp"

namespace fabric::engine {

class SubmissionQueue {
 public:
  SubmissionQueue() = default;
  SubmissionQueue(const SubmissionQueue&) = delete;
  SubmissionQueue& operator=(const SubmissionQueue&) = delete;
  // Ops never taken (a worker left stuck in its provider) go back to their pool.
  ~SubmissionQueue() {
    for (Op* op = take_all(); op != nullptr;) {
      Op* next = op->next_submitted;
      OpRecycler{}(op);
      op = next;
    }
  }

  // Any thread.
  void push(OpPtr owned) noexcept {
    Op* op = owned.release();
    Op* head = head_.load(std::memory_order_relaxed);
    do {
      op->next_submitted = head;
    } while (!head_.compare_exchange_weak(head, op, std::memory_order_seq_cst,
                                          std::memory_order_relaxed));
  }
  // Sequentially consistent, like the push: the worker sets its sleeping flag, then checks
  // here, while a caller pushes, then reads the flag; one of them sees the other. (On x86
  // both are the plain instructions anyway.)
  [[nodiscard]] bool empty() const noexcept {
    return head_.load(std::memory_order_seq_cst) == nullptr;
  }
  // The consumer (one thread at a time): every op pushed so far, oldest first, linked by
  // Op::next_submitted; null if none. The caller owns them.
  [[nodiscard]] Op* take_all() noexcept {
    if (empty()) return nullptr;
    Op* newest_first = head_.exchange(nullptr, std::memory_order_acquire);
    Op* oldest_first = nullptr;
    while (newest_first != nullptr) {
      Op* next = newest_first->next_submitted;
      newest_first->next_submitted = oldest_first;
      oldest_first = newest_first;
      newest_first = next;
    }
    return oldest_first;
  }

 private:
  std::atomic<Op*> head_{nullptr};
};

}  // namespace fabric::engine
