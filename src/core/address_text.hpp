#pragma once
// Readable forms of one Domain's provider address, for describe() and logs.

#include <cstddef>
#include <span>
#include <string>

#include "fabric/net_addr.hpp"

namespace fabric {

// "127.0.0.1:41235" (IP providers' sockaddr), "fi_shm://4242/fl-..." (shm's
// name), "gid fe80::1 qpn 0x11" (verbs), else the first bytes in hex.
std::string describe_domain_address(Backend backend, std::span<const std::byte> address);

}  // namespace fabric
