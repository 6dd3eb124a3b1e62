#include "peer_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "peer_roles.hpp"

extern char** environ;

namespace fabric::field {

namespace {
// A descriptor numbered above anything dup2 targets, so posix_spawn's dup2 onto kChannelFd or
// kRegionFd never has source == target (which would keep FD_CLOEXEC on some libcs).
int high_copy(int fd) {
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 64);
  if (copy < 0) throw std::system_error(errno, std::generic_category(), "fcntl(F_DUPFD)");
  return copy;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};
}  // namespace

test::ChildProcess spawn_peer(const PeerSpec& spec) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    throw std::system_error(errno, std::generic_category(), "socketpair");
  }
  Fd ours(pair[0]);
  Fd theirs(high_copy(pair[1]));
  ::close(pair[1]);
  Fd region(spec.region_fd >= 0 ? high_copy(spec.region_fd) : -1);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, theirs.get(), kChannelFd);
  if (region.get() >= 0) posix_spawn_file_actions_adddup2(&actions, region.get(), kRegionFd);

  std::vector<std::string> args = {FABRIC_FIELD_PEER,
                                   "--role", spec.role,
                                   "--provider", spec.provider,
                                   "--parent", std::to_string(::getpid()),
                                   "--lifetime", std::to_string(spec.lifetime.count())};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, FABRIC_FIELD_PEER, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "posix_spawn " FABRIC_FIELD_PEER);
  return test::ChildProcess(pid, proc::Channel(ours.release()));
}

std::string describe_threads(pid_t pid) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  std::string out;
  DIR* dir = ::opendir(task.c_str());
  if (dir == nullptr) return "(no /proc entry)";
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream stat(task + "/" + e->d_name + "/stat");
    std::ifstream wchan(task + "/" + e->d_name + "/wchan");
    std::string s, w;
    std::getline(stat, s);
    std::getline(wchan, w);
    const auto close = s.rfind(')');
    const char state = close != std::string::npos && close + 2 < s.size() ? s[close + 2] : '?';
    out += std::string(out.empty() ? "" : "; ") + e->d_name + " " + state + " " + (w.empty() ? "-" : w);
  }
  ::closedir(dir);
  return out;
}

bool is_stopped(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  // pid (comm) STATE ...: comm may hold spaces, so the state follows the last ')'.
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'T';
}

}  // namespace fabric::field
