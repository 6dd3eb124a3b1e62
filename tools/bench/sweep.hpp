#pragma once
// Runs every requested op and size against one forked target, engine and raw
// back to back for each size, and verifies the landed bytes after each.

#include <optional>
#include <string>
#include <vector>

#include <fabric/metrics.hpp>

#include "breakdown.hpp"
#include "options.hpp"
#include "stats.hpp"

namespace bench {

struct Row {
  std::string op;
  std::uint64_t size = 0;   // bytes per write, or page size
  std::uint64_t count = 0;  // pages per batch (paged), 1 otherwise
  std::uint64_t iterations = 0;
  // The best measured round (BW peak, and that round's msg rate and latencies).
  Figures engine, raw;
  bool verified = false;
  bool has_raw = true;  // sendrecv has no raw loop yet
  // scatter only: ns to post one scatter (engine: the submit call).
  double engine_post_p50_ns = -1, engine_post_p99_ns = -1;
  double raw_post_p50_ns = -1, raw_post_p99_ns = -1;
  // --breakdown: the engine's posting path over the row's measured rounds.
  std::optional<Breakdown> breakdown = std::nullopt;
  // BW average: every measured round's bytes over their summed time.
  double engine_avg_gbps = 0, raw_avg_gbps = 0;
  // single_write_bidir: each direction of the best round; engine.gbps is
  // their sum, engine.ops_per_s and latencies the initiator's requests.
  double out_gbps = 0, in_gbps = 0;
  // --metrics-ab, write rows: the best round of the initiator's metrics-off engine, whose rounds
  // alternate with `engine`'s (metrics on) and raw's, and its BW average.
  std::optional<Figures> unmetered = std::nullopt;
  double unmetered_avg_gbps = 0;
};

struct SweepResult {
  std::string provider;  // libfabric's name for what ran ("shm", "tcp;ofi_rxm")
  bool delivery_complete = false;
  std::vector<Row> rows;
  // --metrics: the initiator engine's snapshot, taken after the last row.
  std::optional<fabric::EngineMetrics> metrics;
};

SweepResult run_sweep(const Options& opt);
// The server role: waits for one client on opt.listen, then is its target.
int serve(const Options& opt);

}  // namespace bench
