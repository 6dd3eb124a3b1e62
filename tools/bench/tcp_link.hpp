#pragma once
// The control channel of the server/client roles: the same line protocol as
// the forked targets' pipes, over one TCP connection.

#include <chrono>
#include <cstdint>
#include <string>

#include "link.hpp"

namespace bench {

// A listening socket on host:port (port 0: any free port).
class Listener {
 public:
  Listener(const std::string& host, std::uint16_t port);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  // Waits up to `timeout` for one client.
  Link accept(std::chrono::milliseconds timeout);

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// "host:port"; retries refused connections until `timeout` (the server may
// still be starting).
Link connect_link(const std::string& host_port, std::chrono::milliseconds timeout);

}  // namespace bench
