#include "engine/op_pool.hpp"

namespace fabric::engine {

namespace {

// Empties v; keeps its storage only while that stays within `bound` elements.
template <typename T>
void recycle(std::vector<T>& v, std::size_t bound) {
  if (v.capacity() > bound) {
    std::vector<T>().swap(v);
  } else {
    v.clear();
  }
}

// Back to a fresh Op's state, minus the plan storage.
void reset(Op& op) {
  recycle(op.single.pieces, kRetainedPieces);
  recycle(op.paged.src.indices, kRetainedPages);
  recycle(op.paged.dst.indices, kRetainedPages);
  recycle(op.scatter.dsts, kRetainedPeers);  // drops the MrDescs' references now
  recycle(op.scatter.pieces, kRetainedPieces);
  recycle(op.barrier.dsts, kRetainedPeers);
  recycle(op.send.message, kRetainedMessageBytes);
  // Not emptied: resolve_peers overwrites every entry it uses, and resizing to the same size
  // costs nothing.
  if (op.own_peers.capacity() > kRetainedPeers * NetAddr::kMaxDomains) {
    std::vector<domain::PeerHandle>().swap(op.own_peers);
  }
  op.send.slot = -1;
  op.on_done = OnDone{};
  op.imm.reset();
  op.src.reset();
  op.dst = MrDesc{};
  op.group.reset();
  op.peers = nullptr;
  op.total = op.posted = op.done = 0;
  op.live_index = 0;
  op.in_pending = false;
  op.delivered = false;
  op.left_queue = false;
  op.peer_slot = PeerIndex::kNoSlot;
  op.timing = PostTiming{};
  op.error = Status::success();
}

// A new Op with room for a typical plan of every kind.
Op* new_op(OpPool* pool) {
  auto* op = new Op;
  op->pool = pool;
  op->single.pieces.reserve(kTypicalPieces);
  op->paged.src.indices.reserve(kTypicalPages);
  op->paged.dst.indices.reserve(kTypicalPages);
  op->scatter.dsts.reserve(kTypicalPeers);
  op->scatter.pieces.reserve(kTypicalPeers);
  op->barrier.dsts.reserve(kTypicalPeers);
  op->own_peers.reserve(kTypicalPeers * NetAddr::kMaxDomains);
  return op;
}

}  // namespace

OpPool::OpPool() {
  free_.reserve(kMaxFreeOps);
  for (std::size_t i = 0; i < kPrefilledOps; ++i) free_.push_back(new_op(this));
}

void OpRecycler::operator()(Op* op) const noexcept { op->pool->release(op); }

OpPool::~OpPool() {
  for (Op* op : free_) delete op;
}

OpPtr OpPool::acquire() {
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      Op* op = free_.back();
      free_.pop_back();
      return OpPtr(op);
    }
  }
  return OpPtr(new_op(this));
}

void OpPool::release(Op* op) noexcept {
  reset(*op);
  {
    std::lock_guard lock(mutex_);
    if (free_.size() < kMaxFreeOps) {
      free_.push_back(op);
      return;
    }
  }
  delete op;
}

}  // namespace fabric::engine
