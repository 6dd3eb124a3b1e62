#pragma once
// What every group's worker of one engine shares: the callback thread, the bound on accepted
// requests, the immediate table and the table of peers for metrics(). Held by shared_ptr so that workers left behind by stop()
// (stuck inside a provider, engine/abandoned.hpp) keep it alive after the engine is gone.

#include <cstdint>
#include <utility>

#include "engine/admission.hpp"
#include "engine/callback_thread.hpp"
#include "engine/imm_table.hpp"
#include "engine/peer_index.hpp"

namespace fabric::engine {

struct EngineShared {
  EngineShared(std::uint32_t max_outstanding_requests, CpuSet thread_cpus,
               std::uint32_t metrics_peer_labels)
      : callbacks(std::move(thread_cpus)),
        admission(max_outstanding_requests),
        imms([this](ImmCallback cb, std::uint32_t imm, std::uint64_t count) {
          callbacks.post([cb = std::move(cb), imm, count] {
            if (cb) cb(imm, count);
          });
        }),
        peers(metrics_peer_labels) {}
  EngineShared(const EngineShared&) = delete;
  EngineShared& operator=(const EngineShared&) = delete;

  CallbackThread callbacks;
  Admission admission;
  // One table for every group: a counter sees arrivals from every group's NICs.
  ImmTable imms;
  // Peers known and lost, and the labelled ones, whichever group resolved them.
  PeerIndex peers;
};

}  // namespace fabric::engine
