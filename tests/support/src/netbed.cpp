#include "fabric_test/netbed.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#ifndef FABRIC_NETBED_TOOL
#error "FABRIC_NETBED_TOOL must name tools/netbed/netbed"
#endif

namespace fabric::test {

namespace {

// Every argument the tests pass is a name, a number or a tc word; quoting
// keeps a stray character from becoming shell syntax anyway.
std::string quoted(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

struct ToolRun {
  int exit_code = -1;
  std::string output;
};

ToolRun run_tool(const std::vector<std::string>& args) {
  std::string cmd = "python3 " + quoted(FABRIC_NETBED_TOOL);
  for (const auto& a : args) cmd += " " + quoted(a);
  cmd += " 2>&1";
  ToolRun run;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    run.output = std::string("popen: ") + std::strerror(errno);
    return run;
  }
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) run.output.append(buf, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

}  // namespace

std::string Netbed::unavailable_reason() {
  // `check` builds a probe namespace for real: once per process is enough.
  static const std::string reason = [] {
    // Appended, not `std::string(...) + ...`: GCC 12 at -O2 with this target's precompiled
    // headers takes that for an out-of-bounds memcpy (-Warray-bounds, a false positive).
    if (::access(FABRIC_NETBED_TOOL, R_OK) != 0) return std::string("no ").append(FABRIC_NETBED_TOOL);
    const ToolRun run = run_tool({"check"});
    if (run.exit_code == 0) return std::string();
    std::string why = run.output;
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    if (run.exit_code == 127 || why.empty()) why = "netbed needs python3 (" + why + ")";
    return why;
  }();
  return reason;
}

std::string Netbed::unique_name(std::string_view tag) {
  static std::atomic<int> counter{0};
  std::string name = "t" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  for (char c : tag) {
    if (name.size() >= 32) break;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) name += c;
  }
  return name;
}

Result<std::string> Netbed::tool(const std::vector<std::string>& args) const {
  std::vector<std::string> full = args;
  full.insert(full.begin() + 1, {"--name", name_});
  const ToolRun run = run_tool(full);
  if (run.exit_code != 0) {
    return Status(Errc::provider, "netbed " + args.front() + " failed (" +
                                      std::to_string(run.exit_code) + "): " + run.output);
  }
  return run.output;
}

Result<std::unique_ptr<Netbed>> Netbed::up(const std::string& name, const NetbedOptions& options) {
  std::unique_ptr<Netbed> bed(new Netbed(name, options));
  std::vector<std::string> args = {"up", "--hosts", std::to_string(options.hosts), "--nics",
                                   std::to_string(options.nics), "--rate", options.rate};
  if (!options.delay.empty()) args.insert(args.end(), {"--delay", options.delay});
  if (!options.loss.empty()) args.insert(args.end(), {"--loss", options.loss});
  auto built = bed->tool(args);
  if (!built) return built.status();
  bed->up_ = true;
  // The addressing plan belongs to the tool: ask it rather than repeat it.
  auto listed = bed->tool({"addrs"});
  if (!listed) return listed.status();
  bed->addresses_.assign(options.hosts, std::vector<std::string>(options.nics));
  std::istringstream in(listed.value());
  std::string host, nic, addr;
  while (in >> host >> nic >> addr) {
    const int h = std::stoi(host.substr(1));
    const int k = std::stoi(nic.substr(3));
    if (h < options.hosts && k < options.nics) bed->addresses_[h][k] = addr;
  }
  return bed;
}

Netbed::~Netbed() { (void)down(); }

Status Netbed::down() {
  if (!up_) return Status::success();
  up_ = false;
  auto st = tool({"down"});
  return st ? Status::success() : st.status();
}

std::string Netbed::host_namespace(int host) const {
  return name_ + "-h" + std::to_string(host);
}

std::string Netbed::interface(int nic) { return "nic" + std::to_string(nic); }

const std::string& Netbed::address(int host, int nic) const { return addresses_.at(host).at(nic); }

Status Netbed::enter(int host) const {
  const std::string path = "/run/netns/" + host_namespace(host);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {Errc::not_found, path + ": " + std::strerror(errno)};
  const int rc = ::setns(fd, CLONE_NEWNET);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return {Errc::provider, "setns(" + path + "): " + std::strerror(err)};
  return Status::success();
}

Result<std::map<std::string, NicCounters>> Netbed::counters(int host) const {
  auto out = tool({"counters", "h" + std::to_string(host)});
  if (!out) return out.status();
  std::map<std::string, NicCounters> result;
  std::istringstream lines(out.value());
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string nic, kv;
    words >> nic;
    NicCounters c;
    while (words >> kv) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = kv.substr(0, eq);
      const std::uint64_t value = std::stoull(kv.substr(eq + 1));
      if (key == "rx_bytes") c.rx_bytes = value;
      if (key == "tx_bytes") c.tx_bytes = value;
    }
    if (!nic.empty()) result[nic] = c;
  }
  return result;
}

Result<std::uint64_t> Netbed::dropped_by_loss() const {
  auto out = tool({"dropped"});
  if (!out) return out.status();
  return static_cast<std::uint64_t>(std::stoull(out.value()));
}

Status Netbed::kill_host(int host) {
  auto out = tool({"kill", "h" + std::to_string(host)});
  return out ? Status::success() : out.status();
}

}  // namespace fabric::test
