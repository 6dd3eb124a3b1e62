#pragma once
// 64 watcher slots sharing one 4 KiB page of words. Each word sits on its own
// 64-byte cache line: host writers of different watchers never false-share,
// and a GPU's posted PCIe write to one word does not invalidate the line the
// poller is reading for its neighbour. Polling a full slab touches 64 lines
// (4 KiB), which stays in L1.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "fabric/watcher.hpp"
#include "watcher/word_memory.hpp"

namespace fabric::watcher {

struct Slot {
  std::atomic<std::uint64_t> control{0};  // see slot_control.hpp
  // The value last handed to the callback; written by alloc before the slot
  // is published and by the poller after.
  std::atomic<std::uint64_t> last_seen{0};
  // Owned by whoever moved the state to running, or by alloc/reclaim under
  // the pool's mutex.
  WatchCallback callback;
};

struct Slab {
  static constexpr std::size_t kSlots = 64;
  static constexpr std::size_t kStrideWords = 64 / sizeof(std::uint64_t);
  static constexpr std::size_t kBytes = kSlots * kStrideWords * sizeof(std::uint64_t);
  static_assert(kBytes == 4096);

  Slab(WordMemory mem, WatcherMemory k) : memory(std::move(mem)), kind(k) {}

  [[nodiscard]] std::uint64_t* word(std::size_t i) const noexcept {
    return memory.host() + i * kStrideWords;
  }
  [[nodiscard]] std::uint64_t* device_word(std::size_t i) const noexcept {
    return memory.device() == nullptr ? nullptr : memory.device() + i * kStrideWords;
  }

  WordMemory memory;
  WatcherMemory kind;
  std::array<Slot, kSlots> slots;
  // Bit i: slot i is allocated. Lets the poller skip free slots without
  // touching them.
  std::atomic<std::uint64_t> in_use{0};
};

}  // namespace fabric::watcher
