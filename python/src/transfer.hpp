#pragma once
// What Python waits on: Transfer (one submission, backed by a CompletionFlag)
// and PyImmCounter (arrivals of one immediate value).

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>

#include "fabric/completion.hpp"
#include "fabric/imm_counter.hpp"
#include "waits.hpp"

namespace fabric::python {

class Transfer {
 public:
  // `engine` identifies the engine's callback hub; `via_callback` says the flag
  // is set by the callback thread (after the Python callback) rather than the worker.
  Transfer(std::shared_ptr<CompletionFlag> flag, const void* engine, bool via_callback,
           const char* op)
      : flag_(std::move(flag)), engine_(engine), via_callback_(via_callback), op_(op) {}

  [[nodiscard]] bool done() const noexcept { return flag_->done(); }
  // Raises the request's error, or FabricTimeoutError when `timeout` passes first.
  void wait(Timeout timeout) const;
  // The request's error as an exception instance, or None on success.
  [[nodiscard]] pybind11::object exception(Timeout timeout) const;
  [[nodiscard]] const char* op() const noexcept { return op_; }
  // The asyncio bridge's hook (async_bridge.hpp); false when the flag has a notifier already.
  bool notify_on_complete(std::shared_ptr<CompletionNotifier> notifier) const {
    return flag_->notify_on_complete(std::move(notifier));
  }

 private:
  Status wait_status(Timeout timeout) const;

  std::shared_ptr<CompletionFlag> flag_;
  const void* engine_;
  bool via_callback_;
  const char* op_;
};

class PyImmCounter {
 public:
  explicit PyImmCounter(std::shared_ptr<ImmCounter> counter) : counter_(std::move(counter)) {}

  [[nodiscard]] std::uint32_t imm() const noexcept { return counter_->imm(); }
  [[nodiscard]] std::uint64_t value() const noexcept { return counter_->value(); }
  [[nodiscard]] bool try_consume(std::uint64_t n) noexcept { return counter_->try_consume(n); }
  void wait(std::uint64_t n, Timeout timeout) const;
  void wait_and_consume(std::uint64_t n, Timeout timeout);

 private:
  std::shared_ptr<ImmCounter> counter_;
};

void bind_transfer(pybind11::module_& m);

}  // namespace fabric::python
