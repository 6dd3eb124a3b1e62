#include "engine/group_plan.hpp"

#include <fmt/format.h>

#include "common/log.hpp"
#include "fabric/threads.hpp"
#include "threads/process_cpus.hpp"
#include "topology/host_topology.hpp"

namespace fabric::engine {

namespace {

CpuSet plan_cpus(const Result<Topology>& topology, std::size_t index, Pinning pinning) {
  if (pinning == Pinning::off) return {};
  if (!topology || topology->groups.size() <= index) {
    log::warn("pinning {} requested but the topology plan has no group {}: {}", to_string(pinning),
              index, topology ? "fewer groups planned" : topology.status().to_string());
    return {};
  }
  return worker_cpus(topology->groups[index], pinning);
}

}  // namespace

Result<std::vector<PlannedGroup>> plan_groups(const EngineConfig& config) {
  if (config.groups.size() > NetAddr::kMaxGroups) {
    return Status(Errc::invalid_argument,
                  fmt::format("EngineConfig::groups has {} groups; at most {}",
                              config.groups.size(), NetAddr::kMaxGroups));
  }
  if (!config.groups.empty() && !config.nics.empty()) {
    return Status(Errc::invalid_argument,
                  "EngineConfig::nics and EngineConfig::groups are both set: give each group's "
                  "NICs in GroupConfig::nics");
  }
  // Counted over the CPUs the engine's threads may use, not the caller's mask: a host thread
  // pinned to one core must not switch pinning off for an engine that runs on eight.
  const auto thread_cpus = engine_thread_cpus(config.thread_cpus);
  const Pinning pinning =
      config.pinning.value_or(default_pinning(thread_cpus ? thread_cpus->cpus.size() : 1));
  // The plan is read only where something needs it: pinning, the default group list.
  const bool need_plan = pinning != Pinning::off || config.groups.empty();
  static const Result<Topology> kNone = Status(Errc::not_found, "not probed");
  const Result<Topology>& topology = need_plan ? topo::host_topology() : kNone;

  std::vector<PlannedGroup> out;
  if (!config.groups.empty()) {
    for (std::size_t g = 0; g < config.groups.size(); ++g) {
      const GroupConfig& gc = config.groups[g];
      PlannedGroup p;
      p.gpu = gc.gpu;
      p.cpus = gc.cpus.empty() ? plan_cpus(topology, g, pinning) : gc.cpus;
      p.open = config;
      p.open.groups.clear();
      p.open.nics = gc.nics;
      p.plan_index = g;
      out.push_back(std::move(p));
    }
    return out;
  }
  std::size_t n = 1;
  if (topology && !topology->groups.empty()) {
    n = std::min(topology->groups.size(), NetAddr::kMaxGroups);
    if (topology->groups.size() > n) {
      log::warn("the topology plans {} groups; the engine runs the first {}",
                topology->groups.size(), n);
    }
  } else if (!topology) {
    log::info("one group: topology detection failed ({})", topology.status().to_string());
  }
  for (std::size_t g = 0; g < n; ++g) {
    PlannedGroup p;
    p.gpu = topology && g < topology->groups.size() ? topology->groups[g].gpu : -1;
    p.cpus = plan_cpus(topology, g, pinning);
    p.open = config;
    if (g > 0) p.open.nics.clear();  // EngineConfig::nics names group 0's NICs
    p.plan_index = g;
    out.push_back(std::move(p));
  }
  return out;
}

CpuSet worker_thread_cpus(const CpuSet& planned, const CpuSet& engine_threads) {
  CpuSet both = threads::intersect(planned, engine_threads);
  if (both.empty() && !planned.empty()) {
    log::warn("pinning planned CPUs {} outside the engine's thread CPUs {}: the worker uses "
              "the latter",
              planned.to_string(), engine_threads.to_string());
  }
  return both.empty() ? engine_threads : both;
}

Result<std::uint32_t> owning_group(std::span<const GroupInfo> groups, std::uint32_t host_group,
                                   Device device, std::optional<std::uint32_t> named) {
  if (named) {
    if (*named >= groups.size()) {
      return Status(Errc::invalid_argument,
                    fmt::format("group {} does not exist (the engine has {} groups)", *named,
                                groups.size()));
    }
    return *named;
  }
  if (!device.is_host()) {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (groups[g].gpu == device.index) return static_cast<std::uint32_t>(g);
    }
  }
  return host_group;
}

}  // namespace fabric::engine
