#pragma once
// The out-of-band channel between the bench and the target processes it
// forks: line-based messages over a pair of pipes, every read bounded.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

namespace bench {

class Link {
 public:
  Link() = default;
  Link(int in_fd, int out_fd) : in_(in_fd), out_(out_fd) {}
  Link(Link&& o) noexcept;
  Link& operator=(Link&& o) noexcept;
  ~Link();

  void send(const std::string& line);
  // Throws when the peer closes its end or stays silent past `timeout`.
  std::string recv(std::chrono::milliseconds timeout);
  // recv(), and throws unless the reply starts with `word`.
  std::string expect(const std::string& word, std::chrono::milliseconds timeout);

 private:
  void close_fds() noexcept;
  int in_ = -1;
  int out_ = -1;
  std::string buffered_;
};

struct Child {
  pid_t pid = -1;
  Link link;
};

// Forks a process running `body(link)` (its return is the exit code). Must be
// called before this process starts any thread: only the caller survives fork.
Child fork_child(const std::function<int(Link&)>& body);
// Waits up to `timeout` for a clean exit, else kills; returns true on exit code 0.
bool reap(Child& child, std::chrono::milliseconds timeout);

}  // namespace bench
