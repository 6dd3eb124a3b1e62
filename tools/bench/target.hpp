#pragma once
// The target role: holds the destination buffer and answers the initiator's
// commands (count immediates, checksum a range, answer pings) until "bye".

#include "link.hpp"
#include "side.hpp"

namespace bench {

int run_target(const SideConfig& cfg, Link& link);

}  // namespace bench
