#pragma once
// A watched 64-bit word: a GPU kernel (also inside a CUDA graph) or a host
// thread writes it, one polling thread calls back with (old, new) on each
// observed change. Contract in docs/watcher.md.

#include <cstdint>
#include <functional>
#include <memory>

namespace fabric {

// Runs on the watcher thread (or the executor the owner chose), one call at a
// time per watcher. `old_value` is always the `new_value` of the previous call
// for this watcher (0 before the first). Values written in between may be
// skipped, so reason about ranges, not single steps. Return false to stop
// watching and free the slot; the Watcher handle then reports !active().
using WatchCallback = std::function<bool(std::uint64_t old_value, std::uint64_t new_value)>;

enum class WatcherMemory : std::uint8_t {
  // Ordinary host memory; needs no GPU.
  host,
  // Pinned host memory mapped into every CUDA context (cuMemHostAlloc with
  // DEVICEMAP | PORTABLE); Errc::unsupported without a CUDA driver or device.
  cuda_mapped,
};

namespace detail {
class WatcherPool;
}

// Move-only owner of one watched word. The destructor releases it.
//
// Writers must write the word with one aligned 64-bit store, never byte-wise
// or with memcpy of a larger range, so the poller never sees a torn value:
//   host:   __atomic_store_n(w.word(), v, __ATOMIC_RELEASE)
//           or std::atomic_ref<std::uint64_t>(*w.word()).store(v, std::memory_order_release)
//   kernel: *(volatile unsigned long long*)device_word = v; then __threadfence_system()
//           (or cuda::atomic_ref<..., thread_scope_system>::store) on the pointer
//           device_word() returns.
// The word starts at 0. Do not write it after release(): the slot may already
// belong to another watcher.
class Watcher {
 public:
  Watcher() = default;
  Watcher(std::shared_ptr<detail::WatcherPool> pool, std::uint32_t slot, std::uint32_t generation,
          std::uint64_t* word, std::uint64_t* device_word) noexcept;
  ~Watcher();
  Watcher(Watcher&& other) noexcept;
  Watcher& operator=(Watcher&& other) noexcept;
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // The host address of the word; nullptr for an empty handle.
  [[nodiscard]] std::uint64_t* word() const noexcept { return word_; }
  // The address a kernel writes (from cuMemHostGetDevicePointer); nullptr for
  // WatcherMemory::host. Stable for the watcher's life, so it may be baked
  // into a CUDA graph.
  [[nodiscard]] std::uint64_t* device_word() const noexcept { return device_word_; }
  // False once released, once its callback returned false, or for an empty handle.
  [[nodiscard]] bool active() const noexcept;
  // Stops watching. Idempotent, and safe while a change is pending or a
  // callback runs. After it returns no callback of this watcher starts, and
  // none is still running, except when it is called from inside this
  // watcher's own callback (that call then finishes normally, its return
  // value ignored). The wait for a callback running on another thread is
  // bounded (WatcherOptions::release_timeout); on expiry it logs an error and
  // returns with the callback still running. May race with active() on the
  // same handle, not with moving it.
  void release() noexcept;

 private:
  std::shared_ptr<detail::WatcherPool> pool_;
  std::uint32_t slot_ = 0;
  std::uint32_t generation_ = 0;
  std::uint64_t* word_ = nullptr;
  std::uint64_t* device_word_ = nullptr;
};

}  // namespace fabric
