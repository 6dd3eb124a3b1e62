#pragma once
// Move-only owner of a dlopen() handle: optional libraries (libibverbs,
// libcuda) are looked for at run time so fabric-info runs without them.

#include <dlfcn.h>

#include <string>
#include <utility>

namespace info {

class DlHandle {
 public:
  // Empty (check loaded()) when the library is absent; error() says why.
  explicit DlHandle(const char* name) : handle_(::dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ == nullptr) {
      const char* why = ::dlerror();
      error_ = why != nullptr ? why : "dlopen failed";
    }
  }
  ~DlHandle() {
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  DlHandle(DlHandle&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)), error_(std::move(other.error_)) {}
  DlHandle& operator=(DlHandle&&) = delete;
  DlHandle(const DlHandle&) = delete;
  DlHandle& operator=(const DlHandle&) = delete;

  [[nodiscard]] bool loaded() const noexcept { return handle_ != nullptr; }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  template <typename Fn>
  [[nodiscard]] Fn* symbol(const char* name) const noexcept {
    return handle_ != nullptr ? reinterpret_cast<Fn*>(::dlsym(handle_, name)) : nullptr;
  }

 private:
  void* handle_ = nullptr;
  std::string error_;
};

}  // namespace info
