#pragma once
// The prefill side: offers each request's pages, and as each layer's compute finishes
// (layer_done, from a host thread or a watcher callback) writes that layer into every decoder
// that asked for it (docs/kv.md).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/engine.hpp"
#include "fabric/kv/layout.hpp"
#include "fabric/kv/plan.hpp"
#include "fabric/kv/state.hpp"

namespace fabric::kv {

struct SenderConfig {
  KvLayout layout;
  std::vector<MrHandle> regions;  // layout.num_regions registrations, indexed by PartBase::region
  Liveness liveness;
  // How long a prepared request waits for its decoders' requests before it fails.
  std::chrono::milliseconds receiver_timeout{30000};
  // How many of the most recently released request ids are remembered: a decoder asking for one of
  // them is rejected at once ("released") rather than after receiver_timeout. 0: none.
  std::size_t released_ids_kept = 16384;
  StateCallback on_state;
};

class Sender {
 public:
  // One Sender or Receiver per engine: it receives on the engine's channel "kv" (a second is
  // refused naming it); other workloads' channels on the same engine never see its messages.
  static Result<std::unique_ptr<Sender>> create(TransferEngine& engine, SenderConfig config);
  ~Sender();  // stops heartbeats; writes in flight complete on the engine
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  // Offers request `id`: token t of this rank's KV is in pages[t / tokens_per_page]; `receivers`
  // decode ranks will ask for it (receivers_per_source); `tail` is written to the one decoder
  // that asks for it after the last layer.
  // `pages` may be fewer than num_tokens needs when the rest are not allocated yet (vLLM
  // allocates a prompt's blocks chunk by chunk): add_pages appends them, before the layer_done
  // whose chunk reaches them.
  Status prepare(std::string id, std::vector<std::uint32_t> pages, std::uint32_t num_tokens,
                 std::uint32_t receivers = 1, std::optional<LocalSlice> tail = std::nullopt);
  // The request's next pages, after those given so far.
  Status add_pages(std::string_view id, std::vector<std::uint32_t> pages);
  // Layer `layer` of tokens [0, num_tokens) (or of `tokens`, for chunked prefill: passes of one
  // layer in order, boundaries on chunk_alignment) is computed: write it.
  Status layer_done(std::string_view id, std::uint32_t layer);
  Status layer_done(std::string_view id, std::uint32_t layer, TokenRange tokens);
  // Stops writing; the request turns cancelled once every posted write has completed.
  Status cancel(std::string_view id);

  [[nodiscard]] Result<RequestStatus> poll(std::string_view id) const;
  // Forgets a terminal request (its pages may be reused before; this only frees the entry).
  Status release(std::string_view id);
  [[nodiscard]] std::size_t active_requests() const;

  struct Impl;

 private:
  explicit Sender(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace fabric::kv
