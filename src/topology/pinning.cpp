// Thread placement: the policy knob and the one call that applies it.

#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "fabric/topology.hpp"

namespace fabric {

namespace {

struct CpuSetFree {
  void operator()(cpu_set_t* set) const noexcept { CPU_FREE(set); }
};
using DynCpuSet = std::unique_ptr<cpu_set_t, CpuSetFree>;

// Machines with more CPUs than glibc's fixed cpu_set_t (1024) exist; the
// dynamic sets grow until the kernel accepts the size.
constexpr int kMaxCpus = 1 << 16;

Result<CpuSet> affinity_of(bool whole_process) {
  for (int ncpus = CPU_SETSIZE; ncpus <= kMaxCpus; ncpus *= 2) {
    DynCpuSet set(CPU_ALLOC(ncpus));
    if (!set) return Status(Errc::provider, "out of memory for a CPU set");
    const std::size_t bytes = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(bytes, set.get());
    // Pid 0 would be the calling thread; the process's mask is its main thread's.
    const int rc = whole_process
                       ? (sched_getaffinity(::getpid(), bytes, set.get()) == 0 ? 0 : errno)
                       : pthread_getaffinity_np(pthread_self(), bytes, set.get());
    if (rc == EINVAL) continue;  // the kernel's mask is wider than ours
    if (rc != 0) {
      return Status(Errc::provider, fmt::format("reading CPU affinity: {}", std::strerror(rc)));
    }
    std::vector<int> cpus;
    for (int cpu = 0; cpu < ncpus; ++cpu) {
      if (CPU_ISSET_S(cpu, bytes, set.get())) cpus.push_back(cpu);
    }
    return CpuSet{std::move(cpus)};
  }
  return Status(Errc::unsupported, "CPU affinity mask wider than 65536 CPUs");
}

}  // namespace

std::string_view to_string(Pinning pinning) noexcept {
  switch (pinning) {
    case Pinning::off:
      return "off";
    case Pinning::numa:
      return "numa";
    case Pinning::core:
      return "core";
  }
  return "?";
}

Result<Pinning> parse_pinning(std::string_view text) {
  for (Pinning p : {Pinning::off, Pinning::numa, Pinning::core}) {
    if (text == to_string(p)) return p;
  }
  return Status(Errc::invalid_argument,
                fmt::format("pinning \"{}\": expected off, numa or core", text));
}

Pinning default_pinning(std::size_t usable_cpus) noexcept {
  // Each worker polls; pinned next to the application's own threads on a tiny
  // box it only takes their CPU away, so leave placement to the scheduler.
  return usable_cpus < 4 ? Pinning::off : Pinning::numa;
}

Pinning default_pinning() noexcept {
  auto cpus = affinity_of(/*whole_process=*/true);
  return default_pinning(cpus ? cpus->size() : 1);
}

CpuSet worker_cpus(const GroupPlan& group, Pinning pinning) {
  switch (pinning) {
    case Pinning::off:
      return {};
    case Pinning::numa:
      return group.cpus;
    case Pinning::core:
      return group.core.empty() ? group.cpus : group.core;
  }
  return {};
}

Status pin_current_thread(const CpuSet& cpus) {
  if (cpus.empty()) return Status(Errc::invalid_argument, "cannot pin a thread to no CPU");
  const int highest = cpus.cpus.back();
  if (cpus.cpus.front() < 0 || highest >= kMaxCpus) {
    return Status(Errc::invalid_argument, fmt::format("CPU set {} names a CPU outside 0-{}",
                                                      cpus.to_string(), kMaxCpus - 1));
  }
  const int ncpus = std::max(highest + 1, static_cast<int>(CPU_SETSIZE));
  DynCpuSet set(CPU_ALLOC(ncpus));
  if (!set) return Status(Errc::provider, "out of memory for a CPU set");
  const std::size_t bytes = CPU_ALLOC_SIZE(ncpus);
  CPU_ZERO_S(bytes, set.get());
  for (int cpu : cpus.cpus) CPU_SET_S(cpu, bytes, set.get());
  if (int rc = pthread_setaffinity_np(pthread_self(), bytes, set.get()); rc != 0) {
    if (rc == EINVAL) {
      return Status(Errc::invalid_argument,
                    fmt::format("none of CPUs {} is usable by this process", cpus.to_string()));
    }
    return Status(Errc::provider,
                  fmt::format("pinning to CPUs {}: {}", cpus.to_string(), std::strerror(rc)));
  }
  return Status::success();
}

Result<CpuSet> current_thread_affinity() { return affinity_of(/*whole_process=*/false); }

}  // namespace fabric
