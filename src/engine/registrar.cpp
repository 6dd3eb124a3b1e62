#include "engine/registrar.hpp"

#include "common/log.hpp"
#include "engine/device_allocation.hpp"

namespace fabric::engine {

Result<Registered> Registrar::register_memory(void* ptr, std::size_t length, Device device,
                                              Access access, const NetAddr& self,
                                              const void* engine) {
  auto reg = std::make_shared<detail::Registration>();
  reg->ptr = ptr;
  reg->length = length;
  reg->device = device;
  reg->access = access;
  reg->engine = engine;
  reg->group = group_;
  std::vector<RemoteKey> keys;
  if (device.is_host()) {
    for (const auto& d : domains_.domains()) {
      auto region = d->register_memory(domain::MemorySpan::host(ptr, length), access);
      if (!region) return region.status();
      keys.push_back(region.value()->remote_key());
      reg->regions.push_back(std::move(region).value());
    }
  } else {
    auto found = device_regions(ptr, length, device, access);
    if (!found) return found.status();
    auto& [regions, offset] = *found;
    for (const auto& region : regions) {
      // Remote addresses are relative to the key's base: move it to ptr.
      RemoteKey key = region->remote_key();
      key.addr_base += offset;
      keys.push_back(key);
    }
    reg->regions = std::move(regions);
  }
  auto desc =
      MrDesc::make(self, reinterpret_cast<std::uint64_t>(ptr), length, std::move(keys), group_,
                   access);
  if (!desc) return desc.status();
  registrations_.push_back(reg);
  publish_gauges();
  return Registered{MrHandle(reg), std::move(desc).value()};
}

Result<std::pair<std::vector<std::shared_ptr<domain::MemoryRegion>>, std::uint64_t>>
Registrar::device_regions(void* ptr, std::size_t length, Device device, Access access) {
  auto alloc = find_device_allocation(ptr, length, device);
  if (!alloc) return alloc.status();
  const std::uint64_t offset = reinterpret_cast<std::uintptr_t>(ptr) - alloc->base;
  const auto key = std::make_tuple(device.index, alloc->base, alloc->size,
                                   static_cast<std::uint32_t>(access));
  std::vector<std::shared_ptr<domain::MemoryRegion>> regions;
  if (auto it = device_regions_.find(key); it != device_regions_.end()) {
    for (const auto& weak : it->second) {
      if (auto region = weak.lock()) regions.push_back(std::move(region));
    }
    if (regions.size() == domains_.size()) return std::make_pair(std::move(regions), offset);
    regions.clear();
  }
  const domain::MemorySpan span{reinterpret_cast<void*>(alloc->base), alloc->size, device,
                                alloc->dmabuf.get(), 0};
  std::vector<std::weak_ptr<domain::MemoryRegion>> cached;
  for (const auto& d : domains_.domains()) {
    auto region = d->register_memory(span, access);
    if (!region) return region.status();
    regions.push_back(std::move(region).value());
    cached.push_back(regions.back());
  }
  std::erase_if(device_regions_, [](const auto& entry) {
    return entry.second.empty() || entry.second.front().expired();
  });
  device_regions_[key] = std::move(cached);
  log::debug("group {}: registered the {} allocation [{:#x}, +{}) on {} Domain(s)", group_,
             device.to_string(), alloc->base, alloc->size, domains_.size());
  return std::make_pair(std::move(regions), offset);
}

void Registrar::deregister(std::shared_ptr<detail::Registration> reg, std::promise<Status> done) {
  reg->alive.store(false, std::memory_order_release);
  if (reg->in_flight.load(std::memory_order_acquire) > 0) {
    deferred_.emplace_back(std::move(reg), std::move(done));
    return;
  }
  close(*reg);
  done.set_value(Status::success());
}

void Registrar::release_use(detail::Registration& reg) {
  if (reg.in_flight.fetch_sub(1, std::memory_order_acq_rel) > 1 ||
      reg.alive.load(std::memory_order_acquire)) {
    return;
  }
  for (auto it = deferred_.begin(); it != deferred_.end(); ++it) {
    if (it->first.get() == &reg) {
      close(reg);
      it->second.set_value(Status::success());
      deferred_.erase(it);
      return;
    }
  }
}

void Registrar::close(detail::Registration& reg) {
  reg.regions.clear();
  std::erase_if(registrations_, [&](const auto& r) { return r.get() == &reg; });
  publish_gauges();
}

void Registrar::publish_gauges() noexcept {
  std::uint64_t bytes = 0;
  for (const auto& r : registrations_) bytes += r->length;
  live_.store(registrations_.size(), std::memory_order_relaxed);
  live_bytes_.store(bytes, std::memory_order_relaxed);
}

void Registrar::close_all() {
  for (auto& [reg, promise] : deferred_) {
    reg->regions.clear();
    promise.set_value(Status::success());
  }
  deferred_.clear();
  for (auto& reg : registrations_) {
    reg->alive.store(false, std::memory_order_release);
    reg->regions.clear();
  }
  registrations_.clear();
  publish_gauges();
}

}  // namespace fabric::engine
