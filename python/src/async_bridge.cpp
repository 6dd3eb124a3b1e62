#include "async_bridge.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "errors.hpp"

namespace py = pybind11;

namespace fabric::python {

namespace {

// Held by a transfer's flag: a weak reference, so a loop that went away leaves its flags harmless.
class TokenNotifier final : public CompletionNotifier {
 public:
  TokenNotifier(std::weak_ptr<AsyncBridge::Ready> ready, std::uint64_t token)
      : ready_(std::move(ready)), token_(token) {}
  void notify() noexcept override {
    if (auto ready = ready_.lock()) ready->push(token_);
  }

 private:
  std::weak_ptr<AsyncBridge::Ready> ready_;
  std::uint64_t token_;
};

}  // namespace

AsyncBridge::Ready::Ready() : fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

AsyncBridge::Ready::~Ready() {
  if (fd >= 0) ::close(fd);
}

void AsyncBridge::Ready::push(std::uint64_t token) noexcept {
  try {
    std::lock_guard lock(mutex);
    tokens.push_back(token);
  } catch (...) {
    return;  // out of memory: the waiter's own timeout, if any, still ends its wait
  }
  const std::uint64_t one = 1;
  // Only EAGAIN (counter at its maximum) can fail here, and then the fd is readable anyway.
  (void)!::write(fd, &one, sizeof one);
}

AsyncBridge::AsyncBridge() : ready_(std::make_shared<Ready>()) {
  if (ready_->fd < 0) {
    raise_error(Errc::provider, ("eventfd for an asyncio bridge: " +
                                 std::string(std::strerror(errno))).c_str());
  }
}

int AsyncBridge::fd() const noexcept { return ready_->fd; }

std::uint64_t AsyncBridge::watch(const Transfer& transfer) {
  const std::uint64_t token = next_token_++;
  auto notifier = std::make_shared<TokenNotifier>(ready_, token);
  return transfer.notify_on_complete(std::move(notifier)) ? token : 0;
}

std::vector<std::uint64_t> AsyncBridge::take() {
  std::uint64_t count = 0;
  (void)!::read(ready_->fd, &count, sizeof count);  // EAGAIN: nothing since the last take
  std::lock_guard lock(ready_->mutex);
  std::vector<std::uint64_t> out;
  out.swap(ready_->tokens);
  return out;
}

void bind_async_bridge(py::module_& m) {
  py::class_<AsyncBridge>(m, "AsyncBridge",
                          "Completions of awaited transfers into one asyncio event loop: an "
                          "eventfd the loop watches and the tokens it then takes. Used by "
                          "Transfer.__await__ (fabric_lib._aio); not needed directly.")
      .def(py::init<>())
      .def_property_readonly("fd", &AsyncBridge::fd,
                             "The eventfd to watch with loop.add_reader.")
      .def("watch", &AsyncBridge::watch, py::arg("transfer"),
           "A token under which the transfer is reported once done (at once if it is); 0 if "
           "the transfer is already watched.")
      .def("take", &AsyncBridge::take,
           "Tokens of transfers completed since the last call.");
}

}  // namespace fabric::python
