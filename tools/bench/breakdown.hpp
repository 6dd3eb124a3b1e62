#pragma once
// The engine's posting path, stage by stage (fabric-bench --breakdown):
// application call → enqueued → picked up by the worker → first WRITE posted
// → last WRITE posted, as percentiles over every request of a row.

#include <cstdint>
#include <optional>
#include <vector>

#include <fabric/post_timing.hpp>

namespace bench {

struct StageFigures {
  double p50_ns = 0, p90_ns = 0, p99_ns = 0, p999_ns = 0;
};

struct Breakdown {
  std::uint64_t samples = 0;
  StageFigures call_to_enqueued;     // validation, planning, the queue push
  StageFigures enqueued_to_picked;   // waiting in the queue for the worker
  StageFigures picked_to_first;      // worker: start → first post accepted
  StageFigures first_to_last;        // worker: the remaining posts
  StageFigures call_to_first;        // submit → first post, end to end
  // The raw loop's fi_writedata calls in the same row's raw rounds: the provider's own part,
  // the floor under call_to_first. None for rows without a raw loop or raw post stamps.
  std::optional<StageFigures> raw_post_call;
};

// `raw_post_calls`: ns per accepted raw post (WriteRound::post_call_ns); empty for none.
Breakdown summarize_breakdown(const std::vector<fabric::PostTiming>& timings,
                              std::vector<std::uint64_t> raw_post_calls = {});

}  // namespace bench
