#include "shared_region.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

namespace fabric::field {

namespace {
[[noreturn]] void fail(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

std::byte* map(int fd, std::size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail("mmap of a shared region");
  return static_cast<std::byte*>(p);
}
}  // namespace

SharedRegion SharedRegion::create(std::size_t data_bytes) {
  // CLOEXEC: only the peer it is handed to (by an explicit dup2 at spawn) may inherit it.
  const int fd = ::memfd_create("fabric-field-region", MFD_CLOEXEC);
  if (fd < 0) fail("memfd_create");
  const std::size_t size = kHeaderBytes + data_bytes;
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    ::close(fd);
    fail("ftruncate of a shared region");
  }
  return SharedRegion(fd, map(fd, size), size);
}

SharedRegion SharedRegion::adopt(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("fstat of the region fd");
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size <= kHeaderBytes) {
    errno = EINVAL;
    fail("the region fd is smaller than its header");
  }
  return SharedRegion(fd, map(fd, size), size);
}

SharedRegion::SharedRegion(SharedRegion&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

SharedRegion& SharedRegion::operator=(SharedRegion&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedRegion::~SharedRegion() { release(); }

void SharedRegion::release() noexcept {
  if (base_ != nullptr) ::munmap(base_, size_);
  if (fd_ >= 0) ::close(fd_);
  base_ = nullptr;
  fd_ = -1;
  size_ = 0;
}

}  // namespace fabric::field
