// The public Watcher handle; all state lives in the pool.
#include "fabric/watcher.hpp"

#include <utility>

#include "watcher/watcher_pool.hpp"

namespace fabric {

Watcher::Watcher(std::shared_ptr<detail::WatcherPool> pool, std::uint32_t slot,
                 std::uint32_t generation, std::uint64_t* word, std::uint64_t* device_word) noexcept
    : pool_(std::move(pool)),
      slot_(slot),
      generation_(generation),
      word_(word),
      device_word_(device_word) {}

Watcher::~Watcher() { release(); }

Watcher::Watcher(Watcher&& other) noexcept
    : pool_(std::move(other.pool_)),
      slot_(other.slot_),
      generation_(other.generation_),
      word_(std::exchange(other.word_, nullptr)),
      device_word_(std::exchange(other.device_word_, nullptr)) {}

Watcher& Watcher::operator=(Watcher&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::move(other.pool_);
    slot_ = other.slot_;
    generation_ = other.generation_;
    word_ = std::exchange(other.word_, nullptr);
    device_word_ = std::exchange(other.device_word_, nullptr);
  }
  return *this;
}

bool Watcher::active() const noexcept { return pool_ && pool_->active(slot_, generation_); }

void Watcher::release() noexcept {
  if (pool_) pool_->release(slot_, generation_);
}

}  // namespace fabric
