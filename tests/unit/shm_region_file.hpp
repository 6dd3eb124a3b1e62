#pragma once
// A region file as shm makes one in /dev/shm, named like the engine's endpoints
// ("fl-<pid>-..."), removed at scope end: what the shm liveness check looks at.

#include <fcntl.h>
#include <unistd.h>

#include <random>
#include <string>

namespace fabric::ofi::test {

class RegionFile {
 public:
  explicit RegionFile(pid_t pid, const std::string& tag) {
    std::random_device rd;
    name_ = "fl-" + std::to_string(pid) + "-" + tag + std::to_string(rd()) + ":0:0";
    const int fd = ::open(path().c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
  }
  RegionFile(const RegionFile&) = delete;
  RegionFile& operator=(const RegionFile&) = delete;
  ~RegionFile() { ::unlink(path().c_str()); }
  [[nodiscard]] std::string path() const { return "/dev/shm/" + name_; }
  [[nodiscard]] std::string address() const { return "fi_shm://" + name_; }

 private:
  std::string name_;
};

}  // namespace fabric::ofi::test
