#include "arena.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

namespace fabric::moe {

namespace {
Status sys_error(const std::string& what) {
  return {Errc::provider, "moe arena: " + what + ": " + std::strerror(errno)};
}
std::atomic<unsigned> arena_sequence{0};
}  // namespace

Arena::~Arena() {
  unlink();
  if (data_ != nullptr) ::munmap(data_, size_);
}

Arena::Arena(Arena&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      name_(std::move(other.name_)),
      owner_(std::exchange(other.owner_, false)) {}

Arena& Arena::operator=(Arena&& other) noexcept {
  Arena moved(std::move(other));
  std::swap(data_, moved.data_);
  std::swap(size_, moved.size_);
  std::swap(name_, moved.name_);
  std::swap(owner_, moved.owner_);
  return *this;  // `moved` releases what this held
}

Result<Arena> Arena::create(std::size_t bytes, bool shared) {
  Arena a;
  a.size_ = bytes;
  if (!shared) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return sys_error("mmap of " + std::to_string(bytes) + " bytes");
    a.data_ = static_cast<std::byte*>(p);
    return a;
  }
  // The pid makes the name unique on this host without coordination.
  a.name_ = "/fabric-moe-" + std::to_string(::getpid()) + "-" +
            std::to_string(arena_sequence.fetch_add(1));
  const int fd = ::shm_open(a.name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return sys_error("shm_open " + a.name_);
  a.owner_ = true;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const auto st = sys_error("ftruncate " + a.name_);
    ::close(fd);
    return st;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return sys_error("mmap " + a.name_);
  a.data_ = static_cast<std::byte*>(p);
  return a;
}

Result<Arena> Arena::open(const std::string& name, std::size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return sys_error("shm_open " + name);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return sys_error("mmap " + name);
  Arena a;
  a.data_ = static_cast<std::byte*>(p);
  a.size_ = bytes;
  a.name_ = name;
  return a;
}

void Arena::unlink() noexcept {
  if (owner_) {
    ::shm_unlink(name_.c_str());
    owner_ = false;
  }
}

}  // namespace fabric::moe
