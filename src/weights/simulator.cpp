#include "fabric/weights/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fabric::weights {
namespace {

struct Flow {
  std::uint32_t src_link;  // trainer t -> link t
  std::uint32_t dst_link;  // inference r -> link T + r
  double remaining;
  double rate = 0;
  std::uint32_t trainer;
  std::uint64_t length;
};

// Max-min fair rates by progressive filling: the link with the smallest fair
// share fixes the rate of its flows, which then leave every link they use.
void fair_rates(std::vector<Flow>& flows, std::size_t links, double capacity) {
  std::vector<double> cap(links, capacity);
  std::vector<std::uint32_t> count(links, 0);
  std::vector<std::vector<std::uint32_t>> on(links);
  for (std::uint32_t i = 0; i < flows.size(); ++i) {
    ++count[flows[i].src_link];
    ++count[flows[i].dst_link];
    on[flows[i].src_link].push_back(i);
    on[flows[i].dst_link].push_back(i);
  }
  std::vector<char> fixed(flows.size(), 0);
  std::size_t left = flows.size();
  while (left > 0) {
    double share = std::numeric_limits<double>::infinity();
    for (std::size_t l = 0; l < links; ++l) {
      if (count[l] > 0) share = std::min(share, cap[l] / count[l]);
    }
    const double level = share * (1 + 1e-12);
    for (std::size_t l = 0; l < links; ++l) {
      if (count[l] == 0 || cap[l] / count[l] > level) continue;
      for (auto i : on[l]) {
        if (fixed[i]) continue;
        fixed[i] = 1;
        --left;
        flows[i].rate = share;
        for (auto k : {flows[i].src_link, flows[i].dst_link}) {
          cap[k] = std::max(0.0, cap[k] - share);
          --count[k];
        }
      }
    }
  }
}

}  // namespace

SimResult simulate(const Schedule& s, const SimConfig& cfg) {
  SimResult res;
  const std::uint32_t T = s.trainer_ranks;
  const std::size_t links = static_cast<std::size_t>(T) + s.inference_ranks;
  const auto G = std::max<std::size_t>(1, s.group_names.size());
  for (std::size_t g = 0; g < G; ++g) {
    // A chunk's scales follow its data to the same receiver: one flow.
    struct Item {
      std::uint32_t inference, chunk;
      std::uint64_t length;
    };
    std::vector<std::vector<Item>> queue(T);
    for (const auto& op : s.writes) {
      if (op.group != g) continue;
      auto& q = queue[op.trainer];
      if (op.scale && !q.empty() && q.back().chunk == op.chunk && q.back().inference == op.inference) {
        q.back().length += op.length;
      } else {
        q.push_back({op.inference, op.chunk, op.length});
      }
    }
    std::vector<std::size_t> next(T, 0);
    std::vector<std::uint64_t> in_flight(T, 0);
    std::vector<Flow> flows;
    auto admit = [&](std::uint32_t t) {
      while (next[t] < queue[t].size()) {
        const Item* op = &queue[t][next[t]];
        if (in_flight[t] > 0 && in_flight[t] + op->length > cfg.window_bytes) break;
        in_flight[t] += op->length;
        flows.push_back({t, T + op->inference, static_cast<double>(op->length), 0, t, op->length});
        ++next[t];
      }
    };
    for (std::uint32_t t = 0; t < T; ++t) admit(t);
    double now = 0;
    while (!flows.empty()) {
      fair_rates(flows, links, cfg.nic_bytes_per_s);
      double dt = std::numeric_limits<double>::infinity();
      for (const auto& f : flows) dt = std::min(dt, f.rate > 0 ? f.remaining / f.rate : 0.0);
      now += dt;
      ++res.events;
      std::vector<std::uint32_t> touched;
      std::vector<Flow> still;
      still.reserve(flows.size());
      for (auto& f : flows) {
        f.remaining -= f.rate * dt;
        // Finished, up to rounding (a byte, or a part in 1e9 of the write).
        if (f.remaining <= std::max(1.0, 1e-9 * static_cast<double>(f.length))) {
          in_flight[f.trainer] -= f.length;
          touched.push_back(f.trainer);
        } else {
          still.push_back(f);
        }
      }
      flows = std::move(still);
      for (auto t : touched) admit(t);
    }
    now += cfg.barrier_s;
    res.group_time_s.push_back(now);
    res.time_s += now;
  }
  Schedule copy_for_bound;  // compute_bound only reads writes and counts
  copy_for_bound.trainer_ranks = s.trainer_ranks;
  copy_for_bound.inference_ranks = s.inference_ranks;
  copy_for_bound.group_names = s.group_names;
  copy_for_bound.writes = s.writes;
  compute_bound(copy_for_bound, cfg.nic_bytes_per_s);
  res.bound_s = copy_for_bound.prediction.bound_s;
  res.group_bound_s = copy_for_bound.prediction.group_bound_s;
  return res;
}

BaselineEstimate baseline_estimate(const PlanInput& in, const Schedule& s, double bw) {
  BaselineEstimate b;
  std::vector<std::uint32_t> sizes;
  for (const auto& d : in.trainer.mesh.dims) sizes.push_back(d.size);
  const auto zero = in.trainer.mesh.coords(0);
  for (const auto& p : in.trainer.params) {
    std::int64_t numel = 1;
    for (auto e : p.shape) numel *= e;
    auto lb = local_box(p.shape, p.placements, sizes, zero);
    const std::int64_t own = lb.held ? lb.box.numel() : 0;
    b.gather_bytes += static_cast<std::uint64_t>(numel - own) * dtype_size(p.dtype);
  }
  for (const auto& t : s.targets) {
    std::int64_t numel = 1;
    for (auto e : t.shape) numel *= e;
    b.broadcast_bytes += static_cast<std::uint64_t>(numel) * dtype_size(t.dtype);
    if (t.quant != Quant::none) {
      // Scales: one float per block or per row.
      std::int64_t sn = 1;
      const std::size_t n = t.shape.size();
      for (std::size_t d = 0; d + 2 < n; ++d) sn *= t.shape[d];
      if (t.quant == Quant::fp8_block128) {
        sn *= ((t.shape[n - 2] + 127) / 128) * ((t.shape[n - 1] + 127) / 128);
      } else {
        sn *= t.shape[n - 2];
      }
      b.broadcast_bytes += static_cast<std::uint64_t>(sn) * 4;
    }
  }
  for (std::uint32_t r = 1; r < s.inference_ranks; ++r) {
    for (const auto& e : s.arenas[r]) b.scatter_bytes += e.bytes + e.scale_bytes;
  }
  b.time_s = static_cast<double>(b.gather_bytes + b.broadcast_bytes + b.scatter_bytes) / bw;
  return b;
}

}  // namespace fabric::weights
