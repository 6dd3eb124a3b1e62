#include "libfabric/shm_liveness.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace fabric::ofi {

namespace {
constexpr std::string_view kScheme = "fi_shm://";
constexpr std::string_view kPrefix = "fl-";
}

pid_t ShmPeerLiveness::pid_of(const std::string& name) {
  if (!name.starts_with(kPrefix)) return 0;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size();
  pid_t pid = 0;
  auto [end, ec] = std::from_chars(first, last, pid);
  if (ec != std::errc{} || end == first || end == last || *end != '-' || pid <= 0) return 0;
  return pid;
}

std::unique_ptr<ShmPeerLiveness> ShmPeerLiveness::watch(std::span<const std::byte> address) {
  // The address is the endpoint name, NUL-padded.
  // The address is the endpoint name, NUL-terminated:
  // "fi_shm://fl-<pid>-<random>:<uid>:<index>"; the region file in /dev/shm
  // is named by what follows the scheme.
  std::string name(reinterpret_cast<const char*>(address.data()), address.size());
  name.resize(std::strlen(name.c_str()));
  if (name.starts_with(kScheme)) name.erase(0, kScheme.size());
  const pid_t pid = pid_of(name);
  if (pid == 0 || name.find('/') != std::string::npos) return nullptr;
  std::unique_ptr<ShmPeerLiveness> w(new ShmPeerLiveness(name, pid));
  // A pidfd follows this very process, not whatever reuses its pid later.
  w->pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (w->pidfd_ < 0) {
    if (errno == ESRCH) w->gone_ = fmt::format("its process {} has exited", pid);
    // Other errors (no pidfd support): the region file alone is watched.
  }
  w->region_fd_ = ::open(("/dev/shm/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (w->region_fd_ < 0 && w->gone_.empty() && errno == ENOENT) {
    w->gone_ = "its endpoint's region file is gone (the endpoint was closed)";
  }
  if (w->gone()) w->close_fds();
  return w;
}

ShmPeerLiveness::~ShmPeerLiveness() { close_fds(); }

void ShmPeerLiveness::close_fds() noexcept {
  if (pidfd_ >= 0) ::close(pidfd_);
  if (region_fd_ >= 0) ::close(region_fd_);
  pidfd_ = -1;
  region_fd_ = -1;
}

Status ShmPeerLiveness::check() {
  if (gone_.empty()) {
    const auto now = std::chrono::steady_clock::now();
    if (now - looked_ < kRecheck) return Status::success();
    looked_ = now;
  }
  if (gone_.empty() && pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    // Readable once the process has exited (also before it is reaped).
    if (::poll(&p, 1, 0) > 0) gone_ = fmt::format("its process {} has exited", pid_);
  }
  if (gone_.empty() && region_fd_ >= 0) {
    struct stat st {};
    if (::fstat(region_fd_, &st) == 0 && st.st_nlink == 0) {
      gone_ = "its endpoint was closed (region file unlinked)";
    }
  }
  if (gone_.empty()) return Status::success();
  close_fds();  // it never comes back
  return {Errc::provider, fmt::format("{}; nothing was sent", describe_gone())};
}

std::string ShmPeerLiveness::describe_gone() const {
  return fmt::format("shm peer {} is gone: {}", name_, gone_);
}

}  // namespace fabric::ofi
