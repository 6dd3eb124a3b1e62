#include "watcher/word_memory.hpp"

#include <cstdlib>
#include <cstring>

namespace fabric::watcher {

namespace {
constexpr std::size_t kPage = 4096;
}

void WordMemory::FreeHost::operator()(void* p) const noexcept { std::free(p); }

Result<WordMemory> WordMemory::allocate(WatcherMemory kind, std::size_t bytes) {
  WordMemory mem;
  if (kind == WatcherMemory::host) {
    const std::size_t rounded = (bytes + kPage - 1) / kPage * kPage;
    void* p = std::aligned_alloc(kPage, rounded);
    if (p == nullptr) return Status(Errc::again, "out of memory for watcher words");
    std::memset(p, 0, rounded);
    mem.plain_.reset(p);
    mem.host_ = static_cast<std::uint64_t*>(p);
    return mem;
  }
  auto pinned = cuda::PinnedHostMemory::allocate(bytes);
  if (!pinned) return pinned.status();
  std::memset(pinned->host(), 0, bytes);
  mem.host_ = static_cast<std::uint64_t*>(pinned->host());
  mem.device_ = reinterpret_cast<std::uint64_t*>(static_cast<std::uintptr_t>(pinned->device()));
  mem.pinned_.emplace(std::move(pinned).value());
  return mem;
}

}  // namespace fabric::watcher
