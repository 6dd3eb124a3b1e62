#pragma once
// Recycled Ops: a submitter takes one, the worker gives it back when the request is done. Last
// in, first out, so the next request gets the Op whose memory is still in cache (a FIFO cycles
// through every pooled Op and measured slower than malloc's own recycling). A
// recycled Op keeps the capacity of its plan vectors, so after a warm-up a request allocates
// nothing, as long as its plan fits the bounds below (larger plans are freed on return, so one
// huge request does not pin memory in every pooled Op).

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/op.hpp"

namespace fabric::engine {

// Plan sizes whose storage a recycled Op keeps (docs/benchmarks.md, "Heap allocations").
inline constexpr std::size_t kRetainedPieces = 256;         // WRITEs of a single write or scatter
inline constexpr std::size_t kRetainedPages = 256;          // pages per side of a paged write
inline constexpr std::size_t kRetainedPeers = 64;           // peers of a scatter or barrier
inline constexpr std::size_t kRetainedMessageBytes = 4096;  // a SEND's copy
// Free Ops kept; beyond it returned Ops are deleted (a burst does not pin memory for good).
inline constexpr std::size_t kMaxFreeOps = 4096;
// Made up front, each with room for a typical plan (below), so that even the first requests,
// and a window that grows a little past what the warm-up reached, find an Op ready: about
// 2 KiB each. Deeper windows grow the pool once, then stay allocation-free.
inline constexpr std::size_t kPrefilledOps = 256;
inline constexpr std::size_t kTypicalPieces = 8;  // a single write over 4 Domains, twice
inline constexpr std::size_t kTypicalPages = 64;
inline constexpr std::size_t kTypicalPeers = 8;

struct OpRecycler {
  void operator()(Op* op) const noexcept;
};
using OpPtr = std::unique_ptr<Op, OpRecycler>;

class OpPool {
 public:
  OpPool();
  ~OpPool();
  OpPool(const OpPool&) = delete;
  OpPool& operator=(const OpPool&) = delete;

  // Any thread.
  [[nodiscard]] OpPtr acquire();
  // Any thread; the op must come from this pool and be out of every worker structure.
  void release(Op* op) noexcept;

 private:
  // A short critical section on both sides; reserved for kMaxFreeOps, so never reallocated.
  std::mutex mutex_;
  std::vector<Op*> free_;
};

}  // namespace fabric::engine
