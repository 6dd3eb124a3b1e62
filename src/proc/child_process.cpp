#include "fabric_proc/child_process.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <system_error>
#include <thread>
#include <utility>

namespace fabric::proc {

namespace {
using Clock = std::chrono::steady_clock;

ChildExit from_wait_status(int status) {
  ChildExit e;
  if (WIFEXITED(status)) {
    e.kind = ChildExit::Kind::exited;
    e.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    e.kind = ChildExit::Kind::signaled;
    e.signal = WTERMSIG(status);
  } else {
    e.kind = ChildExit::Kind::wait_failed;
    e.detail = "unexpected wait status " + std::to_string(status);
  }
  return e;
}

// A pidfd makes the wait a single poll() with the exact deadline; kernels
// without pidfd_open fall back to polling waitpid at a short interval.
int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

[[noreturn]] void run_child(const std::function<int(Channel&)>& body, int fd,
                            std::chrono::seconds timeout, pid_t parent) {
  // Die with the parent (a crashed or killed test must not leave orphans);
  // the re-check closes the race where the parent died before prctl().
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(kChildCheckFailed);
  // Hard deadline: SIGALRM's default action terminates the process.
  ::signal(SIGALRM, SIG_DFL);
  ::alarm(static_cast<unsigned>(timeout.count() > 0 ? timeout.count() : 1));
  int code = kChildException;
  try {
    Channel channel(fd);
    code = body(channel);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[child %d] body threw: %s\n", static_cast<int>(::getpid()), e.what());
    code = kChildException;
  } catch (...) {
    std::fprintf(stderr, "[child %d] body threw a non-std exception\n",
                 static_cast<int>(::getpid()));
    code = kChildException;
  }
  std::fflush(nullptr);
  ::_exit(code);
}
}  // namespace

std::string ChildExit::to_string() const {
  std::string out;
  switch (kind) {
    case Kind::exited:
      out = "exited with code " + std::to_string(code);
      if (code == kChildCheckFailed) out += " (a CHILD_REQUIRE failed; see its stderr)";
      if (code == kChildException) out += " (the child body threw; see its stderr)";
      break;
    case Kind::signaled:
      out = "killed by signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
      if (signal == SIGALRM) out += ": the child's own deadline passed";
      break;
    case Kind::timed_out:
      out = "did not exit in time; killed with SIGKILL";
      break;
    case Kind::wait_failed:
      out = "could not be waited for";
      break;
  }
  if (!detail.empty()) out += ": " + detail;
  return out;
}

ChildProcess::ChildProcess(pid_t pid, Channel channel) : pid_(pid), channel_(std::move(channel)) {}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      channel_(std::move(other.channel_)),
      reaped_(std::exchange(other.reaped_, false)),
      exit_(std::move(other.exit_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    reset();
    pid_ = std::exchange(other.pid_, -1);
    channel_ = std::move(other.channel_);
    reaped_ = std::exchange(other.reaped_, false);
    exit_ = std::move(other.exit_);
  }
  return *this;
}

ChildProcess::~ChildProcess() { reset(); }

void ChildProcess::reset() noexcept {
  if (pid_ > 0 && !reaped_) (void)kill();
  channel_.close();
  pid_ = -1;
}

ChildExit ChildProcess::kill() {
  if (pid_ <= 0) return ChildExit{ChildExit::Kind::wait_failed, -1, 0, "no child"};
  if (reaped_) return exit_;
  ::kill(pid_, SIGKILL);
  int status = 0;
  pid_t rc;
  do {
    rc = ::waitpid(pid_, &status, 0);  // bounded: SIGKILL cannot be ignored
  } while (rc < 0 && errno == EINTR);
  reaped_ = true;
  if (rc == pid_) {
    exit_ = from_wait_status(status);
  } else {
    exit_ = ChildExit{ChildExit::Kind::wait_failed, -1, 0, std::strerror(errno)};
  }
  return exit_;
}

std::optional<ChildExit> ChildProcess::exited() {
  if (pid_ <= 0) return ChildExit{ChildExit::Kind::wait_failed, -1, 0, "no child"};
  if (reaped_) return exit_;
  int status = 0;
  pid_t rc;
  do {
    rc = ::waitpid(pid_, &status, WNOHANG);
  } while (rc < 0 && errno == EINTR);
  if (rc == 0) return std::nullopt;
  reaped_ = true;
  exit_ = rc == pid_ ? from_wait_status(status)
                     : ChildExit{ChildExit::Kind::wait_failed, -1, 0, std::strerror(errno)};
  return exit_;
}

ChildExit ChildProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return ChildExit{ChildExit::Kind::wait_failed, -1, 0, "no child"};
  if (reaped_) return exit_;
  const auto deadline = Clock::now() + timeout;
  const int pidfd = open_pidfd(pid_);
  for (;;) {
    int status = 0;
    const pid_t rc = ::waitpid(pid_, &status, WNOHANG);
    if (rc == pid_) {
      if (pidfd >= 0) ::close(pidfd);
      reaped_ = true;
      exit_ = from_wait_status(status);
      return exit_;
    }
    if (rc < 0 && errno != EINTR) {
      if (pidfd >= 0) ::close(pidfd);
      reaped_ = true;  // nothing left to reap
      exit_ = ChildExit{ChildExit::Kind::wait_failed, -1, 0,
                        std::string("waitpid: ") + std::strerror(errno)};
      return exit_;
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      (void)::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 1)));
    } else {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(2)));
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  (void)kill();
  exit_ = ChildExit{ChildExit::Kind::timed_out, -1, 0,
                    "still running after " + std::to_string(timeout.count()) + " ms"};
  return exit_;
}

int current_thread_count() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// ThreadSanitizer runs a background thread of its own in every process.
#if defined(__SANITIZE_THREAD__)
constexpr int kBaselineThreads = 2;
#else
constexpr int kBaselineThreads = 1;
#endif

ChildProcess spawn_child(std::function<int(Channel&)> body, std::chrono::seconds timeout) {
  if (const int threads = current_thread_count(); threads > kBaselineThreads) {
    std::fprintf(stderr,
                 "fabric_proc: WARNING: fork() from a process with %d threads; spawn children "
                 "before creating the parent's engine\n",
                 threads);
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw std::system_error(errno, std::generic_category(), "socketpair");
  }
  // Flush stdio so buffered gtest output is not written twice (once per process).
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::system_error(err, std::generic_category(), "fork");
  }
  if (pid == 0) {
    ::close(fds[0]);
    run_child(body, fds[1], timeout, parent);
  }
  ::close(fds[1]);
  return ChildProcess(pid, Channel(fds[0]));
}

}  // namespace fabric::proc
