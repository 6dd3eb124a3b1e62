#pragma once
// The tests' control channel is the shared one (src/proc).

#include "fabric_proc/channel.hpp"

namespace fabric::test {
using proc::Channel;
using proc::kChannelTimeout;
}  // namespace fabric::test
