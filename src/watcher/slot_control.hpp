#pragma once
// A watcher slot's life as one atomic 64-bit word: the generation of the
// Watcher that owns it (high half) and its state (low byte). Every transition
// is a CAS on the whole word, so a stale handle or a stale poll of a reused
// slot can never act on its new owner.

#include <cstdint>

namespace fabric::watcher {

enum class SlotState : std::uint8_t {
  free = 0,     // in the free list, no callback
  active = 1,   // polled
  queued = 2,   // a delivery was handed out and has not started
  running = 3,  // a callback runs
};

// Set on active/queued/running by release(); whoever holds the slot next
// (release itself for active, the delivery otherwise) frees it.
inline constexpr std::uint64_t kReleaseBit = 0x80;
inline constexpr std::uint64_t kStateMask = 0x7f;

constexpr std::uint64_t control(std::uint32_t generation, SlotState state,
                                bool release = false) noexcept {
  return (static_cast<std::uint64_t>(generation) << 32) | static_cast<std::uint64_t>(state) |
         (release ? kReleaseBit : 0);
}
constexpr std::uint32_t generation_of(std::uint64_t c) noexcept {
  return static_cast<std::uint32_t>(c >> 32);
}
constexpr SlotState state_of(std::uint64_t c) noexcept {
  return static_cast<SlotState>(c & kStateMask);
}
constexpr bool release_requested(std::uint64_t c) noexcept { return (c & kReleaseBit) != 0; }

}  // namespace fabric::watcher
