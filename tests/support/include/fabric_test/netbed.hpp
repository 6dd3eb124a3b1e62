#pragma once
// C++ side of tools/netbed (docs/netbed.md): an emulated cluster of hosts in
// network namespaces, with rate-limited NICs, for tests whose engines must
// run on distinct hosts and NICs. The testbed is built and removed by the
// netbed tool; a forked child moves itself into one host with enter().

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/status.hpp"

namespace fabric::test {

struct NetbedOptions {
  int hosts = 2;
  int nics = 2;
  std::string rate = "400mbit";  // each NIC, each direction
  std::string delay;             // empty: none (needs netem)
  std::string loss;              // empty: none; "1%": every frame, each direction
};

struct NicCounters {
  std::uint64_t rx_bytes = 0;
  std::uint64_t tx_bytes = 0;
};

class Netbed {
 public:
  // Why no testbed can be built here (not root, no iproute2, no python3), or
  // empty when one can. Tests skip with this reason.
  static std::string unavailable_reason();
  // A testbed name unique to this process and `tag`, so that parallel tests
  // and parallel checkouts never share namespaces.
  static std::string unique_name(std::string_view tag);

  // Builds testbed `name`, removing whatever a killed run of it left.
  static Result<std::unique_ptr<Netbed>> up(const std::string& name, const NetbedOptions& options);
  ~Netbed();  // down(): the namespaces, and everything still running in them, go
  Netbed(const Netbed&) = delete;
  Netbed& operator=(const Netbed&) = delete;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const NetbedOptions& options() const noexcept { return options_; }
  [[nodiscard]] std::string host_namespace(int host) const;
  [[nodiscard]] static std::string interface(int nic);  // "nic0"
  // The address of NIC `nic` of `host`, as the tool assigned it.
  [[nodiscard]] const std::string& address(int host, int nic) const;

  // Moves the calling process's thread into `host` (setns). Call it in a
  // freshly forked, single-threaded child before it creates an engine, so
  // every thread the engine starts lives in that host.
  [[nodiscard]] Status enter(int host) const;
  // The NICs' own byte counters (/sys/class/net/nicK/statistics in the host).
  Result<std::map<std::string, NicCounters>> counters(int host) const;
  // Frames dropped so far by the --loss rule.
  Result<std::uint64_t> dropped_by_loss() const;
  // The host dies: its links are cut, its processes killed, its namespace deleted.
  Status kill_host(int host);
  Status down();

 private:
  Netbed(std::string name, NetbedOptions options) : name_(std::move(name)), options_(std::move(options)) {}
  Result<std::string> tool(const std::vector<std::string>& args) const;

  std::string name_;
  NetbedOptions options_;
  std::vector<std::vector<std::string>> addresses_;  // [host][nic]
  bool up_ = false;
};

}  // namespace fabric::test
