#pragma once
// One accepted submission while the worker carries it out. Ops are pooled (engine/op_pool.hpp):
// each plan's vectors keep their capacity from one request to the next, so a request of a size
// seen before allocates nothing (bounds in op_pool.hpp).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/peer_index.hpp"
#include "engine/registration.hpp"
#include "domain/domain.hpp"
#include "engine/steady_ns.hpp"
#include "engine/write_plan.hpp"
#include "fabric/completion.hpp"
#include "fabric/net_addr.hpp"
#include "fabric/post_timing.hpp"
#include "fabric/requests.hpp"

namespace fabric::engine {

class OpPool;

// single_read and paged_read use the single and paged plans: their `src_*` side is the remote
// one (Op::dst's memory), their `dst_*` side the local registration (Op::src).
enum class OpKind : std::uint8_t { single, paged, imm, send, scatter, barrier, single_read, paged_read };

struct SinglePlan {
  std::uint64_t src_offset = 0;
  std::uint64_t dst_offset = 0;
  std::vector<WritePiece> pieces;
};

struct PagedPlan {
  std::uint64_t page_length = 0;
  Pages src;
  Pages dst;
};

struct ScatterPlan {
  std::vector<MrDesc> dsts;  // per peer
  std::vector<ScatterPiece> pieces;
};

struct BarrierPlan {
  std::vector<MrDesc> dsts;  // per peer; WRITE i goes to peer i on Domain i mod K
};

struct SendPlan {
  NetAddr to;
  std::vector<std::byte> message;
  int slot = -1;  // staging slot when the provider needs registered buffers
};

struct Op {
  // Only the plan of `kind` is meaningful; the others keep their storage for later requests.
  OpKind kind = OpKind::imm;
  SinglePlan single;
  PagedPlan paged;
  ScatterPlan scatter;
  BarrierPlan barrier;
  SendPlan send;
  OnDone on_done;
  std::optional<std::uint32_t> imm;
  // The local registration: a write's source, a read's destination.
  std::shared_ptr<detail::Registration> src;
  // The remote memory: single, paged and imm writes' destination, reads' source.
  MrDesc dst;
  std::optional<std::uint64_t> group;         // scatter/barrier to a peer group

  // Worker state.
  // Resolved peers, indexed peer * num_domains + domain: the op's own table,
  // or its peer group's, which the worker keeps for the engine's lifetime.
  std::vector<domain::PeerHandle> own_peers;
  const domain::PeerHandle* peers = nullptr;
  std::uint32_t total = 0;
  std::uint32_t posted = 0;
  std::uint32_t done = 0;
  std::uint32_t live_index = 0;  // position in the worker's list of live ops
  bool in_pending = false;
  bool delivered = false;  // on_done already ran (timed out); waiting for the provider
  bool left_queue = false;  // its last operation was posted and counted (EngineConfig::metrics)
  // Its peer's per-peer counters (PeerIndex::known), set when the peer is resolved; kNoSlot for
  // none (a scatter, a barrier, metrics_peer_labels 0).
  std::uint32_t peer_slot = PeerIndex::kNoSlot;
  PostTiming timing;       // stamped only when record_post_timings is on
  std::uint64_t submitted_ns = 0;  // when submit_* accepted it (EngineConfig::metrics), else 0
  std::chrono::steady_clock::time_point last_progress;
  // Where its latest operation was posted, and how many the Domain's provider had taken before
  // it: the provider holds the request only once as many have completed as were ahead of it
  // (a deep window drains in order of posting, not within request_timeout). ahead_drained is
  // when they were first seen completed: kNotDrained until then, min() if none were ahead.
  static constexpr auto kNotDrained = std::chrono::steady_clock::time_point::max();
  std::uint32_t queue_domain = 0;
  std::uint64_t posted_ahead = 0;
  std::chrono::steady_clock::time_point ahead_drained = kNotDrained;
  Status error;
  OpPool* pool = nullptr;  // where the op goes back when it is done
  Op* next_submitted = nullptr;  // link in the worker's SubmissionQueue until started

  [[nodiscard]] bool failed() const noexcept { return !error.ok(); }
  [[nodiscard]] bool fully_posted() const noexcept { return posted == total; }
  // A scatter or barrier posts its other peers' WRITEs past a refused one (Worker::post_some).
  [[nodiscard]] bool posts_past_failure() const noexcept {
    return kind == OpKind::scatter || kind == OpKind::barrier;
  }
  // A request already reported (timed out) posts nothing more: its unposted WRITEs would go to
  // a peer that stopped answering, and, retried on EAGAIN at the head of the pending queue, they
  // would hold up every later request of the engine behind it.
  [[nodiscard]] bool posting_over() const noexcept {
    return fully_posted() || delivered || (failed() && !posts_past_failure());
  }
  [[nodiscard]] bool finished() const noexcept { return done == posted && posting_over(); }
};

}  // namespace fabric::engine
