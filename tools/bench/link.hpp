#pragma once
// The out-of-band channel between the bench and its targets: text lines as
// frames of the shared control channel (src/proc), over a socketpair to a
// forked target or a TCP connection to a server; every read bounded.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fabric_proc/child_process.hpp"

namespace bench {

class Link {
 public:
  Link() = default;
  explicit Link(fabric::proc::Channel channel) : channel_(std::move(channel)) {}

  void send(const std::string& line);
  // Throws when the peer closes its end or stays silent past `timeout`.
  std::string recv(std::chrono::milliseconds timeout);
  // recv(), and throws unless the reply starts with `word`; a target's
  // "fail REASON" throws REASON.
  std::string expect(const std::string& word, std::chrono::milliseconds timeout);

 private:
  fabric::proc::Channel channel_;
};

struct Child {
  std::optional<fabric::proc::ChildProcess> process;  // none: a server elsewhere
  Link link;
};

// Forks a process running `body(link)` (its return is the exit code). Must be
// called before this process starts any thread: only the caller survives fork.
Child fork_child(const std::function<int(Link&)>& body);
// Waits until `deadline` for every forked target to exit, killing those still running then;
// how the first that failed ended ("target process N …"), empty if all exited 0. Servers
// elsewhere have nothing to reap.
std::string reap_all(std::vector<Child>& children, std::chrono::steady_clock::time_point deadline);

}  // namespace bench
