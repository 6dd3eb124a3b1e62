#pragma once
// The target process: spawned by re-executing this binary, it reports its
// addresses over the shared control channel (src/proc). Killed and reaped on
// every path that does not wait for it, so no run leaves a stray process
// behind. Or, between two hosts, a target started with --listen elsewhere,
// reporting over a TCP connection.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "fabric_proc/child_process.hpp"

namespace demo {

class ChildProcess {
 public:
  // Forks and execs /proc/self/exe with `args` plus "--bootstrap-fd N", N
  // being the child's end of the channel. Call before the parent starts any
  // thread: only the forking thread survives fork().
  static ChildProcess spawn(const std::vector<std::string>& args);
  // Connects to `fabric-demo --listen HOST:PORT` on another host; its
  // liveness and exit are its own host's business (waits stay bounded).
  static ChildProcess remote(const std::string& host_port);

  // One message from the target. Throws if it closes the channel or stays
  // silent past `timeout`.
  std::string read_line(std::chrono::milliseconds timeout);
  // Waits for the child to exit and returns its exit code (128+signal when
  // killed). Throws, after killing it, if it outlives `timeout`.
  int wait_exit(std::chrono::milliseconds timeout);
  // Throws if the child has exited (reaping it), so waits on the child's
  // replies fail at once instead of at their time limit.
  void check_alive();

 private:
  ChildProcess(std::optional<fabric::proc::ChildProcess> process, fabric::proc::Channel channel)
      : process_(std::move(process)), channel_(std::move(channel)) {}

  std::optional<fabric::proc::ChildProcess> process_;  // none: a remote server
  fabric::proc::Channel channel_;
};

// The target's side: sends its one bootstrap line on the channel whose
// socket it was given (--bootstrap-fd, or the accepted --listen connection).
void send_bootstrap(int fd, const std::string& line);

}  // namespace demo
