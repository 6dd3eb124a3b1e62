#include "tcp_link.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace bench {

namespace {

sockaddr_in parse_ipv4(const std::string& host, std::uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    throw std::runtime_error(fmt::format("not an IPv4 address: '{}'", host));
  }
  return sa;
}

Link link_over(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const int out = ::dup(fd);
  if (out < 0) {
    ::close(fd);
    throw std::runtime_error("dup failed");
  }
  return Link(fd, out);
}

}  // namespace

Listener::Listener(const std::string& host, std::uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(fmt::format("socket: {}", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa = parse_ipv4(host, port);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd_, 8) != 0) {
    const int err = errno;
    ::close(fd_);
    throw std::runtime_error(fmt::format("listen on {}:{}: {}", host, port, std::strerror(err)));
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.sin_port);
}

Listener::~Listener() {
  if (fd_ >= 0) ::close(fd_);
}

Link Listener::accept(std::chrono::milliseconds timeout) {
  pollfd p{fd_, POLLIN, 0};
  const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (r <= 0) throw std::runtime_error("no client connected in time");
  const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) throw std::runtime_error(fmt::format("accept: {}", std::strerror(errno)));
  return link_over(fd);
}

Link connect_link(const std::string& host_port, std::chrono::milliseconds timeout) {
  const auto colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    throw std::runtime_error(fmt::format("'{}' is not host:port", host_port));
  }
  const auto port = static_cast<std::uint16_t>(std::stoul(host_port.substr(colon + 1)));
  const sockaddr_in sa = parse_ipv4(host_port.substr(0, colon), port);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(fmt::format("socket: {}", std::strerror(errno)));
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0) return link_over(fd);
    const int err = errno;
    ::close(fd);
    if (err != ECONNREFUSED || std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error(fmt::format("connect {}: {}", host_port, std::strerror(err)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace bench
