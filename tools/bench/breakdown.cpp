#include "breakdown.hpp"

#include <algorithm>

#include "common/stats.hpp"

namespace bench {

namespace {

StageFigures stage(std::vector<std::uint64_t> v) {
  StageFigures f;
  if (v.empty()) return f;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return tools::quantile(v, q); };
  f.p50_ns = at(0.50);
  f.p90_ns = at(0.90);
  f.p99_ns = at(0.99);
  f.p999_ns = at(0.999);
  return f;
}

}  // namespace

Breakdown summarize_breakdown(const std::vector<fabric::PostTiming>& timings,
                              std::vector<std::uint64_t> raw_post_calls) {
  std::vector<std::uint64_t> a, b, c, d, e;
  for (const auto& t : timings) {
    a.push_back(t.enqueued - t.called);
    b.push_back(t.picked_up - t.enqueued);
    c.push_back(t.first_post - t.picked_up);
    d.push_back(t.last_post - t.first_post);
    e.push_back(t.first_post - t.called);
  }
  Breakdown out;
  out.samples = timings.size();
  out.call_to_enqueued = stage(std::move(a));
  out.enqueued_to_picked = stage(std::move(b));
  out.picked_to_first = stage(std::move(c));
  out.first_to_last = stage(std::move(d));
  out.call_to_first = stage(std::move(e));
  if (!raw_post_calls.empty()) out.raw_post_call = stage(std::move(raw_post_calls));
  return out;
}

}  // namespace bench
