#include "watcher/watcher_pool.hpp"

#include <fmt/format.h>

#include <bit>
#include <exception>
#include <utility>

#include "common/backoff.hpp"
#include "common/log.hpp"
#include "watcher/slot_control.hpp"

namespace fabric::detail {

using watcher::control;
using watcher::generation_of;
using watcher::release_requested;
using watcher::Slab;
using watcher::Slot;
using watcher::SlotState;
using watcher::state_of;

namespace {

// Lets release() from inside a callback tell that it would wait for itself.
thread_local const Slot* tls_running_slot = nullptr;

std::size_t slabs_for(std::uint32_t max_watchers) {
  const std::size_t n = (static_cast<std::size_t>(max_watchers) + Slab::kSlots - 1) / Slab::kSlots;
  return n == 0 ? 1 : n;
}

std::size_t kind_index(WatcherMemory m) { return m == WatcherMemory::host ? 0 : 1; }

}  // namespace

WatcherPool::WatcherPool(watcher::WatcherOptions options)
    : options_(std::move(options)),
      max_slabs_(slabs_for(options_.max_watchers)),
      slabs_(new std::atomic<Slab*>[max_slabs_]) {
  for (std::size_t i = 0; i < max_slabs_; ++i) slabs_[i].store(nullptr, std::memory_order_relaxed);
}

Slab& WatcherPool::slab_of(std::uint32_t index) const noexcept {
  return *slabs_[index / Slab::kSlots].load(std::memory_order_acquire);
}

Slot& WatcherPool::slot(std::uint32_t index) const noexcept {
  return slab_of(index).slots[index % Slab::kSlots];
}

Status WatcherPool::grow(WatcherMemory memory) {
  const std::size_t n = slab_count_.load(std::memory_order_relaxed);
  if (n >= max_slabs_) {
    return Status(Errc::again, fmt::format("all {} watcher slots are in use", n * Slab::kSlots));
  }
  auto words = watcher::WordMemory::allocate(memory, Slab::kBytes);
  if (!words) return words.status();
  auto slab = std::make_unique<Slab>(std::move(words).value(), memory);
  slabs_[n].store(slab.get(), std::memory_order_release);
  owned_.push_back(std::move(slab));
  slab_count_.store(n + 1, std::memory_order_release);
  // Room for every slot of this kind now, so reclaim() never allocates.
  auto& free = free_[kind_index(memory)];
  total_[kind_index(memory)] += Slab::kSlots;
  free.reserve(total_[kind_index(memory)]);
  // Highest first, so the free list hands out low slots first.
  for (std::size_t i = Slab::kSlots; i-- > 0;) {
    free.push_back(static_cast<std::uint32_t>(n * Slab::kSlots + i));
  }
  return Status::success();
}

Result<Watcher> WatcherPool::alloc(WatchCallback callback, WatcherMemory memory) {
  if (!callback) return Status(Errc::invalid_argument, "a watcher needs a callback");
  if (memory != WatcherMemory::host && memory != WatcherMemory::cuda_mapped) {
    return Status(Errc::invalid_argument, "unknown WatcherMemory");
  }
  std::lock_guard lock(mutex_);
  if (stopped_.load(std::memory_order_acquire)) {
    return Status(Errc::shutdown, "the watcher thread is stopped");
  }
  auto& free = free_[kind_index(memory)];
  if (free.empty()) {
    if (Status s = grow(memory); !s.ok()) return s;
  }
  const std::uint32_t index = free.back();
  free.pop_back();

  Slab& slab = slab_of(index);
  const std::size_t i = index % Slab::kSlots;
  Slot& s = slab.slots[i];
  const std::uint32_t generation = generation_of(s.control.load(std::memory_order_relaxed)) + 1;
  std::uint64_t* word = slab.word(i);
  std::atomic_ref<std::uint64_t>(*word).store(0, std::memory_order_relaxed);
  s.last_seen.store(0, std::memory_order_relaxed);
  s.callback = std::move(callback);
  s.control.store(control(generation, SlotState::active), std::memory_order_release);
  slab.in_use.fetch_or(std::uint64_t{1} << i, std::memory_order_release);
  return Watcher(shared_from_this(), index, generation, word, slab.device_word(i));
}

bool WatcherPool::active(std::uint32_t index, std::uint32_t generation) const noexcept {
  const std::uint64_t c = slot(index).control.load(std::memory_order_acquire);
  return generation_of(c) == generation && state_of(c) != SlotState::free &&
         !release_requested(c);
}

void WatcherPool::release(std::uint32_t index, std::uint32_t generation) noexcept {
  Slot& s = slot(index);
  std::uint64_t c = s.control.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(c) != generation || state_of(c) == SlotState::free) return;
    if (release_requested(c)) break;  // someone released it already; maybe still running
    const std::uint64_t wanted = c | watcher::kReleaseBit;
    if (!s.control.compare_exchange_weak(c, wanted, std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
      continue;
    }
    // active: no delivery owns the slot, so we free it. queued: the delivery
    // will see the bit and free it without starting the callback.
    if (state_of(c) == SlotState::active) {
      reclaim(index, generation);
      return;
    }
    c = wanted;
    break;
  }
  if (state_of(c) != SlotState::running || tls_running_slot == &s) return;
  const bool finished = wait_until(options_.release_timeout, [&] {
    const std::uint64_t now = s.control.load(std::memory_order_acquire);
    return generation_of(now) != generation || state_of(now) == SlotState::free;
  });
  if (!finished) {
    log::error("Watcher::release gave up after {} ms waiting for a running callback",
               options_.release_timeout.count());
  }
}

WatcherPool::PassResult WatcherPool::poll_once() {
  PassResult result;
  const std::size_t n = slab_count_.load(std::memory_order_acquire);
  for (std::size_t si = 0; si < n; ++si) {
    Slab& slab = *slabs_[si].load(std::memory_order_acquire);
    std::uint64_t mask = slab.in_use.load(std::memory_order_acquire);
    result.watching += static_cast<std::size_t>(std::popcount(mask));
    while (mask != 0) {
      const auto i = static_cast<std::size_t>(std::countr_zero(mask));
      mask &= mask - 1;
      Slot& s = slab.slots[i];
      std::uint64_t c = s.control.load(std::memory_order_acquire);
      if ((c & 0xff) != static_cast<std::uint64_t>(SlotState::active)) continue;
      const std::uint64_t value =
          std::atomic_ref<std::uint64_t>(*slab.word(i)).load(std::memory_order_acquire);
      const std::uint64_t last = s.last_seen.load(std::memory_order_relaxed);
      if (value == last) continue;
      const std::uint32_t generation = generation_of(c);
      if (!s.control.compare_exchange_strong(c, control(generation, SlotState::queued),
                                             std::memory_order_acq_rel,
                                             std::memory_order_relaxed)) {
        continue;  // released meanwhile
      }
      s.last_seen.store(value, std::memory_order_relaxed);
      ++result.changes;
      dispatch(static_cast<std::uint32_t>(si * Slab::kSlots + i), generation, last, value);
    }
  }
  return result;
}

void WatcherPool::dispatch(std::uint32_t index, std::uint32_t generation, std::uint64_t old_value,
                           std::uint64_t new_value) {
  if (!options_.executor) {
    deliver(index, generation, old_value, new_value);
    return;
  }
  options_.executor([self = shared_from_this(), index, generation, old_value, new_value] {
    self->deliver(index, generation, old_value, new_value);
  });
}

void WatcherPool::deliver(std::uint32_t index, std::uint32_t generation, std::uint64_t old_value,
                          std::uint64_t new_value) noexcept {
  Slot& s = slot(index);
  std::uint64_t c = control(generation, SlotState::queued);
  if (stopped_.load(std::memory_order_acquire)) {
    // Stay active but silent; a release already requested still frees it.
    if (!s.control.compare_exchange_strong(c, control(generation, SlotState::active),
                                           std::memory_order_acq_rel)) {
      reclaim(index, generation);
    }
    return;
  }
  if (!s.control.compare_exchange_strong(c, control(generation, SlotState::running),
                                         std::memory_order_acq_rel)) {
    reclaim(index, generation);  // released while queued: never starts
    return;
  }
  bool keep = true;
  tls_running_slot = &s;
  try {
    keep = s.callback(old_value, new_value);
  } catch (const std::exception& e) {
    log::error("a watcher callback threw (watcher kept): {}", e.what());
  } catch (...) {
    log::error("a watcher callback threw a non-standard exception (watcher kept)");
  }
  tls_running_slot = nullptr;
  c = control(generation, SlotState::running);
  if (!keep || !s.control.compare_exchange_strong(c, control(generation, SlotState::active),
                                                  std::memory_order_acq_rel)) {
    reclaim(index, generation);
  }
}

void WatcherPool::reclaim(std::uint32_t index, std::uint32_t generation) noexcept {
  Slab& slab = slab_of(index);
  const std::size_t i = index % Slab::kSlots;
  Slot& s = slab.slots[i];
  WatchCallback dead;
  {
    std::lock_guard lock(mutex_);
    dead = std::move(s.callback);
    s.callback = nullptr;
    slab.in_use.fetch_and(~(std::uint64_t{1} << i), std::memory_order_release);
    s.control.store(control(generation, SlotState::free), std::memory_order_release);
    free_[kind_index(slab.kind)].push_back(index);
  }
  // Destroyed outside the lock: its captures may own other Watchers, whose
  // release would take the lock again.
}

void WatcherPool::stop_deliveries() noexcept {
  std::lock_guard lock(mutex_);
  stopped_.store(true, std::memory_order_release);
}

}  // namespace fabric::detail
