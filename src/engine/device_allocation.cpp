#include "engine/device_allocation.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "common/log.hpp"
#include "cuda/device_range.hpp"
#include "cuda/driver.hpp"
#include "cuda/primary_context.hpp"

namespace fabric::engine {

Result<DeviceAllocation> find_device_allocation(void* ptr, std::size_t length, Device device) {
  auto driver = cuda::driver();
  if (!driver) {
    return Status(Errc::unsupported, fmt::format("registering {} memory: {}", device.to_string(),
                                                 driver.status().message()));
  }
  const cuda::Driver& drv = **driver;
  auto context = cuda::PrimaryContext::retain(drv, device.index);
  if (!context) return context.status();
  auto scope = cuda::ScopedContext::enter(drv, (*context)->get());
  if (!scope) return scope.status();

  const auto address = reinterpret_cast<cuda::CUdeviceptr>(ptr);
  auto range = cuda::address_range(drv, address);
  if (!range) {
    return Status(Errc::invalid_argument,
                  fmt::format("{} is not memory of {}: {}", ptr, device.to_string(),
                              range.status().message()));
  }
  const std::uint64_t end = static_cast<std::uint64_t>(range->base) + range->size;
  if (length > end - address) {
    return Status(Errc::invalid_argument,
                  fmt::format("[{}, +{}) runs past the end of its {} allocation [{:#x}, +{})",
                              ptr, length, device.to_string(), range->base, range->size));
  }
  DeviceAllocation out;
  out.base = range->base;
  out.size = range->size;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  if (out.base % page == 0) {
    const std::size_t aligned = (out.size + page - 1) / page * page;
    auto fd = cuda::export_dmabuf(drv, range->base, aligned);
    if (fd) {
      out.dmabuf = std::move(fd).value();
    } else {
      log::info("no dma-buf for {} memory ({}): NICs that need one fall back to peer memory",
                device.to_string(), fd.status().message());
    }
  }
  return out;
}

}  // namespace fabric::engine
