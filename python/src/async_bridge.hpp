#pragma once
// Transfers completing into an asyncio event loop without a thread per request. A transfer awaited
// on a loop gets a notifier on its CompletionFlag; the engine thread that completes the flag
// queues the transfer's token and writes this bridge's eventfd, touching no Python object and
// never taking the GIL; the loop watches the fd (loop.add_reader) and resolves the futures of
// the tokens it takes (python/fabric_lib/_aio.py).

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "transfer.hpp"

namespace fabric::python {

class AsyncBridge {
 public:
  AsyncBridge();  // raises ProviderError when no eventfd can be made

  [[nodiscard]] int fd() const noexcept;
  // A new token under which `transfer` is reported once it completes (at once if it has);
  // 0 when the transfer is already watched (by this bridge or another).
  std::uint64_t watch(const Transfer& transfer);
  // The tokens of transfers completed since the last call, draining the eventfd.
  std::vector<std::uint64_t> take();

  // What the notifiers share with the bridge; the eventfd closes with the last of them.
  struct Ready {
    Ready();
    ~Ready();
    Ready(const Ready&) = delete;
    Ready& operator=(const Ready&) = delete;
    void push(std::uint64_t token) noexcept;

    int fd = -1;
    std::mutex mutex;
    std::vector<std::uint64_t> tokens;
  };

 private:
  std::shared_ptr<Ready> ready_;
  std::uint64_t next_token_ = 1;
};

void bind_async_bridge(pybind11::module_& m);

}  // namespace fabric::python
