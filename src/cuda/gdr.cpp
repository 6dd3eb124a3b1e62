#include "cuda/gdr.hpp"

#include <fmt/format.h>

#include <mutex>

namespace fabric::cuda {

Result<std::unique_ptr<GdrLibrary>> GdrLibrary::load(const std::string& path) {
  auto lib = DlLibrary::open(path);
  if (!lib) return lib.status();
  std::unique_ptr<GdrLibrary> g(new GdrLibrary(std::move(lib).value()));
  GdrApi& a = g->api_;
  const DlLibrary& l = g->library_;
  struct Required {
    bool found;
    const char* name;
  };
  const Required required[] = {
      {l.resolve(a.gdr_open, {"gdr_open"}), "gdr_open"},
      {l.resolve(a.gdr_close, {"gdr_close"}), "gdr_close"},
      {l.resolve(a.gdr_pin_buffer, {"gdr_pin_buffer"}), "gdr_pin_buffer"},
      {l.resolve(a.gdr_unpin_buffer, {"gdr_unpin_buffer"}), "gdr_unpin_buffer"},
      {l.resolve(a.gdr_map, {"gdr_map"}), "gdr_map"},
      {l.resolve(a.gdr_unmap, {"gdr_unmap"}), "gdr_unmap"},
      {l.resolve(a.gdr_get_info, {"gdr_get_info_v2", "gdr_get_info"}), "gdr_get_info"},
      {l.resolve(a.gdr_copy_to_mapping, {"gdr_copy_to_mapping"}), "gdr_copy_to_mapping"},
  };
  for (const auto& r : required) {
    if (!r.found) return Status(Errc::unsupported, fmt::format("{} lacks {}", path, r.name));
  }
  return g;
}

Result<const GdrLibrary*> gdr_library() {
  static std::once_flag once;
  static const GdrLibrary* loaded = nullptr;
  static Status failure;
  std::call_once(once, [] {
    std::string reasons;
    for (const char* name : {"libgdrapi.so.2", "libgdrapi.so"}) {
      auto g = GdrLibrary::load(name);
      if (g) {
        // Never destroyed: mappings released by static destructors need it.
        loaded = std::move(g).value().release();
        return;
      }
      if (!reasons.empty()) reasons += "; ";
      reasons += g.status().message();
    }
    failure = Status(Errc::unsupported, "GDRCopy unavailable: " + reasons);
  });
  if (loaded == nullptr) return failure;
  return loaded;
}

}  // namespace fabric::cuda
