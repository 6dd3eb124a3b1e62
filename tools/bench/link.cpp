#include "link.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <thread>
#include <utility>

namespace bench {

Link::Link(Link&& o) noexcept
    : in_(std::exchange(o.in_, -1)), out_(std::exchange(o.out_, -1)),
      buffered_(std::move(o.buffered_)) {}

Link& Link::operator=(Link&& o) noexcept {
  if (this != &o) {
    close_fds();
    in_ = std::exchange(o.in_, -1);
    out_ = std::exchange(o.out_, -1);
    buffered_ = std::move(o.buffered_);
  }
  return *this;
}

Link::~Link() { close_fds(); }

void Link::close_fds() noexcept {
  if (in_ >= 0) ::close(in_);
  if (out_ >= 0) ::close(out_);
  in_ = out_ = -1;
}

void Link::send(const std::string& line) {
  const std::string msg = line + "\n";
  std::size_t done = 0;
  while (done < msg.size()) {
    const ssize_t n = ::write(out_, msg.data() + done, msg.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("control pipe: peer is gone");
    done += static_cast<std::size_t>(n);
  }
}

std::string Link::recv(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (auto nl = buffered_.find('\n'); nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("control pipe: no reply in time");
    pollfd p{in_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(in_, buf, sizeof buf);
    if (n <= 0) throw std::runtime_error("control pipe: peer closed it");
    buffered_.append(buf, static_cast<std::size_t>(n));
  }
}

std::string Link::expect(const std::string& word, std::chrono::milliseconds timeout) {
  std::string line = recv(timeout);
  if (line.starts_with("fail ")) throw std::runtime_error("target: " + line.substr(5));
  if (line.rfind(word, 0) != 0) {
    throw std::runtime_error(fmt::format("target said '{}' (wanted '{}')", line, word));
  }
  return line;
}

Child fork_child(const std::function<int(Link&)>& body) {
  int down[2];
  int up[2];
  if (::pipe(down) != 0 || ::pipe(up) != 0) throw std::runtime_error("pipe failed");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    // A target must never outlive a bench that crashed.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    ::close(down[1]);
    ::close(up[0]);
    int rc = 1;
    {
      Link link(down[0], up[1]);
      try {
        rc = body(link);
      } catch (const std::exception& e) {
        // The bench reports what its targets tell it, so that one failure
        // (an unknown provider in all five processes) is one line; printed
        // here only when the bench can no longer be told.
        try {
          link.send(fmt::format("fail {}", e.what()));
        } catch (...) {
          fmt::print(stderr, "fabric-bench target: {}\n", e.what());
        }
      }
    }
    std::fflush(stderr);
    ::_exit(rc);
  }
  ::close(down[0]);
  ::close(up[1]);
  return Child{pid, Link(up[0], down[1])};
}

bool reap(Child& child, std::chrono::milliseconds timeout) {
  if (child.pid < 0) return true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    const pid_t r = ::waitpid(child.pid, &status, WNOHANG);
    if (r == child.pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child.pid, SIGKILL);
      ::waitpid(child.pid, &status, 0);
      child.pid = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  child.pid = -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace bench
