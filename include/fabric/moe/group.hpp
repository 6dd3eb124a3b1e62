#pragma once
// One rank of an expert-parallel group: its registered arena, the mapped
// arenas of the ranks on its node, and the host proxy that drives the engine
// through the protocol (docs/moe.md). A device (the CPU one in
// host_device.hpp, or the CUDA kernels) does the data work between the
// proxy's steps; the steps of one iteration, in order:
//
//   dispatch send:    begin_dispatch -> [stage private slots] -> post_private
//                     -> [stage the rest] -> mark_staged
//   dispatch receive: complete_dispatch -> [reorder into the grouped output]
//   combine send:     [gather expert rows] -> post_combine -> [copy rows to
//                     node peers] -> mark_combine_pushed
//   combine receive:  await_combine -> [weighted sum] -> finish_combine
//
// Every wait is bounded by MoeConfig::timeout; a rank that did not deliver in
// time is named in the error and listed by broken_ranks(). After an error the
// group is unusable (each step returns that error); build a new one from the
// survivors.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "fabric/engine.hpp"
#include "fabric/moe/config.hpp"
#include "fabric/moe/layout.hpp"
#include "fabric/moe/plan.hpp"

namespace fabric::moe {

// Exchanges one blob per rank; returns every rank's, in rank order. Bounded
// by the implementation (a test harness, torch.distributed's store, ...).
using AllGather =
    std::function<Result<std::vector<std::vector<std::byte>>>(std::span<const std::byte>)>;

// Immediates each phase expects, per source rank (for tests and docs).
// `abort` is sent, with the dead rank as its source, by a rank that found a
// peer dead, so that the others name that peer too.
enum class ImmKind : std::uint32_t {
  routes = 0,
  overflow = 1,
  combine = 2,
  barrier = 3,
  abort = 4,
  leave = 5,  // "nothing more of mine will reach your arena" (~MoeGroup)
};
inline constexpr std::uint32_t kImmKinds = 6;

struct GroupStats {
  std::uint64_t iterations = 0;
  std::uint64_t writes_posted = 0;   // WRITEs carrying data or routes (barriers excluded)
  std::uint64_t bytes_posted = 0;    // their payload bytes
  std::uint64_t direct_bytes = 0;    // bytes copied directly between node peers
  std::uint64_t imms_expected = 0;   // derived from the plans
  std::uint64_t imms_consumed = 0;
  std::uint64_t max_writes_per_peer_dispatch = 0;  // over iterations and inter-node peers
  std::uint64_t max_writes_per_peer_combine = 0;
  std::uint64_t submissions = 0;     // engine requests (scatters and barriers) submitted
  std::uint64_t completions = 0;     // of those, completed (equal after quiesce())
};

// When the proxy passed each step of the last iteration (steady_clock, ns).
struct Timeline {
  std::uint64_t begin_dispatch = 0;   // begin_dispatch entered
  std::uint64_t private_posted = 0;   // routes + private scatter submitted
  std::uint64_t routes_in = 0;        // every source's routes counted
  std::uint64_t overflow_posted = 0;  // overflow scatter submitted
  std::uint64_t tokens_in = 0;        // every token here
  std::uint64_t combine_posted = 0;   // combine scatter submitted
  std::uint64_t combine_in = 0;       // every expert row here
  std::uint32_t peers_posted = 0;     // slices of the routes + private scatter
};

class MoeGroup {
 public:
  // Collective: every rank calls it with the same config (but `rank`).
  static Result<std::unique_ptr<MoeGroup>> create(TransferEngine& engine, const MoeConfig& config,
                                                  const AllGather& all_gather);
  // Leaves the group: waits (each wait bounded by config().timeout) until this rank's WRITEs and
  // abort notices are done, tells every peer not named broken that nothing more of its will
  // arrive, and waits for the same word from each of them before the arena's registration
  // goes. A late WRITE into a deregistered arena is what a connected provider answers by
  // closing the connection (tcp) or a queue pair (verbs), failing the other workloads' traffic
  // to that peer too; docs/moe.md "Leaving a group".
  ~MoeGroup();
  MoeGroup(const MoeGroup&) = delete;
  MoeGroup& operator=(const MoeGroup&) = delete;

  [[nodiscard]] const MoeConfig& config() const noexcept;
  [[nodiscard]] const Placement& placement() const noexcept;
  [[nodiscard]] const ArenaLayout& layout(std::uint32_t rank) const noexcept;
  // This rank's arena, or a node peer's (mapped); nullptr for other ranks.
  [[nodiscard]] std::byte* arena(std::uint32_t rank) const noexcept;
  // The iteration in progress (1 after the first begin_dispatch).
  [[nodiscard]] std::uint32_t epoch() const noexcept;

  // Waits until every peer released the previous iteration's buffers (the
  // barrier), then plans the routes from the dp group's topk_idx
  // ([group_tokens][top_k]) and writes them into the send region.
  Result<const SendPlan*> begin_dispatch(std::span<const std::int32_t> topk_idx,
                                         std::uint32_t group_tokens);
  // The private slots (the first private_tokens of each destination) are
  // staged: one WRITE per inter-node peer carries routes and those slots; node
  // peers get the routes only.
  Status post_private();
  // Every slot is staged; node peers may read them.
  Status mark_staged();
  // Waits for every source's routes, plans the receive side, posts the
  // overflow WRITEs (at most one per inter-node peer), waits for every token.
  Result<const ReceivePlan*> complete_dispatch();
  // The exchange region holds the expert rows in gather order: one WRITE per
  // inter-node member of each dp group that has rows here.
  Status post_combine();
  // Copies rows for this rank and its node peers' dp groups into their
  // combine regions and raises their flags (the device may do the copies
  // itself and call only mark_combine_pushed()).
  Status push_combine_direct();
  Status mark_combine_pushed();
  // Waits for every expert rank's rows.
  Status await_combine();
  // The combine region was read: waits for this rank's WRITEs to complete,
  // then posts the barrier that lets peers reuse their buffers.
  Status finish_combine();
  // Between iterations: waits for the last barrier and every WRITE of this
  // rank, then checks that no immediate arrived beyond the plans (a count that
  // drifted would leave one behind). The group stays usable.
  Status quiesce();

  [[nodiscard]] const SendPlan& send_plan() const noexcept;
  [[nodiscard]] const ReceivePlan& receive_plan() const noexcept;
  [[nodiscard]] std::vector<std::uint32_t> broken_ranks() const;
  [[nodiscard]] Status error() const;
  [[nodiscard]] GroupStats stats() const noexcept;
  [[nodiscard]] const Timeline& timeline() const noexcept;
  // Immediates counted but not consumed by any phase, over all kinds and
  // sources (the "surplus" a wrong count would leave behind).
  [[nodiscard]] std::uint64_t stray_immediates() const;
  [[nodiscard]] std::uint32_t imm(ImmKind kind, std::uint32_t source) const noexcept;

  struct Impl;

 private:
  explicit MoeGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fabric::moe
