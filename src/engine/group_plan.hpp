#pragma once
// Which DomainGroups an engine runs: EngineConfig::groups, or one per group of the topology plan
// (docs/api.md#groups), each with the config its Domains open under and where its worker runs.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "fabric/engine.hpp"

namespace fabric::engine {

struct PlannedGroup {
  int gpu = -1;
  CpuSet cpus;              // where pinning puts the worker; empty: anywhere
  EngineConfig open;        // the engine's config with `nics` set to this group's entries
  std::size_t plan_index = 0;  // its entry in Topology::groups (NIC choice from the plan)
};

// invalid_argument for too many groups, or nics given both engine-wide and per group.
Result<std::vector<PlannedGroup>> plan_groups(const EngineConfig& config);

// Where a group's worker runs: the plan's CPUs (EngineConfig::pinning) within the engine's
// thread CPUs, or all of those where the plan names none of them or none at all.
CpuSet worker_thread_cpus(const CpuSet& planned, const CpuSet& engine_threads);

// reg_mr's group (docs/api.md, "Which group owns memory"): `named` when given (invalid_argument
// past the last group), else the first group whose GPU is `device`, else `host_group`.
Result<std::uint32_t> owning_group(std::span<const GroupInfo> groups, std::uint32_t host_group,
                                   Device device, std::optional<std::uint32_t> named);

}  // namespace fabric::engine
