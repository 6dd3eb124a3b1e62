#pragma once
// The decode side: allocates pages, asks the prefill ranks for a request's KV, and reports the
// request done once the exact number of immediates the plan predicts has landed. Cancel and
// peer death end a request only once no write of it can still land (docs/kv.md#fence).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/engine.hpp"
#include "fabric/kv/layout.hpp"
#include "fabric/kv/plan.hpp"
#include "fabric/kv/state.hpp"

namespace fabric::kv {

// Memory the receiver registers itself, once per connected sender, so that fencing one sender
// revokes only that sender's keys.
struct RegionMemory {
  void* ptr = nullptr;
  std::size_t length = 0;
  Device device = Device::host();
};

struct ReceiverConfig {
  KvLayout layout;
  // At least layout.num_regions, indexed by PartBase::region; more may follow for tails.
  std::vector<RegionMemory> regions;
  // Where several prefill ranks hold a head (GQA replication, MLA), decode ranks with different
  // spread values (their rank) pick different ones.
  std::uint64_t spread = 0;
  Liveness liveness;
  // A sender that cannot be fenced (shm) and went silent: its requests' pages stay held this
  // long after it was declared dead before the request fails (docs/kv.md#fence).
  std::chrono::milliseconds quarantine{30000};
  StateCallback on_state;
};

// Where the tail (last hidden state, first token) goes: bytes at offset of region `region`, one
// of ReceiverConfig::regions (those past layout.num_regions are free for this).
struct Tail {
  std::uint32_t region = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

// Immediates a Receiver reserves on its engine (TransferEngine::reserve_imms, owner
// "kv.receiver#<n>"), one per request whose expectation is pending; released with the Receiver.
inline constexpr std::uint32_t kReceiverImms = 1u << 16;

class Receiver {
 public:
  static Result<std::unique_ptr<Receiver>> create(TransferEngine& engine, ReceiverConfig config);
  ~Receiver();
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  // Introduces this receiver to a prefill rank and learns its layout; returns its source index.
  // Calls for a rank already connected return its index; concurrent calls for the same rank
  // wait for the one handshake in flight. A rank declared dead and fenced (silent past the
  // bound: killed, or stopped and resumed) is re-admitted by a new call: a new handshake under
  // the same index, with freshly registered regions, so nothing of the old epoch can land. A
  // verbs peer refuses that handshake (its fenced instance stays shut out; docs/kv.md).
  Result<std::uint32_t> connect(const NetAddr& sender, std::chrono::milliseconds timeout);
  // The layout a connected source reported.
  [[nodiscard]] Result<KvLayout> source_layout(std::uint32_t source) const;

  // Asks `sources` (indices from connect; the prefill ranks of the request's instance) for
  // request `id`: num_tokens tokens into pages (token t in pages[t / tokens_per_page]).
  // Returns the number of immediates expected. src_first: the prefill's tokens before it are
  // held here already (a local prefix-cache hit), so page t holds the prefill's token
  // src_first + t; a multiple of both sides' page sizes (chunk_alignment).
  Result<std::uint64_t> request(std::string id, std::vector<std::uint32_t> pages,
                                std::uint32_t num_tokens, std::span<const std::uint32_t> sources,
                                std::optional<Tail> tail = std::nullopt,
                                std::uint32_t src_first = 0);
  // Tells `sources` this receiver will not ask for request `id` (it holds that KV already, e.g.
  // in its prefix cache), so they stop holding it for this receiver: a prepared request no
  // receiver wants ends done at once instead of failing after receiver_timeout. No local state.
  Status decline(std::string_view id, std::span<const std::uint32_t> sources);
  // Ends the request; it turns cancelled once no write of it can land (the senders
  // acknowledged, or were fenced, or, where fencing is impossible, after the quarantine).
  Status cancel(std::string_view id);

  [[nodiscard]] Result<RequestStatus> poll(std::string_view id) const;
  // Bounded wait for a terminal state.
  [[nodiscard]] Result<RequestStatus> wait(std::string_view id,
                                           std::chrono::milliseconds timeout) const;
  Status release(std::string_view id);
  [[nodiscard]] std::size_t active_requests() const;

  struct Impl;

 private:
  explicit Receiver(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace fabric::kv
