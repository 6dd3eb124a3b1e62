#include "libfabric/shm_leftovers.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "libfabric/shm_liveness.hpp"

namespace fabric::ofi {

namespace {

constexpr std::string_view kScheme = "fi_shm://";

bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

struct DirCloser {
  void operator()(DIR* d) const noexcept { ::closedir(d); }
};

}  // namespace

Result<UniqueFd> hold_own_region(std::span<const std::byte> address, const std::string& dir) {
  std::string name(reinterpret_cast<const char*>(address.data()), address.size());
  name.resize(std::strlen(name.c_str()));
  if (name.starts_with(kScheme)) name.erase(0, kScheme.size());
  if (ShmPeerLiveness::pid_of(name) == 0 || name.find('/') != std::string::npos) {
    return Status(Errc::not_found, "shm endpoint " + name + " is not named by this library");
  }
  UniqueFd fd(::open((dir + "/" + name).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return Status(Errc::not_found, dir + "/" + name + ": " + std::strerror(errno));
  }
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) {
    return Status(Errc::provider, "locking " + dir + "/" + name + ": " + std::strerror(errno));
  }
  return fd;
}

SweepResult sweep_dead_regions(const std::string& dir) {
  SweepResult out;
  std::unique_ptr<DIR, DirCloser> d(::opendir(dir.c_str()));
  if (!d) return out;
  const uid_t me = ::geteuid();
  while (const dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    const pid_t pid = ShmPeerLiveness::pid_of(name);
    if (pid == 0 || !process_gone(pid)) continue;
    const std::string path = dir + "/" + name;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) continue;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != me) continue;
    // Held by a live engine (one whose pid we cannot see): not ours to remove.
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;
    if (::unlink(path.c_str()) == 0) {
      ++out.removed;
      out.bytes += static_cast<std::uint64_t>(st.st_size);
    }
  }
  return out;
}

}  // namespace fabric::ofi
