#include "rendezvous.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

namespace tools {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kSynTimeout{10};

sockaddr_in to_sockaddr(const HostPort& hp) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(hp.port);
  if (::inet_pton(AF_INET, hp.host.c_str(), &sa.sin_addr) != 1) {
    throw std::runtime_error(fmt::format("'{}' is not an IPv4 address", hp.host));
  }
  return sa;
}

Fd tcp_socket() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) throw std::runtime_error(fmt::format("socket: {}", std::strerror(errno)));
  return fd;
}

Fd no_delay(Fd fd) {
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

int Fd::release() noexcept { return std::exchange(fd_, -1); }

std::string HostPort::to_string() const { return fmt::format("{}:{}", host, port); }

HostPort parse_host_port(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw std::runtime_error(fmt::format("'{}' is not HOST:PORT", text));
  }
  char* end = nullptr;
  const unsigned long port = std::strtoul(text.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port > 65535) {
    throw std::runtime_error(fmt::format("'{}' is not HOST:PORT (bad port)", text));
  }
  HostPort hp{text.substr(0, colon), static_cast<std::uint16_t>(port)};
  (void)to_sockaddr(hp);  // the host must be an IPv4 address
  return hp;
}

bool is_loopback(const std::string& address) { return address.starts_with("127."); }

void choose_interface(const std::string& bind, const std::string& iface) {
  const std::string name = !iface.empty() ? iface : is_loopback(bind) ? "lo" : "";
  if (name.empty()) return;
  ::setenv("FI_TCP_IFACE", name.c_str(), 1);
  ::setenv("FI_SOCKETS_IFACE", name.c_str(), 1);
}

Listener::Listener(const HostPort& where) : fd_(tcp_socket()), where_(where) {
  const int one = 1;
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa = to_sockaddr(where);
  if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(fd_.get(), 8) != 0) {
    const int err = errno;
    throw std::runtime_error(fmt::format("cannot listen on {}: {}{}", where.to_string(),
                                         std::strerror(err),
                                         err == EADDRNOTAVAIL
                                             ? " (no local interface has that address)"
                                             : ""));
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  where_.port = ntohs(sa.sin_port);
}

Fd Listener::accept(std::chrono::milliseconds timeout) {
  pollfd p{fd_.get(), POLLIN, 0};
  const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (r <= 0) {
    throw std::runtime_error(
        fmt::format("no client connected to {} within {} s", where_.to_string(),
                    std::chrono::duration_cast<std::chrono::seconds>(timeout).count()));
  }
  Fd fd(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (fd.get() < 0) throw std::runtime_error(fmt::format("accept: {}", std::strerror(errno)));
  return no_delay(std::move(fd));
}

Fd connect_to(const HostPort& server, std::chrono::milliseconds refused_grace,
              std::string_view tool) {
  const sockaddr_in sa = to_sockaddr(server);
  const auto start = Clock::now();
  auto next_report = start + std::chrono::seconds(1);
  for (;;) {
    Fd fd = tcp_socket();
    // Linux bounds a blocking connect by the send timeout.
    const timeval syn{kSynTimeout.count(), 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &syn, sizeof syn);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0) {
      return no_delay(std::move(fd));
    }
    const int err = errno;
    const auto now = Clock::now();
    if (err == EINPROGRESS || err == ETIMEDOUT) {
      throw std::runtime_error(fmt::format("connect {}: no answer within {} s (host down, or a "
                                           "firewall drops the port?)",
                                           server.to_string(), kSynTimeout.count()));
    }
    if (err != ECONNREFUSED) {
      throw std::runtime_error(fmt::format("connect {}: {}", server.to_string(), std::strerror(err)));
    }
    if (now - start >= refused_grace) {
      throw std::runtime_error(fmt::format(
          "connect {}: connection refused: nothing listens there (start the server role, "
          "--listen {}, on that host first)",
          server.to_string(), server.to_string()));
    }
    if (now >= next_report) {
      fmt::print(stderr, "{}: {} refused the connection; retrying ({} of {} s)\n", tool,
                 server.to_string(),
                 std::chrono::duration_cast<std::chrono::seconds>(now - start).count(),
                 std::chrono::duration_cast<std::chrono::seconds>(refused_grace).count());
      next_report += std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace tools
