#pragma once
// The registration figure of fabric-kv-bench: 1,000 layer tensors (vLLM allocates one per layer)
// registered through the engine, one reg_mr per tensor and in one reg_mrs batch, against raw
// fi_mr_reg of the same tensors on an endpoint opened straight on libfabric (the counterpart).

#include <cstdint>
#include <string>

#include "fabric/engine.hpp"

struct RegistrationFigures {
  std::uint32_t tensors = 0;
  std::uint64_t tensor_bytes = 0;
  double reg_mr_ms = 0;   // one engine reg_mr per tensor
  double reg_mrs_ms = 0;  // one engine reg_mrs for all of them
  double raw_ms = 0;      // fi_mr_reg per tensor, no engine (0 when the provider is not libfabric)
};

// Registers and deregisters `tensors` separate allocations of `tensor_bytes` three ways.
RegistrationFigures measure_registration(fabric::TransferEngine& engine, const std::string& provider,
                                         std::uint32_t tensors, std::uint64_t tensor_bytes);
