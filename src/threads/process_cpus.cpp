#include "threads/process_cpus.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "fabric/threads.hpp"

namespace fabric {

namespace threads {

namespace {

std::optional<CpuSet> read_cpulist(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  if (line.empty()) return std::nullopt;  // a cgroup whose cpuset is not set here
  auto set = CpuSet::parse(line);
  if (!set || set->empty()) return std::nullopt;
  return std::move(set).value();
}

// "/a/b" -> "/sys/fs/cgroup/x/a/b/file", "/sys/fs/cgroup/x/a/file", "/sys/fs/cgroup/x/file".
void append_walk(std::vector<std::string>& out, std::string_view base, std::string_view path,
                 std::string_view file) {
  std::string dir(path);
  while (!dir.empty() && dir.back() == '/') dir.pop_back();
  for (;;) {
    out.push_back(fmt::format("{}{}/{}", base, dir, file));
    if (dir.empty()) return;
    dir.erase(dir.rfind('/'));
  }
}

bool names_cpuset(std::string_view controllers) {
  while (!controllers.empty()) {
    const auto comma = controllers.find(',');
    if (controllers.substr(0, comma) == "cpuset") return true;
    if (comma == std::string_view::npos) return false;
    controllers.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

std::vector<std::string> cpuset_files(std::string_view proc_self_cgroup, std::string_view root) {
  std::vector<std::string> v2, v1;
  std::string_view rest = proc_self_cgroup;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    // hierarchy-id:controllers:path; the path may itself hold ':'.
    const auto first = line.find(':');
    if (first == std::string_view::npos) continue;
    const auto second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, first);
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string_view path = line.substr(second + 1);
    if (path.empty() || path.front() != '/') continue;
    if (id == "0" && controllers.empty()) {
      append_walk(v2, root, path, "cpuset.cpus.effective");
    } else if (names_cpuset(controllers)) {
      append_walk(v1, fmt::format("{}/cpuset", root), path, "cpuset.effective_cpus");
    }
  }
  // A v1 cpuset controller, where mounted, is the one that constrains: under a hybrid layout
  // the unified tree has no cpuset files.
  v1.insert(v1.end(), std::make_move_iterator(v2.begin()), std::make_move_iterator(v2.end()));
  return v1;
}

CpuSet intersect(const CpuSet& a, const CpuSet& b) {
  CpuSet out;
  std::set_intersection(a.cpus.begin(), a.cpus.end(), b.cpus.begin(), b.cpus.end(),
                        std::back_inserter(out.cpus));
  return out;
}

CpuSet choose_process_cpus(const std::optional<CpuSet>& cgroup, const std::optional<CpuSet>& online,
                           const CpuSet& at_load) {
  if (cgroup) {
    CpuSet usable = online ? intersect(*cgroup, *online) : *cgroup;
    if (!usable.empty()) return usable;
  }
  return at_load;
}

}  // namespace threads

namespace {

// Read when the library is loaded, before a host is likely to have pinned the loading thread:
// the fallback where no cgroup file can be read.
const CpuSet kAffinityAtLoad = [] {
  auto mine = current_thread_affinity();
  return mine ? std::move(mine).value() : CpuSet{};
}();

std::string read_all(const char* path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

Result<CpuSet> process_cpus() {
  std::optional<CpuSet> cgroup;
  for (const auto& file : threads::cpuset_files(read_all("/proc/self/cgroup"))) {
    if ((cgroup = threads::read_cpulist(file))) break;
  }
  const auto online = threads::read_cpulist("/sys/devices/system/cpu/online");
  CpuSet chosen = threads::choose_process_cpus(cgroup, online, kAffinityAtLoad);
  if (chosen.empty()) {
    return Status(Errc::not_found,
                  "the CPUs of this process: no cgroup cpuset, and its affinity could not be read");
  }
  return chosen;
}

Result<ThreadCpus> engine_thread_cpus(const CpuSet& configured) {
  auto allowed = process_cpus();
  if (!allowed) return allowed.status();
  ThreadCpus out;
  if (!configured.empty()) {
    out = {configured, "EngineConfig::thread_cpus"};
  } else if (const char* env = std::getenv(kCpusEnv); env != nullptr && *env != '\0') {
    auto parsed = CpuSet::parse(env);
    if (!parsed) {
      return Status(Errc::invalid_argument,
                    fmt::format("{}=\"{}\": {}", kCpusEnv, env, parsed.status().message()));
    }
    out = {std::move(parsed).value(), kCpusEnv};
  } else {
    return ThreadCpus{std::move(allowed).value(), "process"};
  }
  CpuSet usable = threads::intersect(out.cpus, *allowed);
  if (usable.empty()) {
    return Status(Errc::invalid_argument,
                  fmt::format("{} names CPUs {}, none of which this process may use ({})",
                              out.source, out.cpus.to_string(), allowed->to_string()));
  }
  out.cpus = std::move(usable);
  return out;
}

}  // namespace fabric
