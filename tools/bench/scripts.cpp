#include "scripts.hpp"

#include <filesystem>
#include <system_error>

namespace bench {
namespace {

namespace fs = std::filesystem;

// <prefix>/bin/fabric-bench -> <prefix>/share/fabric-lib/bench/<name>, if it is there.
std::string installed_or(const char* name, const char* source_path) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path candidate =
        exe.parent_path().parent_path() / FABRIC_BENCH_INSTALLED_SCRIPTS / name;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  return source_path;
}

}  // namespace

std::string plot_script() { return installed_or("plot.py", FABRIC_BENCH_PLOT_SCRIPT); }

std::string peer_script() { return installed_or("peer_bench.py", FABRIC_BENCH_PEER_SCRIPT); }

}  // namespace bench
