#pragma once
// A peer's registered memory that this process maps too (a memfd both processes map): the test
// reads what landed in a peer even after the peer was SIGKILLed or while it is SIGSTOPped,
// so "ok" can be checked against the bytes themselves, never against the peer's word.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

namespace fabric::field {

// The first kHeaderBytes of every region: what the peer's receive callback saw.
inline constexpr std::size_t kHeaderBytes = 64 * 1024;
struct RegionHeader {
  std::atomic<std::uint64_t> messages_ok;
  std::atomic<std::uint64_t> messages_bad;
  // Bit s is set once the SEND with sequence number s arrived intact.
  static constexpr std::size_t kSeenWords = kHeaderBytes / 8 - 2;
  static constexpr std::uint64_t kMaxSends = kSeenWords * 64;
  std::atomic<std::uint64_t> seen[kSeenWords];
  [[nodiscard]] bool was_seen(std::uint64_t seq) const {
    return (seen[seq / 64].load(std::memory_order_acquire) >> (seq % 64)) & 1u;
  }
};
static_assert(sizeof(RegionHeader) == kHeaderBytes);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared between processes");

class SharedRegion {
 public:
  // A new zeroed region with `data_bytes` after the header. Throws std::system_error.
  static SharedRegion create(std::size_t data_bytes);
  // Maps the region behind `fd` (the peer program's side); takes the fd. Throws.
  static SharedRegion adopt(int fd);

  SharedRegion() = default;
  SharedRegion(SharedRegion&& other) noexcept;
  SharedRegion& operator=(SharedRegion&& other) noexcept;
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;
  ~SharedRegion();

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] RegionHeader& header() const noexcept {
    return *reinterpret_cast<RegionHeader*>(base_);
  }
  [[nodiscard]] std::span<std::byte> data() const noexcept {
    return {base_ + kHeaderBytes, size_ - kHeaderBytes};
  }

 private:
  SharedRegion(int fd, std::byte* base, std::size_t size) : fd_(fd), base_(base), size_(size) {}
  void release() noexcept;

  int fd_ = -1;
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace fabric::field
