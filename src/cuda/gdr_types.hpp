#pragma once
// Our own declarations of the GDRCopy user-space API (libgdrapi, API 2.x),
// written from its public documentation, so the library builds and runs
// without GDRCopy installed.

#include <cstddef>
#include <cstdint>

namespace fabric::cuda {

struct GdrState;  // opaque `struct gdr`
using gdr_t = GdrState*;

// Passed by value, as in the C API: a struct of one unsigned long.
struct gdr_mh_t {
  unsigned long h;
};

// gdr_info_v2 layout. gdr_get_info (API 2.0–2.2) fills the same prefix.
struct GdrInfo {
  std::uint64_t va;
  std::uint64_t mapped_size;
  std::uint32_t page_size;
  std::uint64_t tm_cycles;
  std::uint32_t cycles_per_ms;
  unsigned mapped : 1;
  unsigned wc_mapping : 1;
  int mapping_type;  // v2 only: none, write-combined, caching, device
};

// The driver pins and maps whole GPU pages.
inline constexpr std::size_t kGpuPageSize = std::size_t{1} << 16;

struct GdrApi {
  gdr_t (*gdr_open)() = nullptr;
  int (*gdr_close)(gdr_t g) = nullptr;
  int (*gdr_pin_buffer)(gdr_t g, unsigned long addr, std::size_t size, std::uint64_t p2p_token,
                        std::uint32_t va_space, gdr_mh_t* handle) = nullptr;
  int (*gdr_unpin_buffer)(gdr_t g, gdr_mh_t handle) = nullptr;
  int (*gdr_map)(gdr_t g, gdr_mh_t handle, void** va, std::size_t size) = nullptr;
  int (*gdr_unmap)(gdr_t g, gdr_mh_t handle, void* va, std::size_t size) = nullptr;
  int (*gdr_get_info)(gdr_t g, gdr_mh_t handle, GdrInfo* info) = nullptr;
  int (*gdr_copy_to_mapping)(gdr_mh_t handle, void* map_ptr, const void* src,
                             std::size_t size) = nullptr;
};

}  // namespace fabric::cuda
