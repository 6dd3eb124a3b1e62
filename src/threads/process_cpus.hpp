#pragma once
// How process_cpus() decides, as pure functions over the text of /proc and /sys, so that tests
// can give it any cgroup layout.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/topology.hpp"

namespace fabric::threads {

// The files that may hold this process's effective cpuset, most specific first: for each
// /proc/self/cgroup line of the unified hierarchy (v2, "0::/path") or of the v1 cpuset
// controller ("N:cpuset,...:/path"), that cgroup's file under `root` and then its ancestors'.
// The walk up also finds the file inside a container, whose /sys/fs/cgroup starts at its own
// cgroup while /proc names the host's path.
std::vector<std::string> cpuset_files(std::string_view proc_self_cgroup,
                                      std::string_view root = "/sys/fs/cgroup");

// The cgroup's CPUs within the online ones; the affinity read at load where the cgroup gave
// nothing; never empty while `at_load` is not.
CpuSet choose_process_cpus(const std::optional<CpuSet>& cgroup, const std::optional<CpuSet>& online,
                           const CpuSet& at_load);

// The CPUs in both sets.
CpuSet intersect(const CpuSet& a, const CpuSet& b);

}  // namespace fabric::threads
