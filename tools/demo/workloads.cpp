#include "workloads.hpp"

#include <fabric/imm_counts.hpp>

#include <algorithm>
#include <cmath>

namespace demo {

std::string_view op_name(Op op) {
  return op == Op::single_write ? "single_write" : "paged_write";
}

std::vector<Workload> all_workloads() {
  std::vector<Workload> list;
  for (std::uint64_t kib : {4, 16, 64, 256, 1024, 4096, 16384, 65536}) {
    list.push_back({Op::single_write, kib << 10, 1});
  }
  // 1024 pages of at most 64 KiB fill the 64 MiB region exactly.
  for (std::uint64_t kib : {1, 2, 4, 8, 16, 32, 64}) {
    list.push_back({Op::paged_write, kib << 10, 1024});
  }
  return list;
}

std::uint64_t imms_per_request(const Workload& w, std::size_t num_domains) {
  if (w.op == Op::paged_write) return fabric::paged_writes_imm_count(w.count);
  // The engine's rule; a demo workload always has at least one Domain.
  return fabric::single_write_imm_count(w.size, static_cast<std::uint32_t>(num_domains)).value();
}

std::uint32_t window_for(const Workload& w) {
  constexpr std::uint64_t kInFlightBytes = 128ULL << 20;
  const std::uint64_t cap = w.op == Op::single_write ? 64 : 8;
  return static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(kInFlightBytes / w.bytes_per_request(), 2, cap));
}

Budget budget_for(bool quick) {
  if (quick) return {0.05, 128ULL << 20, 20'000, 2};
  // Fifteen workloads at about a second each keeps the demo well under a minute.
  return {0.8, 4ULL << 30, 400'000, 8};
}

std::uint64_t warmup_requests(const Workload& w, const Budget& budget) {
  const std::uint64_t by_bytes = std::max<std::uint64_t>(1, budget.max_bytes / 8 / w.bytes_per_request());
  return std::clamp<std::uint64_t>(std::min<std::uint64_t>(4ULL * window_for(w), by_bytes), 2,
                                   1'000);
}

std::uint64_t timed_requests(const Workload& w, const Budget& budget, double warmup_rate) {
  const std::uint64_t by_bytes = budget.max_bytes / w.bytes_per_request();
  const std::uint64_t by_ops = budget.max_ops / w.ops_per_request();
  const std::uint64_t cap = std::max(budget.min_requests, std::min(by_bytes, by_ops));
  const double wanted = std::ceil(warmup_rate * budget.seconds_per_workload);
  const std::uint64_t by_time = wanted >= static_cast<double>(cap)
                                    ? cap
                                    : static_cast<std::uint64_t>(wanted);
  return std::clamp(by_time, budget.min_requests, cap);
}

}  // namespace demo
