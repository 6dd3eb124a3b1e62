#pragma once
// Runs one forked process per rank and relays their all_gathers through the
// parent, the way a launcher's store would. A rank that dies leaves the
// relay; later gathers go on among the ranks still there (survivors rebuild).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fabric/moe/group.hpp"
#include "fabric_test/channel.hpp"
#include "fabric_test/child_process.hpp"

namespace fabric::moe::test {

struct RankOutcome {
  fabric::test::ChildExit exit;
  std::string report;  // what the rank sent with report() (its last words)
};

// body(rank, channel) runs in a child per rank; returns its exit code.
std::vector<RankOutcome> run_ranks(std::uint32_t world_size,
                                   const std::function<int(std::uint32_t, fabric::test::Channel&)>& body,
                                   std::chrono::seconds timeout);

// The AllGather a rank gives MoeGroup::create: through the parent's relay.
AllGather relay_all_gather(fabric::test::Channel& channel);

// A rank's final words for the parent (e.g. an error text); at most once.
bool report(fabric::test::Channel& channel, const std::string& text);

}  // namespace fabric::moe::test
