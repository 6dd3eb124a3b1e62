// Verbs devices and the CUDA driver, found with dlopen: no link-time
// dependency on rdma-core or CUDA, and no headers of theirs.

#include <endian.h>
#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cuda/dl_library.hpp"
#include "probes.hpp"

namespace info {

namespace {

// The stable libibverbs entry points, with the device kept opaque.
struct ibv_device;
using GetDeviceList = ibv_device**(int*);
using FreeDeviceList = void(ibv_device**);
using GetDeviceName = const char*(ibv_device*);
using GetDeviceGuid = std::uint64_t(ibv_device*);  // big-endian on the wire

}  // namespace

VerbsScan scan_verbs() {
  VerbsScan scan;
  // The library's own dlopen owner (src/cuda/dl_library.hpp), not a copy.
  auto lib = fabric::cuda::DlLibrary::open("libibverbs.so.1");
  if (!lib) {
    scan.note = "libibverbs.so.1 not found";
    return scan;
  }
  scan.library = true;
  GetDeviceList* get_list = nullptr;
  FreeDeviceList* free_list = nullptr;
  GetDeviceName* get_name = nullptr;
  GetDeviceGuid* get_guid = nullptr;
  if (!lib->resolve(get_list, {"ibv_get_device_list"}) ||
      !lib->resolve(free_list, {"ibv_free_device_list"}) ||
      !lib->resolve(get_name, {"ibv_get_device_name"}) ||
      !lib->resolve(get_guid, {"ibv_get_device_guid"})) {
    scan.note = "libibverbs.so.1 lacks the device-list entry points";
    return scan;
  }
  int count = 0;
  errno = 0;
  ibv_device** list = get_list(&count);
  if (list == nullptr) {
    scan.note = fmt::format("no RDMA subsystem: {}", std::strerror(errno != 0 ? errno : ENODEV));
    return scan;
  }
  for (int i = 0; i < count; ++i) {
    const char* name = get_name(list[i]);
    scan.devices.push_back({name ? name : "?", be64toh(get_guid(list[i]))});
  }
  free_list(list);
  if (scan.devices.empty()) {
    scan.note = "no verbs devices";
    return scan;
  }
  if (auto ports = fabric::list_verbs_ports(); ports) {
    scan.ports = std::move(ports).value();
  } else {
    scan.note = ports.status().to_string();
  }
  return scan;
}

CudaProbe probe_cuda() {
  CudaProbe probe;
  probe.peermem_module = ::access("/sys/module/nvidia_peermem", F_OK) == 0;
  auto lib = fabric::cuda::DlLibrary::open("libcuda.so.1");
  if (!lib) {
    probe.note = lib.status().message();
    return probe;
  }
  probe.present = true;
  probe.note = "libcuda.so.1 loads";
  probe.dmabuf_export = lib->symbol("cuMemGetHandleForAddressRange") != nullptr;
  return probe;
}

}  // namespace info
