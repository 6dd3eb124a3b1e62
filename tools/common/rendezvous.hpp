#pragma once
// The TCP rendezvous of the tools' server/client modes (fabric-demo,
// fabric-bench): a server listens on HOST:PORT, one client connects, and the
// tools exchange their addresses over that socket. Errors throw
// std::runtime_error naming the address.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace tools {

// A socket, closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  ~Fd();
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  [[nodiscard]] int get() const noexcept { return fd_; }
  int release() noexcept;

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;  // an IPv4 address
  std::uint16_t port = 0;
  [[nodiscard]] std::string to_string() const;
};

// "10.0.0.1:7000"; throws on anything else.
HostPort parse_host_port(const std::string& text);

// Whether `address` is 127.0.0.0/8: IP providers then stay on `lo`.
bool is_loopback(const std::string& address);

// Sets FI_TCP_IFACE / FI_SOCKETS_IFACE (read once, when a provider starts)
// to `iface`, or to "lo" when `iface` is empty and `bind` is a loopback
// address; otherwise leaves them to the user's environment.
void choose_interface(const std::string& bind, const std::string& iface);

class Listener {
 public:
  // Binds `where` (port 0: any free port) and listens.
  explicit Listener(const HostPort& where);
  // The bound address, with the port the kernel picked.
  [[nodiscard]] const HostPort& address() const noexcept { return where_; }
  // Waits up to `timeout` for one client.
  Fd accept(std::chrono::milliseconds timeout);

 private:
  Fd fd_;
  HostPort where_;
};

// Connects to `server`. A refusal is retried for `refused_grace` (the server
// may be starting), with a progress line on stderr each second prefixed by
// `tool`; past it, and on any other error or a SYN unanswered for 10 s, it
// throws at once.
Fd connect_to(const HostPort& server, std::chrono::milliseconds refused_grace,
              std::string_view tool);

}  // namespace tools
