#pragma once
// The shared state behind WatcherThread and every Watcher handle: slabs of
// slots, the free lists, and one polling pass. Handles and queued deliveries
// hold it by shared_ptr, so it outlives the thread when they do.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "fabric/status.hpp"
#include "fabric/watcher.hpp"
#include "watcher/slab.hpp"
#include "watcher/watcher_options.hpp"

namespace fabric::detail {

class WatcherPool : public std::enable_shared_from_this<WatcherPool> {
 public:
  explicit WatcherPool(watcher::WatcherOptions options);
  WatcherPool(const WatcherPool&) = delete;
  WatcherPool& operator=(const WatcherPool&) = delete;

  // Any thread. Errc::shutdown after stop_deliveries(), Errc::again at
  // max_watchers, Errc::unsupported for cuda_mapped without CUDA.
  Result<Watcher> alloc(WatchCallback callback, WatcherMemory memory);
  // Any thread; see Watcher::release().
  void release(std::uint32_t index, std::uint32_t generation) noexcept;
  [[nodiscard]] bool active(std::uint32_t index, std::uint32_t generation) const noexcept;

  struct PassResult {
    std::size_t changes = 0;   // deliveries handed out
    std::size_t watching = 0;  // slots in use
  };
  // The watcher thread only: one pass over every slot in use.
  PassResult poll_once();
  // After this no delivery starts, including ones already handed to the
  // executor, and alloc fails. Idempotent.
  void stop_deliveries() noexcept;

 private:
  watcher::Slot& slot(std::uint32_t index) const noexcept;
  watcher::Slab& slab_of(std::uint32_t index) const noexcept;
  void dispatch(std::uint32_t index, std::uint32_t generation, std::uint64_t old_value,
                std::uint64_t new_value);
  void deliver(std::uint32_t index, std::uint32_t generation, std::uint64_t old_value,
               std::uint64_t new_value) noexcept;
  // Frees a slot whose state the caller owns.
  void reclaim(std::uint32_t index, std::uint32_t generation) noexcept;
  Status grow(WatcherMemory memory);

  const watcher::WatcherOptions options_;
  const std::size_t max_slabs_;
  std::atomic<bool> stopped_{false};

  // Published to the poller without a lock: slabs_[i] is written before
  // slab_count_ is raised past i, and a slab is never removed.
  std::unique_ptr<std::atomic<watcher::Slab*>[]> slabs_;
  std::atomic<std::size_t> slab_count_{0};

  std::mutex mutex_;  // slow path: alloc, reclaim, grow
  std::vector<std::unique_ptr<watcher::Slab>> owned_;
  std::array<std::vector<std::uint32_t>, 2> free_;  // per WatcherMemory
  std::array<std::size_t, 2> total_{};              // slots per WatcherMemory
};

}  // namespace fabric::detail
