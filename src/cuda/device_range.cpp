#include "cuda/device_range.hpp"

namespace fabric::cuda {

Result<DeviceRange> address_range(const Driver& driver, CUdeviceptr ptr) {
  DeviceRange range;
  if (Status s = driver.check(driver.api().cuMemGetAddressRange(&range.base, &range.size, ptr),
                              "cuMemGetAddressRange");
      !s.ok()) {
    return s;
  }
  return range;
}

Result<UniqueFd> export_dmabuf(const Driver& driver, CUdeviceptr base, std::size_t size) {
  const auto fn = driver.api().cuMemGetHandleForAddressRange;
  if (fn == nullptr) {
    return Status(Errc::unsupported, "the CUDA driver lacks cuMemGetHandleForAddressRange");
  }
  int fd = -1;
  if (Status s = driver.check(fn(&fd, base, size, kMemRangeHandleTypeDmaBufFd, 0),
                              "cuMemGetHandleForAddressRange");
      !s.ok()) {
    return s;
  }
  return UniqueFd(fd);
}

}  // namespace fabric::cuda
