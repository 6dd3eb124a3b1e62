// fabric-weights-sim: the real planner on public MoE models, run through the
// fluid NIC model (docs/weights.md, "Simulator"). Prints one line per model and
// writes JSON with --json.

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fabric/weights/planner.hpp"
#include "fabric/weights/simulator.hpp"
#include "models.hpp"

using namespace fabric::weights;

int main(int argc, char** argv) {
  CLI::App app{"Plan and simulate RL weight updates of public MoE models"};
  std::vector<std::string> only;
  double gbit = 400;
  std::uint64_t chunk_mib = 64, window_mib = 512;
  models::Cluster cl;
  std::string json_path;
  app.add_option("--model", only, "Kimi-K2, DeepSeek-V3, Qwen3-235B (default all)");
  app.add_option("--gbit", gbit, "NIC bandwidth per rank, Gbit/s");
  app.add_option("--chunk-mib", chunk_mib, "planner max_chunk_bytes in MiB");
  app.add_option("--window-mib", window_mib, "bytes in flight per trainer (the watermark), MiB");
  app.add_option("--pp", cl.pp);
  app.add_option("--train-ep", cl.train_ep);
  app.add_option("--fsdp", cl.fsdp);
  app.add_option("--dp", cl.dp);
  app.add_option("--infer-ep", cl.infer_ep);
  app.add_option("--json", json_path, "write the figures here");
  CLI11_PARSE(app, argc, argv);

  nlohmann::json out = nlohmann::json::array();
  const double bw = gbit * 1e9 / 8;
  fmt::print("{:<12} {:>9} {:>9} {:>8} {:>7} {:>9} {:>9} {:>8} {:>7} {:>7}\n", "model", "sim_s", "bound_s",
             "ratio", "writes", "in_GB", "out_GB", "rank0_s", "p2p_x", "plan_s");
  for (const auto& m : models::known_models()) {
    if (!only.empty() && std::find(only.begin(), only.end(), m.name) == only.end()) continue;
    PlanInput in = models::build(m, cl);
    PlannerConfig pc;
    pc.max_chunk_bytes = chunk_mib << 20;
    pc.nic_bytes_per_s = bw;
    const auto t0 = std::chrono::steady_clock::now();
    auto s = plan(in, pc);
    const double plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!s.ok()) {
      fmt::print(stderr, "{}: {}\n", m.name, s.status().to_string());
      return 1;
    }
    SimConfig sc;
    sc.nic_bytes_per_s = bw;
    sc.window_bytes = window_mib << 20;
    auto r = simulate(*s, sc);
    auto base = baseline_estimate(in, *s, bw);
    std::uint64_t max_writes = 0;
    std::vector<std::uint64_t> per(s->trainer_ranks, 0);
    for (const auto& op : s->writes) max_writes = std::max(max_writes, ++per[op.trainer]);
    fmt::print("{:<12} {:>9.3f} {:>9.3f} {:>8.3f} {:>7} {:>9.2f} {:>9.2f} {:>8.1f} {:>7.1f} {:>7.1f}\n", m.name,
               r.time_s, r.bound_s, r.ratio(), max_writes, s->prediction.max_nic_in_bytes / 1e9,
               s->prediction.max_nic_out_bytes / 1e9, base.time_s, base.time_s / r.time_s, plan_s);
    out.push_back({{"model", m.name},
                   {"trainer_ranks", s->trainer_ranks},
                   {"inference_ranks", s->inference_ranks},
                   {"nic_gbit", gbit},
                   {"sim_s", r.time_s},
                   {"group_s", r.group_time_s},
                   {"bound_s", r.bound_s},
                   {"group_bound_s", r.group_bound_s},
                   {"ratio", r.ratio()},
                   {"writes_total", s->writes.size()},
                   {"writes_max_per_trainer", max_writes},
                   {"max_nic_in_bytes", s->prediction.max_nic_in_bytes},
                   {"max_nic_out_bytes", s->prediction.max_nic_out_bytes},
                   {"baseline_s", base.time_s},
                   {"baseline_gather_bytes", base.gather_bytes},
                   {"baseline_broadcast_bytes", base.broadcast_bytes},
                   {"baseline_scatter_bytes", base.scatter_bytes},
                   {"plan_s", plan_s},
                   {"sim_events", r.events}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
