#pragma once
// Where the threads that the engine and its workloads start may run (docs/concepts.md, "Threads
// and CPUs"). Each such thread sets its own CPU mask and name when it starts, from this policy,
// never from the thread that created it: a host that pinned its own thread to one core (vLLM's
// CPU worker, a Ray actor, a process bound per NUMA node) must not pin the engine there by
// accident, where its heartbeats queue behind the host's spinning threads while a core idles.

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "fabric/status.hpp"
#include "fabric/topology.hpp"

namespace fabric {

// The process-wide setting, in cpulist syntax ("2-3", "0,4-7"): every engine thread of the
// process runs there unless EngineConfig::thread_cpus names other CPUs.
inline constexpr const char* kCpusEnv = "FABRIC_CPUS";

// The CPUs this process may use, whatever any of its threads' masks say: the cgroup's effective
// cpuset (v2, else v1) within the online CPUs; where neither can be read, the process's affinity
// as it was when the library was loaded.
Result<CpuSet> process_cpus();

// Where the engine's threads run, and why.
struct ThreadCpus {
  CpuSet cpus;
  std::string source;  // "EngineConfig::thread_cpus", "FABRIC_CPUS" or "process"
};

// `configured` when non-empty, else FABRIC_CPUS when set, else process_cpus(). invalid_argument
// when FABRIC_CPUS does not parse or the chosen set holds no CPU this process may use; the
// result is always within process_cpus().
Result<ThreadCpus> engine_thread_cpus(const CpuSet& configured = {});

// A running thread that the library started, as it placed itself.
struct ThreadPlacement {
  std::string name;  // as /proc and `top -H` show it: "fabric-wk0", "fabric-cb", ...
  pid_t tid = 0;
  CpuSet cpus;  // its mask, read back after it set it
};

// Every thread the library started that is still running, in no set order.
std::vector<ThreadPlacement> library_threads();

// Held by a thread for its whole life: made first thing in the thread's body, it names the
// thread (the kernel keeps 15 characters), restricts it to `cpus` (empty: leaves its mask) and
// lists it in library_threads() until it is destroyed. A mask the kernel refuses is logged and
// the thread runs on with the mask it had.
class PlacedThread {
 public:
  PlacedThread(std::string_view name, const CpuSet& cpus);
  ~PlacedThread();
  PlacedThread(const PlacedThread&) = delete;
  PlacedThread& operator=(const PlacedThread&) = delete;

  [[nodiscard]] const CpuSet& cpus() const noexcept { return cpus_; }

 private:
  pid_t tid_;
  CpuSet cpus_;
};

}  // namespace fabric
