#include "tcp_link.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>

namespace bench {

Link link_over(tools::Fd socket) {
  const int out = ::dup(socket.get());
  if (out < 0) throw std::runtime_error("dup failed");
  return Link(socket.release(), out);
}

Link connect_link(const std::string& host_port) {
  const tools::HostPort server = tools::parse_host_port(host_port);
  fmt::print(stderr, "fabric-bench: connecting to {}\n", server.to_string());
  Link link = link_over(tools::connect_to(server, std::chrono::seconds(3), "fabric-bench"));
  fmt::print(stderr, "fabric-bench: connected to {}\n", server.to_string());
  return link;
}

}  // namespace bench
