#pragma once
// What the field cases share: the provider parameter, the survivor's resource readings and the
// restart of one traffic slot.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>

#include "fabric/fabric.hpp"
#include "field_config.hpp"
#include "incarnation.hpp"
#include "traffic.hpp"

namespace fabric::field {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The parameter is the provider: "shm", or "tcp" (tcp;ofi_rxm on 127.0.0.1).
class FieldTest : public ::testing::TestWithParam<std::string> {
 protected:
  [[nodiscard]] const std::string& provider() const { return GetParam(); }
  [[nodiscard]] bool shm() const { return provider() == "shm"; }
  // This process's engine on the provider; nullptr after recording why it could not start.
  [[nodiscard]] std::unique_ptr<TransferEngine> make_engine(
      std::chrono::milliseconds request_timeout = kRequestTimeout) const;
};

#define FABRIC_FIELD_PROVIDERS(Suite)                                         \
  INSTANTIATE_TEST_SUITE_P(Providers, Suite, ::testing::Values("shm", "tcp"), \
                           [](const auto& info) { return info.param; })

// This process's resident memory (KiB) and open descriptors.
long rss_kib();
long open_fds();

std::int64_t ms(Clock::duration d);

// What restarts of peers came to, summed over the incarnations that were retired.
struct Lives {
  std::uint64_t killed = 0;
  std::uint64_t quit = 0;
  // shm kills turned into quits: a request to the peer had expired and the provider still held
  // its WRITE past the bound (a kill then would stop shm's later completions).
  std::uint64_t kills_spared = 0;
  std::uint64_t ok = 0;
  std::uint64_t failed = 0;
  std::uint64_t wrong = 0;
  std::uint64_t unexpected = 0;  // failures while the peer ran
  std::string first_problem;
};

// Restarts of the peers of a Traffic: the next incarnation is started ahead (its start-up
// overlaps the traffic), the old one is killed or quits, and its requests settle in the
// background until it is retired into Lives.
class Restarter {
 public:
  Restarter(Traffic& traffic, std::string provider) : traffic_(traffic), provider_(std::move(provider)) {}

  // A started, not yet connected incarnation (call from the test's main thread).
  std::shared_ptr<Incarnation> start();
  // Puts `next` (connected) in `slot` and ends the slot's previous peer: SIGKILL when `kill`,
  // else a clean quit. On tcp a kill lands under traffic; on shm the slot is drained first, and
  // the engine must hold nothing of requests it already reported (an expired request's WRITE
  // may still be in the provider): a peer killed with a WRITE outstanding stops shm's later
  // completions (libfabric#9853). Where the provider keeps one past the bound, the peer quits.
  ::testing::AssertionResult restart(std::size_t slot, std::shared_ptr<Incarnation> next, bool kill);
  // Retires the incarnations whose requests have all completed; with `all`, waits (bounded by
  // request_timeout + margin each) for the rest. False when one never settled.
  ::testing::AssertionResult settle(bool all);
  [[nodiscard]] const Lives& lives() const { return lives_; }

 private:
  void retire(Incarnation& peer);

  Traffic& traffic_;
  std::string provider_;
  std::uint64_t next_id_ = 0;
  std::deque<std::pair<std::shared_ptr<Incarnation>, Clock::time_point>> retiring_;
  Lives lives_;
};

// The engine's metrics() against what the traffic counted, kind by kind.
::testing::AssertionResult metrics_match(const TransferEngine& engine, const Traffic& traffic);

}  // namespace fabric::field
