#pragma once
// The memory of one slab of watched words: plain page-aligned host memory, or
// CUDA device-mapped pinned host memory. One allocation per slab, so pinning
// (slow, and limited per process) is paid once per 64 watchers.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "cuda/pinned_host.hpp"
#include "fabric/status.hpp"
#include "fabric/watcher.hpp"

namespace fabric::watcher {

class WordMemory {
 public:
  static Result<WordMemory> allocate(WatcherMemory kind, std::size_t bytes);
  WordMemory(WordMemory&&) noexcept = default;
  WordMemory& operator=(WordMemory&&) noexcept = default;

  [[nodiscard]] std::uint64_t* host() const noexcept { return host_; }
  // nullptr for host memory.
  [[nodiscard]] std::uint64_t* device() const noexcept { return device_; }

 private:
  struct FreeHost {
    void operator()(void* p) const noexcept;
  };
  WordMemory() = default;
  std::unique_ptr<void, FreeHost> plain_;
  std::optional<cuda::PinnedHostMemory> pinned_;
  std::uint64_t* host_ = nullptr;
  std::uint64_t* device_ = nullptr;
};

}  // namespace fabric::watcher
