#pragma once
// The control channel of the server/client roles: the same line protocol as
// the forked targets' pipes, over one TCP connection (tools/common).

#include <string>

#include "common/rendezvous.hpp"
#include "link.hpp"

namespace bench {

// A Link reading and writing the connected socket.
Link link_over(tools::Fd socket);

// "host:port": connects, saying so on stderr; a refusal fails within seconds.
Link connect_link(const std::string& host_port);

}  // namespace bench
