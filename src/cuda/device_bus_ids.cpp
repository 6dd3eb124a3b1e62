#include "cuda/device_bus_ids.hpp"

#include <fmt/format.h>

#include <array>

#include "cuda/driver.hpp"

namespace fabric::cuda {

Result<std::vector<std::string>> visible_bus_ids() {
  auto loaded = driver();
  if (!loaded) return loaded.status();
  const Driver& d = **loaded;
  const DriverApi& api = d.api();
  if (api.cuDeviceGetPCIBusId == nullptr) {
    return Status(Errc::unsupported, "the CUDA driver lacks cuDeviceGetPCIBusId");
  }
  int count = 0;
  if (auto st = d.check(api.cuDeviceGetCount(&count), "cuDeviceGetCount"); !st.ok()) return st;
  std::vector<std::string> out;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device{};
    if (auto st = d.check(api.cuDeviceGet(&device, ordinal), "cuDeviceGet"); !st.ok()) return st;
    // 13 characters and the NUL for "dddd:bb:dd.f"; room for an 8-digit domain.
    std::array<char, 32> text{};
    if (auto st = d.check(api.cuDeviceGetPCIBusId(text.data(), static_cast<int>(text.size()),
                                                  device),
                          fmt::format("cuDeviceGetPCIBusId({})", ordinal));
        !st.ok()) {
      return st;
    }
    out.emplace_back(text.data());
  }
  return out;
}

}  // namespace fabric::cuda
