#pragma once
// Move-only owner of a loaded hwloc topology, I/O devices included.

#include <hwloc.h>

#include <string>
#include <string_view>

#include "fabric/status.hpp"

namespace fabric::topo {

class HwlocTopology {
 public:
  // Probes this machine. GPU-runtime plugins are kept out (see the .cpp).
  static Result<HwlocTopology> load_system();
  // Parses hwloc XML text (lstopo --of xml); `origin` names it in errors.
  // Errc::malformed when hwloc rejects it.
  static Result<HwlocTopology> load_xml(std::string_view xml, std::string_view origin);
  // Reads the file, then load_xml(). Errc::not_found when it cannot be read.
  static Result<HwlocTopology> load_xml_file(const std::string& path);

  HwlocTopology() = default;
  ~HwlocTopology() { reset(); }
  HwlocTopology(HwlocTopology&& other) noexcept;
  HwlocTopology& operator=(HwlocTopology&& other) noexcept;
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;

  [[nodiscard]] hwloc_topology_t get() const noexcept { return topology_; }
  explicit operator bool() const noexcept { return topology_ != nullptr; }

 private:
  explicit HwlocTopology(hwloc_topology_t topology) noexcept : topology_(topology) {}
  void reset() noexcept;
  hwloc_topology_t topology_ = nullptr;
};

// Move-only owner of an hwloc bitmap.
class HwlocBitmap {
 public:
  HwlocBitmap() : bitmap_(hwloc_bitmap_alloc()) {}
  ~HwlocBitmap() { hwloc_bitmap_free(bitmap_); }
  HwlocBitmap(HwlocBitmap&& other) noexcept : bitmap_(other.bitmap_) { other.bitmap_ = nullptr; }
  HwlocBitmap& operator=(HwlocBitmap&&) = delete;
  HwlocBitmap(const HwlocBitmap&) = delete;
  HwlocBitmap& operator=(const HwlocBitmap&) = delete;

  [[nodiscard]] hwloc_bitmap_t get() const noexcept { return bitmap_; }

 private:
  hwloc_bitmap_t bitmap_;
};

}  // namespace fabric::topo
