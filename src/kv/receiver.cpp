// The Receiver's life and its calls on requests it made; connect() is in receiver_connect.cpp,
// request() and decline() in receiver_request.cpp, the shared state in receiver_impl.hpp.

#include "fabric/kv/receiver.hpp"

#include <fmt/format.h>

#include <atomic>

#include "arguments.hpp"
#include "receiver_impl.hpp"

namespace fabric::kv {

Receiver::Receiver(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Receiver::~Receiver() {
  impl_->link.stop();
  std::lock_guard lock(impl_->mutex);
  for (std::uint32_t s = 0; s < impl_->sources.size(); ++s) {
    for (auto& r : impl_->sources[s].regions) (void)impl_->engine.dereg_mr(r.handle);
  }
}

Result<std::unique_ptr<Receiver>> Receiver::create(TransferEngine& engine, ReceiverConfig config) {
  if (auto st = config.layout.validate(); !st.ok()) return st;
  if (config.regions.size() < config.layout.num_regions) {
    return Status(Errc::invalid_argument,
                  fmt::format("KV receiver: {} regions for a layout of {}", config.regions.size(),
                              config.layout.num_regions));
  }
  std::vector<std::uint64_t> bytes;
  for (const RegionMemory& r : config.regions) bytes.push_back(r.ptr != nullptr ? r.length : 0);
  if (auto st = check_parts_fit("KV receiver", config.layout, bytes); !st.ok()) return st;
  // A name per receiver: two receivers on one engine get disjoint blocks.
  static std::atomic<std::uint64_t> receivers{0};
  auto block = engine.reserve_imms(kReceiverImms, fmt::format("kv.receiver#{}", ++receivers));
  if (!block.ok()) {
    return Status(block.status().code(),
                  "KV receiver: reserving its immediates: " + block.status().message());
  }
  auto impl = std::make_shared<Impl>(engine, std::move(config), std::move(block).value());
  if (auto st = impl->link.start_for(impl); !st.ok()) return st;
  return std::unique_ptr<Receiver>(new Receiver(std::move(impl)));
}

Status Receiver::cancel(std::string_view id) {
  auto& im = *impl_;
  Outbox a;
  {
    std::lock_guard lock(im.mutex);
    auto found = im.entries.get(id);
    if (!found.ok()) return found.status();
    im.begin_stop(a, std::string(id), **found, Status::success(), true);
  }
  im.changed.notify_all();
  im.deliver(a);
  return Status::success();
}

Result<RequestStatus> Receiver::poll(std::string_view id) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->entries.status(id);
}

Result<RequestStatus> Receiver::wait(std::string_view id, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mutex);
  const std::string key(id);
  const auto deadline = Clock::now() + timeout;
  while (true) {
    // Looked up again after every wait: release() may have erased the request meanwhile, so no
    // reference into the table outlives the lock it was taken under.
    const Impl::Entry* e = impl_->entries.find(key);
    if (e == nullptr) return impl_->entries.missing(id);
    if (is_terminal(e->status.state)) return e->status;
    if (impl_->changed.wait_until(lock, deadline) == std::cv_status::timeout) {
      e = impl_->entries.find(key);
      if (e == nullptr) return impl_->entries.missing(id);
      if (is_terminal(e->status.state)) return e->status;
      return Status(Errc::timeout, fmt::format("KV receiver: request {} still {} after {} ms", id,
                                               state_name(e->status.state), timeout.count()));
    }
  }
}

Status Receiver::release(std::string_view id) {
  std::lock_guard lock(impl_->mutex);
  return impl_->entries.release(id, [&](const std::string&, const Impl::Entry& e) {
    // Reached: on_count freed the value already (a newer request may hold it now). Not reached:
    // its expectation stays pending on the engine, so the value is never reused.
    if (!e.count_reached) impl_->by_imm[e.imm].clear();
  });
}

std::size_t Receiver::active_requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->entries.active();
}

}  // namespace fabric::kv
