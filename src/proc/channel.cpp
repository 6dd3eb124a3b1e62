#include "fabric_proc/channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace fabric::proc {

namespace {
using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1'000'000 ? 1'000'000 : static_cast<int>(left);
}

// Waits for `events` on fd until the deadline. 1: ready, 0: deadline, -1: error.
int wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return 1;
    if (rc == 0) return 0;
    if (errno != EINTR) return -1;
  }
}
}  // namespace

Channel::Channel(Channel&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), last_error_(std::move(other.last_error_)) {}

Channel& Channel::operator=(Channel&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    last_error_ = std::move(other.last_error_);
  }
  return *this;
}

Channel::~Channel() { close(); }

void Channel::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Channel::write_all(const std::byte* data, std::size_t len, Clock::time_point deadline) {
  while (len > 0) {
    const int ready = wait_fd(fd_, POLLOUT, deadline);
    if (ready == 0) {
      set_error("channel send timed out (peer not reading)");
      return false;
    }
    if (ready < 0) {
      set_error(std::string("channel poll failed: ") + std::strerror(errno));
      return false;
    }
    // MSG_NOSIGNAL: a vanished peer must be an error value, not SIGPIPE.
    const ssize_t n = ::send(fd_, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      set_error(std::string("channel send failed: ") + std::strerror(errno));
      return false;
    }
    data += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

bool Channel::read_all(std::byte* data, std::size_t len, Clock::time_point deadline) {
  while (len > 0) {
    const int ready = wait_fd(fd_, POLLIN, deadline);
    if (ready == 0) {
      set_error("channel receive timed out");
      return false;
    }
    if (ready < 0) {
      set_error(std::string("channel poll failed: ") + std::strerror(errno));
      return false;
    }
    const ssize_t n = ::recv(fd_, data, len, MSG_DONTWAIT);
    if (n == 0) {
      set_error("channel closed by peer (did it exit or crash?)");
      return false;
    }
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      set_error(std::string("channel receive failed: ") + std::strerror(errno));
      return false;
    }
    data += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

bool Channel::send_bytes(std::span<const std::byte> bytes, std::chrono::milliseconds timeout) {
  if (fd_ < 0) {
    set_error("channel is closed");
    return false;
  }
  if (bytes.size() > kMaxFrameBytes) {
    set_error("frame of " + std::to_string(bytes.size()) + " bytes exceeds the channel limit");
    return false;
  }
  const auto deadline = Clock::now() + timeout;
  const auto len = static_cast<std::uint32_t>(bytes.size());
  std::byte header[4];
  std::memcpy(header, &len, sizeof len);
  return write_all(header, sizeof header, deadline) &&
         write_all(bytes.data(), bytes.size(), deadline);
}

bool Channel::send_string(std::string_view text, std::chrono::milliseconds timeout) {
  return send_bytes(std::as_bytes(std::span<const char>(text.data(), text.size())), timeout);
}

std::optional<std::vector<std::byte>> Channel::recv_bytes(std::chrono::milliseconds timeout) {
  if (fd_ < 0) {
    set_error("channel is closed");
    return std::nullopt;
  }
  const auto deadline = Clock::now() + timeout;
  std::byte header[4];
  if (!read_all(header, sizeof header, deadline)) return std::nullopt;
  std::uint32_t len = 0;
  std::memcpy(&len, header, sizeof len);
  if (len > kMaxFrameBytes) {
    set_error("corrupt channel stream: frame length " + std::to_string(len));
    return std::nullopt;
  }
  std::vector<std::byte> frame(len);
  if (!read_all(frame.data(), frame.size(), deadline)) return std::nullopt;
  return frame;
}

std::optional<std::string> Channel::recv_string(std::chrono::milliseconds timeout) {
  auto frame = recv_bytes(timeout);
  if (!frame) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(frame->data()), frame->size());
}

bool Channel::expect(std::string_view token, std::chrono::milliseconds timeout) {
  auto got = recv_string(timeout);
  if (!got) {
    last_error_ = "waiting for \"" + std::string(token) + "\": " + last_error_;
    return false;
  }
  if (*got != token) {
    set_error("expected \"" + std::string(token) + "\" from peer, got \"" + *got + "\"");
    return false;
  }
  return true;
}

bool Channel::send_addr(const NetAddr& addr, std::chrono::milliseconds timeout) {
  return send_bytes(addr.encode(), timeout);
}

std::optional<NetAddr> Channel::recv_addr(std::chrono::milliseconds timeout) {
  auto frame = recv_bytes(timeout);
  if (!frame) return std::nullopt;
  auto addr = NetAddr::decode(*frame);
  if (!addr) {
    set_error("received NetAddr does not decode: " + addr.status().to_string());
    return std::nullopt;
  }
  return std::move(addr).value();
}

bool Channel::send_desc(const MrDesc& desc, std::chrono::milliseconds timeout) {
  return send_bytes(desc.encode(), timeout);
}

std::optional<MrDesc> Channel::recv_desc(std::chrono::milliseconds timeout) {
  auto frame = recv_bytes(timeout);
  if (!frame) return std::nullopt;
  auto desc = MrDesc::decode(*frame);
  if (!desc) {
    set_error("received MrDesc does not decode: " + desc.status().to_string());
    return std::nullopt;
  }
  return std::move(desc).value();
}

bool Channel::send_status(const Status& status, std::chrono::milliseconds timeout) {
  std::vector<std::byte> frame;
  frame.push_back(static_cast<std::byte>(status.code()));
  const auto* msg = reinterpret_cast<const std::byte*>(status.message().data());
  frame.insert(frame.end(), msg, msg + status.message().size());
  return send_bytes(frame, timeout);
}

std::optional<Status> Channel::recv_status(std::chrono::milliseconds timeout) {
  auto frame = recv_bytes(timeout);
  if (!frame) return std::nullopt;
  if (frame->empty()) {
    set_error("empty frame where a Status was expected");
    return std::nullopt;
  }
  const auto code = static_cast<Errc>((*frame)[0]);
  if (code == Errc::ok) return Status::success();
  return Status(code,
                std::string(reinterpret_cast<const char*>(frame->data()) + 1, frame->size() - 1));
}

}  // namespace fabric::proc
