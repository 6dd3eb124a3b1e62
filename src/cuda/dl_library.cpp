#include "cuda/dl_library.hpp"

#include <dlfcn.h>

#include <utility>

namespace fabric::cuda {

Result<DlLibrary> DlLibrary::open(const std::string& name) {
  void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return Status(Errc::unsupported, name + " not found: " + (why ? why : "unknown reason"));
  }
  return DlLibrary(handle, name);
}

DlLibrary::~DlLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

DlLibrary::DlLibrary(DlLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), name_(std::move(other.name_)) {}

DlLibrary& DlLibrary::operator=(DlLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) ::dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    name_ = std::move(other.name_);
  }
  return *this;
}

void* DlLibrary::symbol(const char* name) const noexcept {
  if (handle_ == nullptr) return nullptr;
  return ::dlsym(handle_, name);
}

}  // namespace fabric::cuda
