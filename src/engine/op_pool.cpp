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
  recycle(op.own_peers, kRetainedPeers * NetAddr::kMaxDomains);
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
  for (std::size_t i = 0; i < kPrefilledOps; ++i) free_.enqueue(new_op(this));
}

void OpRecycler::operator()(Op* op) const noexcept { op->pool->release(op); }

OpPool::~OpPool() {
  Op* op = nullptr;
  while (free_.try_dequeue(op)) delete op;
}

OpPtr OpPool::acquire() {
  Op* op = nullptr;
  if (!free_.try_dequeue(op)) op = new_op(this);
  return OpPtr(op);
}

void OpPool::release(Op* op) noexcept {
  reset(*op);
  if (free_.size_approx() >= kMaxFreeOps || !free_.enqueue(op)) delete op;
}

}  // namespace fabric::engine
