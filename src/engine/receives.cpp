#include "engine/receives.hpp"

#include "common/log.hpp"

namespace fabric::engine {

Status Receives::add_pool(std::size_t buffer_size, std::uint32_t count, RecvCallback on_recv) {
  auto pool = std::make_unique<RecvPool>();
  pool->buffer_size = buffer_size;
  pool->on_recv = std::move(on_recv);
  pool->memory = std::make_unique<std::byte[]>(buffer_size * count);
  auto region = domains_.domain(0).register_memory(
      domain::MemorySpan::host(pool->memory.get(), buffer_size * count), static_cast<Access>(0));
  if (!region) return region.status();
  pool->region = std::move(region).value();
  pool->slots.resize(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    pool->slots[i] = RecvSlot{pool.get(), pool->memory.get() + std::size_t{i} * buffer_size};
  }
  RecvPool* raw = pool.get();
  pools_.push_back(std::move(pool));
  for (auto& slot : raw->slots) post(&slot);
  return Status::success();
}

void Receives::post(RecvSlot* slot) {
  if (stopped_) return;
  Status st = domains_.domain(0).post_recv(slot->data, slot->pool->buffer_size,
                                           slot->pool->region->local_desc(), recv_token(slot));
  if (st.code() == Errc::again) {
    unposted_.push_back(slot);
  } else if (!st.ok()) {
    log::error("posting a receive buffer failed: {}", st.to_string());
    unposted_.push_back(slot);
  }
}

void Receives::retry_unposted() {
  std::size_t n = unposted_.size();
  while (n-- > 0 && !unposted_.empty()) {
    RecvSlot* slot = unposted_.front();
    unposted_.pop_front();
    Status st = domains_.domain(0).post_recv(slot->data, slot->pool->buffer_size,
                                             slot->pool->region->local_desc(), recv_token(slot));
    if (!st.ok()) {
      unposted_.push_front(slot);
      return;
    }
  }
}

void Receives::arrived(RecvSlot* slot, std::size_t length, const Status& status) {
  if (!status.ok()) {
    if (!stopped_) log::warn("receive failed: {}", status.to_string());
    post(slot);
    return;
  }
  delivered_.fetch_add(1, std::memory_order_relaxed);
  callbacks_.post([this, slot, length] {
    slot->pool->on_recv(std::span<const std::byte>(slot->data, length));
    repost_(slot);
  });
}

}  // namespace fabric::engine
