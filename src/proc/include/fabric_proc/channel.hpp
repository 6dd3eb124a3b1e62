#pragma once
// A control channel between a process and its forked child (or a peer over
// TCP): length-prefixed frames over one stream socket. Every operation is bounded by
// a deadline, so a dead or stuck peer turns into a clear error, never a hang.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "fabric/memory.hpp"
#include "fabric/net_addr.hpp"
#include "fabric/status.hpp"

namespace fabric::proc {

// Long enough for a slow provider under a loaded 2-core CI box, short enough
// that a lost peer fails the test well before ctest's own timeout.
inline constexpr std::chrono::milliseconds kChannelTimeout{30000};

class Channel {
 public:
  // A frame larger than this is taken as a corrupt stream.
  static constexpr std::uint32_t kMaxFrameBytes = 256u << 20;

  Channel() = default;
  explicit Channel(int fd) noexcept : fd_(fd) {}  // takes ownership
  Channel(Channel&& other) noexcept;
  Channel& operator=(Channel&& other) noexcept;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel();

  [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }
  // The socket, still owned here (e.g. to hand it to an exec'd child).
  [[nodiscard]] int native_handle() const noexcept { return fd_; }
  void close() noexcept;

  // False when the peer is gone or the deadline passed; last_error() says which.
  bool send_bytes(std::span<const std::byte> bytes,
                  std::chrono::milliseconds timeout = kChannelTimeout);
  bool send_string(std::string_view text, std::chrono::milliseconds timeout = kChannelTimeout);
  // nullopt on timeout, EOF or a corrupt frame; last_error() says which.
  std::optional<std::vector<std::byte>> recv_bytes(
      std::chrono::milliseconds timeout = kChannelTimeout);
  std::optional<std::string> recv_string(std::chrono::milliseconds timeout = kChannelTimeout);
  // Receives one string and checks it equals `token` (protocol checkpoints).
  bool expect(std::string_view token, std::chrono::milliseconds timeout = kChannelTimeout);

  template <typename T>
  requires std::is_trivially_copyable_v<T>
  bool send_pod(const T& value, std::chrono::milliseconds timeout = kChannelTimeout) {
    return send_bytes(std::as_bytes(std::span<const T, 1>(&value, 1)), timeout);
  }
  template <typename T>
  requires(std::is_trivially_copyable_v<T>&& std::is_default_constructible_v<T>)
      std::optional<T> recv_pod(std::chrono::milliseconds timeout = kChannelTimeout) {
    auto frame = recv_bytes(timeout);
    if (!frame) return std::nullopt;
    if (frame->size() != sizeof(T)) {
      set_error("frame of " + std::to_string(frame->size()) + " bytes where a " +
                std::to_string(sizeof(T)) + "-byte value was expected");
      return std::nullopt;
    }
    T value{};
    std::memcpy(&value, frame->data(), sizeof(T));
    return value;
  }

  // NetAddr and MrDesc travel in their own wire formats, so the harness also
  // exercises encode()/decode() across a process boundary.
  bool send_addr(const NetAddr& addr, std::chrono::milliseconds timeout = kChannelTimeout);
  std::optional<NetAddr> recv_addr(std::chrono::milliseconds timeout = kChannelTimeout);
  bool send_desc(const MrDesc& desc, std::chrono::milliseconds timeout = kChannelTimeout);
  std::optional<MrDesc> recv_desc(std::chrono::milliseconds timeout = kChannelTimeout);
  // Code and message, so a child can report a library Status verbatim.
  bool send_status(const Status& status, std::chrono::milliseconds timeout = kChannelTimeout);
  std::optional<Status> recv_status(std::chrono::milliseconds timeout = kChannelTimeout);

  [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }

 private:
  void set_error(std::string message) { last_error_ = std::move(message); }
  bool write_all(const std::byte* data, std::size_t len,
                 std::chrono::steady_clock::time_point deadline);
  bool read_all(std::byte* data, std::size_t len, std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string last_error_;
};

}  // namespace fabric::proc
