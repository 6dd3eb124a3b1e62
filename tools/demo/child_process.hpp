#pragma once
// The target process: spawned by re-executing this binary, it reports its
// addresses over a pipe. Killed and reaped on every path that does not wait
// for it, so no run leaves a stray process behind. Or, between two hosts, a
// target started with --listen elsewhere, reporting over a TCP connection.

#include <chrono>
#include <string>
#include <sys/types.h>
#include <vector>

namespace demo {

class ChildProcess {
 public:
  // Forks and execs /proc/self/exe with `args` plus "--bootstrap-fd N", where
  // N is the write end of a pipe whose read end this object keeps. Call before
  // the parent starts any thread: only the forking thread survives fork().
  static ChildProcess spawn(const std::vector<std::string>& args);
  // Connects to `fabric-demo --listen HOST:PORT` on another host; its
  // liveness and exit are its own host's business (waits stay bounded).
  static ChildProcess remote(const std::string& host_port);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ~ChildProcess();

  // One line from the child's pipe, without the newline. Throws if the child
  // closes the pipe or stays silent past `timeout`.
  std::string read_line(std::chrono::milliseconds timeout);
  // Waits for the child to exit and returns its exit code (128+signal when
  // killed). Throws, after killing it, if it outlives `timeout`.
  int wait_exit(std::chrono::milliseconds timeout);
  void kill_and_reap() noexcept;
  // Throws if the child has exited (reaping it), so waits on the child's
  // replies fail at once instead of at their time limit.
  void check_alive();

 private:
  ChildProcess(pid_t pid, int read_fd) : pid_(pid), read_fd_(read_fd) {}
  static int decode_wait_status(int status);

  pid_t pid_ = -1;  // -1 once reaped
  bool remote_ = false;
  int read_fd_ = -1;
  std::string buffered_;
};

}  // namespace demo
