#pragma once
// A multi-process KV cluster for tests: prefill and decode instances (TP groups), one process
// per rank, each with its own engine and host-memory KV cache. Prefill ranks fill their pages
// with a pattern of (request, layer, part, head, token); decode ranks check every byte of every
// page of every layer they received. Every rank reports its outcome counts and whether its
// free-page count returned to where it started.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fabric/kv/layout.hpp"
#include <gtest/gtest.h>

#include "fabric/net_addr.hpp"
#include "fabric_test/child_process.hpp"

namespace fabric::kv::test {

enum class Kind : std::uint8_t { nhd, hnd, cpu, fused, heads_first, mla };

struct Group {
  bool prefill = true;
  std::uint32_t tp = 1;
  Kind kind = Kind::nhd;
  std::uint32_t tokens_per_page = 16;
};

struct Job {
  std::string id;
  std::uint32_t tokens = 0;
  std::uint32_t prefill = 0;  // group index
  std::uint32_t decode = 0;   // group index
  // Cancels (abort storm): the decoder cancels right after asking (1) or once transferring (2);
  // the prefiller cancels after this many layers (0: never).
  std::uint8_t decode_cancel = 0;
  std::uint32_t prefill_cancel_after = 0;
  // Which decoder process asks: 0 the first, 1 its replacement after a restart.
  std::uint32_t epoch = 0;
};

struct Scenario {
  std::string provider = "shm";
  std::uint32_t layers = 3;
  std::uint32_t kv_heads = 4;  // 1 with Kind::mla
  std::uint32_t head_size = 8;
  std::uint32_t elem_bytes = 2;
  std::vector<Group> groups;
  std::vector<Job> jobs;
  // Prefill ranks send each layer in passes of this many tokens (0: whole layers).
  std::uint32_t chunk_tokens = 0;
  std::chrono::milliseconds heartbeat{500};
  // Generous: a loaded 2-core CI machine delays completions; the kill tests compute their
  // detection bounds from it.
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds quarantine{1000};
  std::chrono::milliseconds receiver_timeout{20000};
  // Decode ranks fill the pages of failed jobs with a sentinel and check, when told "check",
  // that nothing landed there since (the fence test).
  bool sentinel_check = false;
  // A prefill rank with this global index stops after this many layers of its first job and
  // reports "stalled", then waits for "resume" (SIGSTOP/kill tests). -1: none.
  int stall_rank = -1;
  std::uint32_t stall_after_layers = 1;
};

// Deterministic jobs: n requests of 1..max_tokens tokens between random prefill/decode groups.
std::vector<Job> random_jobs(const Scenario& s, std::uint32_t n, std::uint32_t max_tokens,
                             std::uint64_t seed, bool abort_storm);

struct RankResult {
  std::uint32_t done = 0, failed = 0, cancelled = 0;
  bool pages_returned = false;
  std::string first_error;
};

class Cluster {
 public:
  explicit Cluster(Scenario s);
  ~Cluster();
  // Spawns every rank, exchanges addresses, connects decoders to every prefill rank.
  ::testing::AssertionResult start();
  // Lets every rank run its jobs.
  ::testing::AssertionResult go();
  // Collects one rank's result (bounded).
  ::testing::AssertionResult result(std::size_t rank, RankResult& out,
                                    std::chrono::milliseconds timeout);
  // Tells every rank still alive to stop, and checks they exit cleanly.
  ::testing::AssertionResult finish(const std::vector<std::size_t>& skip = {});

  [[nodiscard]] std::size_t ranks() const noexcept { return children_.size(); }
  [[nodiscard]] bool is_prefill(std::size_t rank) const;
  fabric::test::ChildProcess& child(std::size_t rank) { return children_.at(rank); }
  // Replaces a dead decode rank by a new process (a new engine, a new address) that connects
  // to every prefill rank and runs the jobs of epoch 1.
  ::testing::AssertionResult restart_decoder(std::size_t rank);

 private:
  Scenario s_;
  std::vector<fabric::test::ChildProcess> children_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> rank_of_;  // (group, rank in group)
  std::vector<NetAddr> prefill_addrs_;
};

}  // namespace fabric::kv::test
