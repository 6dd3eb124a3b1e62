#include "child_process.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <fmt/core.h>

#include "common/rendezvous.hpp"
#include "demo_error.hpp"

namespace demo {
namespace {
std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }
}  // namespace

ChildProcess ChildProcess::spawn(const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw DemoError(errno_text("pipe2"));

  // Everything exec needs is prepared before fork: after it, the child may
  // only make async-signal-safe calls.
  // Exec through /proc/self/exe (immune to PATH and cwd), but give the child
  // the real path as argv[0] so it is recognisable in ps.
  char self[4096] = {};
  const ssize_t self_len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::vector<std::string> owned = {self_len > 0 ? std::string(self, static_cast<std::size_t>(self_len)) : "fabric-demo"};
  owned.insert(owned.end(), args.begin(), args.end());
  owned.emplace_back("--bootstrap-fd");
  owned.emplace_back(std::to_string(fds[1]));
  std::vector<char*> argv;
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) {
    const std::string error = errno_text("fork");
    ::close(fds[0]);
    ::close(fds[1]);
    throw DemoError(error);
  }
  if (pid == 0) {
    // If the writer dies without cleaning up, the target must not linger.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    // The write end must survive exec; the read end (still CLOEXEC) must not.
    if (::fcntl(fds[1], F_SETFD, 0) != 0) ::_exit(126);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  return ChildProcess(pid, fds[0]);
}

ChildProcess ChildProcess::remote(const std::string& host_port) {
  const tools::HostPort server = tools::parse_host_port(host_port);
  fmt::print(stderr, "fabric-demo: connecting to {}\n", server.to_string());
  ChildProcess peer(-1, tools::connect_to(server, std::chrono::seconds(3), "fabric-demo").release());
  peer.remote_ = true;
  return peer;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), remote_(other.remote_), read_fd_(other.read_fd_),
      buffered_(std::move(other.buffered_)) {
  other.pid_ = -1;
  other.read_fd_ = -1;
}

ChildProcess::~ChildProcess() {
  kill_and_reap();
  if (read_fd_ >= 0) ::close(read_fd_);
}

std::string ChildProcess::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (const auto nl = buffered_.find('\n'); nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw DemoError("target process sent nothing within the wait limit");
    pollfd p{read_fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throw DemoError(errno_text("poll"));
    if (ready == 0) continue;
    char chunk[4096];
    const ssize_t n = ::read(read_fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw DemoError(errno_text("read from target"));
    if (n == 0) {
      throw DemoError(remote_ ? "the server closed the connection before reporting its address"
                              : "target process exited before reporting its address");
    }
    buffered_.append(chunk, static_cast<std::size_t>(n));
  }
}

int ChildProcess::decode_wait_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

int ChildProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (remote_) return 0;
  if (pid_ < 0) throw DemoError("target process already reaped");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return decode_wait_status(status);
    }
    if (r < 0 && errno != EINTR) throw DemoError(errno_text("waitpid"));
    if (std::chrono::steady_clock::now() > deadline) {
      kill_and_reap();
      throw DemoError("target process did not exit within the wait limit; killed it");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void ChildProcess::check_alive() {
  if (remote_) return;
  if (pid_ < 0) throw DemoError("target process is gone");
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    throw DemoError("target process exited unexpectedly with code " +
                    std::to_string(decode_wait_status(status)));
  }
}

void ChildProcess::kill_and_reap() noexcept {
  if (pid_ < 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace demo
