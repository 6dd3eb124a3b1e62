#pragma once
// Fork a child that runs a body with a Channel back to the parent, then
// _exit()s with the body's return value. Shared by the multi-process tests
// (tests/support) and the fabric-* tools that fork their peers.
//
// ORDER MATTERS: call spawn_child() BEFORE the parent creates its
// TransferEngine (or any other thread). fork() copies only the calling thread;
// a child forked from a process with engine threads inherits their locks in
// whatever state they were and may deadlock. Each child creates its own engine.
// spawn_child() warns on stderr when the parent already has extra threads.
//
// The child can never outlive its deadline (alarm() delivers SIGALRM, whose
// default action kills it) nor its parent (PR_SET_PDEATHSIG), and it never
// returns into its caller (under gtest: its gtest state is a copy nobody reports).

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "fabric_proc/channel.hpp"

namespace fabric::proc {

// Exit codes a child body uses by convention (anything else is the body's own).
inline constexpr int kChildOk = 0;
inline constexpr int kChildCheckFailed = 2;  // CHILD_REQUIRE (tests/support)
inline constexpr int kChildException = 3;    // body threw

struct ChildExit {
  enum class Kind { exited, signaled, timed_out, wait_failed };
  Kind kind = Kind::wait_failed;
  int code = -1;   // exited: the exit code
  int signal = 0;  // signaled: the signal
  std::string detail;

  [[nodiscard]] bool ok() const noexcept { return kind == Kind::exited && code == kChildOk; }
  [[nodiscard]] std::string to_string() const;
};

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(pid_t pid, Channel channel);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // Kills (SIGKILL) and reaps a child still running: a failed test leaves nothing behind.
  ~ChildProcess();

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  [[nodiscard]] Channel& channel() noexcept { return channel_; }
  [[nodiscard]] bool reaped() const noexcept { return reaped_; }

  // Waits for the child to exit; on expiry SIGKILLs it and returns timed_out.
  // Calling it again after the child was reaped returns the same result.
  ChildExit wait_exit(std::chrono::milliseconds timeout);
  // SIGKILL and reap; returns how it ended.
  ChildExit kill();
  // Without waiting: how it ended if it has exited (reaping it), else nullopt.
  std::optional<ChildExit> exited();

 private:
  void reset() noexcept;

  pid_t pid_ = -1;
  Channel channel_;
  bool reaped_ = false;
  ChildExit exit_;
};

// Throws std::system_error when socketpair() or fork() fails.
ChildProcess spawn_child(std::function<int(Channel&)> body, std::chrono::seconds timeout);

// Number of threads of the calling process (from /proc/self/status).
int current_thread_count();

}  // namespace fabric::proc

