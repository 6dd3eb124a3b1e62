// How arrivals reach the caller without a request: immediate-count expectations, ImmCounters,
// reserved immediate blocks, and watchers of GPU-written words.

#include <fmt/format.h>

#include "common/log.hpp"
#include "engine/engine_impl.hpp"

namespace fabric {

Status TransferEngine::expect_imm_count(std::uint32_t imm, std::uint64_t count,
                                        ImmCallback on_reached) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (!on_reached) return {Errc::invalid_argument, "expect_imm_count needs a callback"};
  {
    std::lock_guard lock(impl_->counters_mutex);
    if (impl_->counter_imms.contains(imm)) {
      return {Errc::invalid_argument,
              fmt::format("imm {} is counted by an ImmCounter; release it first", imm)};
    }
  }
  impl_->shared->imms.expect(imm, count, std::move(on_reached));
  return Status::success();
}

Status TransferEngine::expect_imm_count(std::uint32_t imm, std::uint64_t count,
                                        std::shared_ptr<GpuFlag> flag, std::uint64_t value) {
  if (!flag) return {Errc::invalid_argument, "expect_imm_count needs a GpuFlag"};
  return expect_imm_count(imm, count, [flag = std::move(flag), value](std::uint32_t i,
                                                                      std::uint64_t) {
    if (Status st = flag->store(value); !st.ok()) {
      log::error("imm {}: setting the GPU flag at {} failed: {}", i, flag->device_word(),
                 st.to_string());
    }
  });
}

Result<ImmReservation> TransferEngine::reserve_imms(std::uint32_t count, std::string owner) {
  if (!impl_->accepting.load(std::memory_order_acquire)) {
    return Status(Errc::shutdown, "reserve_imms: the engine is stopped");
  }
  return impl_->imm_space->reserve(count, std::move(owner));
}

Result<ImmReservation> TransferEngine::reserve_imms_from(std::uint32_t lowest, std::uint32_t count,
                                                         std::string owner) {
  if (!impl_->accepting.load(std::memory_order_acquire)) {
    return Status(Errc::shutdown, "reserve_imms_from: the engine is stopped");
  }
  return impl_->imm_space->reserve(count, std::move(owner), lowest);
}

Result<std::shared_ptr<ImmCounter>> TransferEngine::imm_counter(std::uint32_t imm) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  {
    std::lock_guard lock(impl_->counters_mutex);
    if (!impl_->counter_imms.insert(imm).second) {
      return Status(Errc::invalid_argument,
                    fmt::format("imm {} already has an ImmCounter", imm));
    }
  }
  auto counter = std::make_shared<ImmCounter>(imm);
  // Synchronous, so value() already holds the arrivals counted before this call.
  // Refused while an expectation of imm is pending (ImmTable::attach).
  if (Status st = impl_->shared->imms.attach(counter); !st.ok()) {
    std::lock_guard lock(impl_->counters_mutex);
    impl_->counter_imms.erase(imm);
    return st;
  }
  return counter;
}

Status TransferEngine::release_imm_counter(std::uint32_t imm) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  {
    std::lock_guard lock(impl_->counters_mutex);
    if (impl_->counter_imms.erase(imm) == 0) {
      return {Errc::not_found, fmt::format("imm {} has no ImmCounter", imm)};
    }
  }
  impl_->shared->imms.detach(imm);
  return Status::success();
}

Result<Watcher> TransferEngine::alloc_uvm_watcher(WatchCallback callback, WatcherMemory memory) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (!callback) return Status(Errc::invalid_argument, "alloc_uvm_watcher needs a callback");
  std::lock_guard lock(impl_->watcher_mutex);
  if (!impl_->watcher) {
    watcher::WatcherOptions options;
    options.cpus = impl_->threads.cpus;
    impl_->watcher = std::make_unique<watcher::WatcherThread>(std::move(options));
  }
  return impl_->watcher->alloc(std::move(callback), memory);
}

}  // namespace fabric
