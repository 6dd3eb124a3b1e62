#pragma once
// Which DomainGroups an engine runs: EngineConfig::groups, or one per group of the topology plan
// (docs/api.md#groups), each with the config its Domains open under and where its worker runs.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
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

// A group of the topology plan that an engine runs, and the CUDA ordinal its GPU has in this
// process (-1: none).
struct VisibleGroup {
  std::size_t plan_index = 0;
  int cuda_ordinal = -1;
  friend bool operator==(const VisibleGroup&, const VisibleGroup&) = default;
};

// Which plan groups an engine runs when EngineConfig::groups is empty, and which CUDA device
// each serves (docs/topology.md, "Which GPU a group serves"). `visible` holds the PCI bus id of
// each CUDA ordinal of this process, ordinal i at [i] (CUDA_VISIBLE_DEVICES applied), or nothing
// where no CUDA driver answered. With bus ids, each plan GPU is matched by its bus id: one group
// per plan GPU this process sees, in plan order, with that GPU's ordinal; the plan's other GPUs
// get no group. Without (or where no plan GPU is seen), every plan group, GPU g at ordinal g: the
// PCI order, which CUDA follows with CUDA_DEVICE_ORDER=PCI_BUS_ID and all devices visible.
std::vector<VisibleGroup> visible_groups(const Topology& topology,
                                         const std::optional<std::vector<std::string>>& visible);

// "dddd:bb:dd.f" in lower case, whatever the domain's width or the case ("00000000:53:00.0",
// "0000:53:00.0" and "53:00.0" are one device); nullopt when `busid` is not a PCI address.
std::optional<std::string> canonical_busid(std::string_view busid);

// Where a group's worker runs: the plan's CPUs (EngineConfig::pinning) within the engine's
// thread CPUs, or all of those where the plan names none of them or none at all.
CpuSet worker_thread_cpus(const CpuSet& planned, const CpuSet& engine_threads);

// reg_mr's group (docs/api.md, "Which group owns memory"): `named` when given (invalid_argument
// past the last group), else the first group whose GPU is `device`, else `host_group`.
Result<std::uint32_t> owning_group(std::span<const GroupInfo> groups, std::uint32_t host_group,
                                   Device device, std::optional<std::uint32_t> named);

}  // namespace fabric::engine
