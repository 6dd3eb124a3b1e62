#pragma once
// MoeGroup::Impl: the state its files share (arena, descriptors, counters, the phase, the
// first error) and the small helpers every step uses; the waits are in group_waits.hpp.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "arena.hpp"
#include "fabric/moe/group.hpp"

namespace fabric::moe {

using Clock = std::chrono::steady_clock;

// Where an iteration stands: each step checks it, so a call out of order is refused.
enum class Phase {
  idle,
  planned,
  private_posted,
  staged,
  dispatched,
  combine_posted,
  pushed,
  combined
};

// A node peer's flag word in its shared arena: raised with release, read with acquire, so the
// rows written before it are visible to whoever sees the new value.
inline std::uint64_t load_flag(const std::byte* word) {
  return std::atomic_ref<const std::uint64_t>(*reinterpret_cast<const std::uint64_t*>(word))
      .load(std::memory_order_acquire);
}
inline void store_flag(std::byte* word, std::uint64_t value) {
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(word))
      .store(value, std::memory_order_release);
}

struct MoeGroup::Impl {
  TransferEngine* engine = nullptr;
  MoeConfig config;
  Placement placement{MoeConfig{}};
  std::vector<ArenaLayout> layouts;
  Arena own;
  std::vector<Arena> mapped;           // node peers' arenas, by rank (empty elsewhere)
  std::vector<std::byte*> base;        // arena pointer per rank (self and node peers)
  Registered reg;
  std::vector<MrDesc> descs;           // per rank
  std::vector<NetAddr> addrs;          // per rank
  std::vector<std::uint32_t> peers;    // every rank but self, in rank order
  std::vector<std::uint32_t> node_peers;
  std::optional<PeerGroupHandle> group;
  // kImmKinds * N values, the same block on every rank's engine (group_imms.cpp).
  ImmReservation imms;
  std::vector<std::shared_ptr<ImmCounter>> counters;  // [kind * N + source]
  std::shared_ptr<CompletionCounter> done = std::make_shared<CompletionCounter>();
  std::shared_ptr<CompletionCounter> notices = std::make_shared<CompletionCounter>();
  // Abort notices submitted, awaited on leaving; leave words are not (they read no memory here).
  std::uint64_t notices_submitted = 0;
  bool barrier_pending = false;  // the last iteration's barrier is not consumed yet
  std::uint64_t submitted = 0;

  std::uint32_t epoch = 0;
  Phase phase = Phase::idle;
  SendPlan send;
  ReceivePlan recv;
  std::vector<std::uint32_t> dispatch_writes;  // per peer, this iteration
  std::vector<std::uint32_t> combine_writes;

  mutable std::mutex error_mutex;
  Status error;
  std::vector<std::uint32_t> broken;
  GroupStats stats;
  Timeline timeline;
  static std::uint64_t now_ns() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          Clock::now().time_since_epoch())
                                          .count());
  }

  [[nodiscard]] std::uint32_t n() const { return config.world_size; }
  [[nodiscard]] std::uint32_t self() const { return config.rank; }
  [[nodiscard]] std::uint32_t imm(ImmKind kind, std::uint32_t source) const {
    return imms.first() + static_cast<std::uint32_t>(kind) * n() + source;
  }
  ImmCounter& counter(ImmKind kind, std::uint32_t source) {
    return *counters[static_cast<std::size_t>(kind) * n() + source];
  }

  Status fail(Status status, std::vector<std::uint32_t> ranks = {}) {
    std::lock_guard lock(error_mutex);
    if (error.ok()) {
      error = std::move(status);
      broken = std::move(ranks);
    }
    return error;
  }
  Status check(Phase expected, const char* step) {
    {
      std::lock_guard lock(error_mutex);
      if (!error.ok()) return error;
    }
    if (phase != expected)
      return {Errc::invalid_argument, std::string("moe: ") + step + " called out of order"};
    return Status::success();
  }

  // The abort protocol (group_failure.cpp).
  std::vector<std::uint32_t> reported_dead();
  Status fail_naming(const std::string& what, std::vector<std::uint32_t> ranks);
  // The leave handshake before the arena is deregistered (group_leave.cpp).
  void leave();

  // Bounded waits (group_waits.hpp, group_waits.cpp).
  template <typename Ready>
  std::vector<std::uint32_t> poll_until(std::vector<std::uint32_t> pending, Ready ready,
                                        bool& aborted);
  Status await_imms(ImmKind kind, const std::vector<std::uint32_t>& expected);
  template <typename Where>
  Status await_flags(const std::vector<std::uint32_t>& ranks, Where where, const char* what);
  Status submit(Scatter scatter);
};

// Reserves kImmKinds * world_size immediates at the same values on every rank's engine: a
// scatter or barrier carries one value to all its peers, so the block must be free on all of
// them. Rounds of all_gather: each rank offers the lowest free block at or above the highest
// offer of the last round, until all offers agree (group_imms.cpp).
Result<ImmReservation> agree_imm_block(TransferEngine& engine, const MoeConfig& config,
                                       const AllGather& all_gather);

}  // namespace fabric::moe
