#include "tcp_link.hpp"

#include <fmt/format.h>

#include <chrono>

namespace bench {

Link link_over(tools::Fd socket) { return Link(fabric::proc::Channel(socket.release())); }

Link connect_link(const std::string& host_port) {
  const tools::HostPort server = tools::parse_host_port(host_port);
  fmt::print(stderr, "fabric-bench: connecting to {}\n", server.to_string());
  Link link = link_over(tools::connect_to(server, std::chrono::seconds(3), "fabric-bench"));
  fmt::print(stderr, "fabric-bench: connected to {}\n", server.to_string());
  return link;
}

}  // namespace bench
