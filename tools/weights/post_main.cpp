// fabric-weights-post: how long posting one update's WRITEs takes on the trainer's thread
// (the paper: 1,144 writes in 26 ms). One trainer and one inference engine in this process;
// N parameters of one chunk each, so the update is N writes. Prints JSON.

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "fabric/engine.hpp"
#include "fabric/weights/executor.hpp"
#include "fabric/weights/planner.hpp"

using namespace fabric;
using namespace fabric::weights;

int main(int argc, char** argv) {
  CLI::App app{"Time the posting of one weight update's writes"};
  std::uint32_t writes = 1144, rows = 16, reps = 5;
  std::string provider = "shm";
  app.add_option("--writes", writes);
  app.add_option("--rows", rows, "rows of 256 bf16 per parameter");
  app.add_option("--reps", reps, "updates to run (the best is reported)");
  app.add_option("--provider", provider);
  CLI11_PARSE(app, argc, argv);

  PlanInput in;
  in.trainer.mesh.dims = {{"dp", 1}};
  in.trainer.groups = {{"all", {false}}};
  in.inference.mesh.dims = {{"tp", 1}};
  for (std::uint32_t i = 0; i < writes; ++i) {
    const std::string name = fmt::format("p{}", i);
    in.trainer.params.push_back({name, {rows, 256}, DType::bf16, {Placement::replicate()}, 0});
    in.inference.params.push_back({name, {rows, 256}, DType::bf16, Quant::none, {Placement::replicate()}});
    in.rules.push_back({name, {name}, 0, false});
  }
  auto s = plan(in);
  if (!s.ok()) return fmt::print(stderr, "{}\n", s.status().to_string()), 1;
  EngineConfig ec;
  ec.provider = provider;
  auto tx = TransferEngine::create(ec);
  auto rx = TransferEngine::create(ec);
  if (!tx.ok() || !rx.ok()) return fmt::print(stderr, "engine: {}\n", tx.status().to_string()), 1;
  std::vector<std::byte> arena(s->arena_bytes[0]);
  auto reg = (*rx)->reg_mr(arena.data(), arena.size());
  std::vector<std::byte> src(static_cast<std::size_t>(rows) * 256 * 2, std::byte{1});
  ExecutorConfig cfg;
  cfg.watermark_bytes = 64ull << 20;
  auto ex = Executor::create(**tx, *s, cfg, {{reg->desc}, {}});
  if (!ex.ok()) return fmt::print(stderr, "{}\n", ex.status().to_string()), 1;
  nlohmann::json runs = nlohmann::json::array();
  double best_post = 1e9;
  for (std::uint32_t v = 1; v <= reps; ++v) {
    auto counter = *(*rx)->imm_counter(data_imm(v));
    const auto before = (*ex)->stats();
    const auto t0 = std::chrono::steady_clock::now();
    if (!(*ex)->begin(v).ok()) return 1;
    for (std::uint32_t t = 0; t < s->targets.size(); ++t) {
      std::vector<SourceView> views{{s->targets[t].sources[0], src.data(), DType::bf16, Box{{0, 0}, {rows, 256}}}};
      if (auto st = (*ex)->send_target(t, views); !st.ok()) return fmt::print(stderr, "{}\n", st.to_string()), 1;
    }
    if (auto st = (*ex)->commit(); !st.ok()) return fmt::print(stderr, "{}\n", st.to_string()), 1;
    if (!counter->wait(s->expected_imms[0], std::chrono::seconds(30)).ok()) return 1;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (void)(*rx)->release_imm_counter(data_imm(v));
    const auto after = (*ex)->stats();
    const double post = after.post_s - before.post_s;
    best_post = std::min(best_post, post);
    runs.push_back({{"post_s", post}, {"prepare_s", after.prepare_s - before.prepare_s}, {"update_wall_s", wall},
                    {"writes", after.writes - before.writes}});
  }
  nlohmann::json out{{"provider", provider}, {"writes", writes}, {"bytes_per_write", rows * 256 * 2},
                     {"best_post_s", best_post}, {"paper_post_s_for_1144", 0.026}, {"runs", runs}};
  fmt::print("{}\n", out.dump(2));
  return 0;
}
