#include "engine/group_plan.hpp"

#include <fmt/format.h>

#include "common/log.hpp"
#include "cuda/device_bus_ids.hpp"
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

// Asked only where the plan has GPUs: cuInit costs time, and a host without GPUs has no
// device memory to route.
std::optional<std::vector<std::string>> cuda_bus_ids(const Topology& topology) {
  if (topology.gpus.empty()) return std::nullopt;
  auto ids = cuda::visible_bus_ids();
  if (!ids) {
    log::info("GPU memory routed by CUDA ordinal in PCI order: {}", ids.status().to_string());
    return std::nullopt;
  }
  return std::move(ids).value();
}

unsigned hex_value(std::string_view text, bool& ok) {
  unsigned v = 0;
  if (text.empty() || text.size() > 8) ok = false;
  for (char c : text) {
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) ok = false;
    v = (v << 4) | static_cast<unsigned>(d < 0 ? 0 : d);
  }
  return v;
}

}  // namespace

std::optional<std::string> canonical_busid(std::string_view busid) {
  // [domain:]bus:device.function
  const auto dot = busid.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view function = busid.substr(dot + 1);
  std::string_view rest = busid.substr(0, dot);
  const auto last_colon = rest.rfind(':');
  if (last_colon == std::string_view::npos) return std::nullopt;
  const std::string_view device = rest.substr(last_colon + 1);
  rest = rest.substr(0, last_colon);
  const auto colon = rest.rfind(':');
  const std::string_view bus = colon == std::string_view::npos ? rest : rest.substr(colon + 1);
  const std::string_view domain =
      colon == std::string_view::npos ? std::string_view("0") : rest.substr(0, colon);
  bool ok = true;
  const unsigned d = hex_value(domain, ok), b = hex_value(bus, ok), v = hex_value(device, ok),
                 f = hex_value(function, ok);
  if (!ok || b > 0xff || v > 0x1f || f > 0x7 || d > 0xffff) return std::nullopt;
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", d, b, v, f);
}

std::vector<VisibleGroup> visible_groups(const Topology& topology,
                                         const std::optional<std::vector<std::string>>& visible) {
  std::vector<VisibleGroup> matched;
  if (visible) {
    for (std::size_t g = 0; g < topology.groups.size(); ++g) {
      const int gpu = topology.groups[g].gpu;
      if (gpu < 0 || static_cast<std::size_t>(gpu) >= topology.gpus.size()) continue;
      const auto plan_bus = canonical_busid(topology.gpus[gpu].pci_busid);
      if (!plan_bus) continue;
      for (std::size_t ordinal = 0; ordinal < visible->size(); ++ordinal) {
        if (canonical_busid((*visible)[ordinal]) == plan_bus) {
          matched.push_back({g, static_cast<int>(ordinal)});
          break;
        }
      }
    }
    if (!matched.empty()) return matched;
  }
  for (std::size_t g = 0; g < topology.groups.size(); ++g) {
    matched.push_back({g, topology.groups[g].gpu});
  }
  return matched;
}

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
  std::vector<VisibleGroup> run{VisibleGroup{0, -1}};
  if (topology && !topology->groups.empty()) {
    run = visible_groups(*topology, cuda_bus_ids(*topology));
    if (run.size() > NetAddr::kMaxGroups) {
      log::warn("the topology plans {} groups; the engine runs the first {}", run.size(),
                NetAddr::kMaxGroups);
      run.resize(NetAddr::kMaxGroups);
    }
  } else if (!topology) {
    log::info("one group: topology detection failed ({})", topology.status().to_string());
  }
  for (std::size_t g = 0; g < run.size(); ++g) {
    PlannedGroup p;
    p.gpu = run[g].cuda_ordinal;
    p.cpus = plan_cpus(topology, run[g].plan_index, pinning);
    p.open = config;
    if (g > 0) p.open.nics.clear();  // EngineConfig::nics names group 0's NICs
    p.plan_index = run[g].plan_index;
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
