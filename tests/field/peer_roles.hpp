#pragma once
// The peer program (fabric_field_peer): a fresh process, exec'd by the field tests, that runs
// one engine in one role and talks to the test over the Channel on fd 3. A fresh program rather
// than a fork, so the test may start peers while its own engine threads run.

#include <chrono>
#include <cstdint>
#include <string>

#include "fabric/engine.hpp"
#include "fabric_proc/channel.hpp"

namespace fabric::field {

inline constexpr int kChannelFd = 3;
inline constexpr int kRegionFd = 4;

// The parent exchanges these over the Channel with each role.
struct WriterBatch {
  std::uint32_t count = 0;   // WRITEs posted back to back, write i into dst slot i
  std::uint64_t length = 0;  // bytes each
};
struct MeshReport {
  std::uint64_t connect_ms = 0;  // from receiving the peer list to every pair done
};

// Waits for "quit", stops the engine, answers "bye": a role's end.
int stop_on_quit(proc::Channel& ch, TransferEngine& engine);

// A target: registers the region on kRegionFd, counts SENDs into its header, sends its MrDesc,
// then serves until "quit".
int run_target(proc::Channel& ch, const EngineConfig& config);
// A writer: receives a destination and a WriterBatch, posts it, reports each WRITE's Status.
int run_writer(proc::Channel& ch, const EngineConfig& config);
// One life after another in this process: an engine registers the region on kRegionFd and
// sends its MrDesc; on "next" it stops and a new one (a new NetAddr) takes its place; on "quit"
// it stops and the process answers "bye". Each life is a peer incarnation to the test, at the
// cost of an engine start rather than a process start.
int run_lives(proc::Channel& ch, const EngineConfig& config);
// One engine of a mesh: sends its MrDesc, receives everyone's, sends an immediate to each other
// engine and waits for one from each.
int run_mesh(proc::Channel& ch, const EngineConfig& config);

}  // namespace fabric::field
