#pragma once
// A rotating pool of receive buffers: each is handed to the callback without
// a copy and re-posted when the callback returns.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "domain/domain.hpp"
#include "fabric/engine.hpp"

namespace fabric::engine {

struct RecvPool;

struct RecvSlot {
  RecvPool* pool = nullptr;
  std::byte* data = nullptr;
};

struct RecvPool {
  std::size_t buffer_size = 0;
  RecvCallback on_recv;
  std::unique_ptr<std::byte[]> memory;
  std::unique_ptr<domain::MemoryRegion> region;
  std::vector<RecvSlot> slots;
};

// Receive tokens carry a tag bit so they cannot be mistaken for Op pointers.
inline domain::Token recv_token(RecvSlot* slot) {
  return reinterpret_cast<domain::Token>(slot) | 1u;
}
inline bool is_recv_token(domain::Token token) { return (token & 1u) != 0; }
inline RecvSlot* recv_slot(domain::Token token) {
  return reinterpret_cast<RecvSlot*>(token & ~domain::Token{1});
}

}  // namespace fabric::engine
