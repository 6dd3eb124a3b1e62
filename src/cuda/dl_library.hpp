#pragma once
// Move-only owner of a dlopen() handle, so optional GPU libraries are found at
// run time and the library links and runs without them.

#include <initializer_list>
#include <string>

#include "fabric/status.hpp"

namespace fabric::cuda {

class DlLibrary {
 public:
  DlLibrary() = default;
  // RTLD_NOW so a library missing a needed symbol fails here, not mid-call.
  // Errc::unsupported "<name> not found: <dlerror>" when it cannot be loaded.
  static Result<DlLibrary> open(const std::string& name);
  ~DlLibrary();
  DlLibrary(DlLibrary&& other) noexcept;
  DlLibrary& operator=(DlLibrary&& other) noexcept;
  DlLibrary(const DlLibrary&) = delete;
  DlLibrary& operator=(const DlLibrary&) = delete;

  // nullptr when absent.
  [[nodiscard]] void* symbol(const char* name) const noexcept;
  // Points `out` at the first of `names` the library exports; false if none.
  template <typename Fn>
  bool resolve(Fn*& out, std::initializer_list<const char*> names) const noexcept {
    for (const char* name : names) {
      if (void* sym = symbol(name)) {
        out = reinterpret_cast<Fn*>(sym);
        return true;
      }
    }
    return false;
  }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] bool loaded() const noexcept { return handle_ != nullptr; }

 private:
  DlLibrary(void* handle, std::string name) noexcept : handle_(handle), name_(std::move(name)) {}
  void* handle_ = nullptr;
  std::string name_;
};

}  // namespace fabric::cuda
