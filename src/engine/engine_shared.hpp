#pragma once
// What every group's worker of one engine shares: the callback thread, the bound on accepted
// requests and the immediate table. Held by shared_ptr so that workers left behind by stop()
// (stuck inside a provider, engine/abandoned.hpp) keep it alive after the engine is gone.

#include <cstdint>
#include <utility>

#include "engine/admission.hpp"
#include "engine/callback_thread.hpp"
#include "engine/imm_table.hpp"

namespace fabric::engine {

struct EngineShared {
  EngineShared(std::uint32_t max_outstanding_requests, CpuSet thread_cpus)
      : callbacks(std::move(thread_cpus)),
        admission(max_outstanding_requests),
        imms([this](ImmCallback cb, std::uint32_t imm, std::uint64_t count) {
          callbacks.post([cb = std::move(cb), imm, count] {
            if (cb) cb(imm, count);
          });
        }) {}
  EngineShared(const EngineShared&) = delete;
  EngineShared& operator=(const EngineShared&) = delete;

  CallbackThread callbacks;
  Admission admission;
  // One table for every group: a counter sees arrivals from every group's NICs.
  ImmTable imms;
};

}  // namespace fabric::engine
