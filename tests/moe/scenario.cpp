#include "scenario.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "fabric/engine.hpp"
#include "fabric/moe/group.hpp"
#include "fabric/moe/host_device.hpp"
#include "fabric_test/victim.hpp"
#include "ranks.hpp"

namespace fabric::moe::test {

namespace {

using fabric::test::Channel;

std::string first_difference(const std::byte* a, const std::byte* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i])
      return "first difference at byte " + std::to_string(i) + " of " + std::to_string(n);
  return "equal";
}

// The victim dies without a word at the start of an iteration, once every WRITE of the previous
// one has completed. Killed after its dispatch_send instead, it was sometimes inside a post into a
// peer's region: on libfabric 1.17's shm that leaves the region's process-shared lock held, and
// the peer's own poll then spins inside the provider for good (docs/reliability.md#shm-locks; the
// CI failure of 2026-12-01, where gdb showed all three survivors' workers in pthread_spin_lock,
// timing out on each other). That is the provider's failure, which no engine can undo; this test
// is about the group's.
[[noreturn]] void die_when_idle(HostDevice& device, TransferEngine& engine) {
  (void)device.wait_idle();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (engine.outstanding_requests() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::raise(SIGKILL);
  std::abort();
}

}  // namespace

std::optional<Failure> run_iterations(MoeGroup& group, TransferEngine& engine, const Scenario& sc,
                                      const MoeConfig& config, std::uint32_t first_iteration,
                                      std::uint32_t iterations, std::int32_t die_rank,
                                      std::uint32_t die_at, bool quiesce) {
  HostDevice device(group, sc.proxy, &engine);
  const auto& layout = group.layout(config.rank);
  const Placement placement(config);
  const std::size_t tb = token_bytes(config);
  const std::size_t rb = std::size_t{config.hidden} * element_bytes(config.combine_input);
  const std::size_t ob = std::size_t{config.hidden} * element_bytes(config.combine_output);
  const std::uint32_t local = placement.local_experts(config.rank);
  std::vector<std::byte> recv_x(layout.recv_rows * tb);
  std::vector<float> recv_scales(std::size_t{layout.recv_rows} * config.num_scales);
  std::vector<std::uint32_t> counts(local);
  std::vector<std::byte> expert_out(layout.recv_rows * rb);
  std::vector<std::byte> out(config.max_tokens_per_rank * ob);
  const std::uint32_t g = placement.dp_group(config.rank);
  for (std::uint32_t i = 0; i < iterations; ++i) {
    const std::uint32_t it = first_iteration + i;
    const auto in = make_input(config, sc.routing, sc.seed, it, g);
    const auto started = std::chrono::steady_clock::now();
    const auto fail = [&](const std::string& step, const Status& st) {
      return Failure{step + " (iteration " + std::to_string(it) + "): " + st.to_string(),
                     std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - started)
                         .count()};
    };
    if (static_cast<std::int32_t>(config.rank) == die_rank && i == die_at) die_when_idle(device, engine);
    if (auto st = device.dispatch_send(in.x, in.scales, in.topk, in.tokens); !st.ok())
      return fail("dispatch_send", st);
    if (auto st = device.dispatch_recv(recv_x, recv_scales, counts); !st.ok())
      return fail("dispatch_recv", st);
    const auto& plan = group.receive_plan();
    if (sc.check_dispatch_every > 0 && it % sc.check_dispatch_every == 0) {
      const auto want = expected_dispatch(config, sc.routing, sc.seed, it, config.rank);
      for (std::uint32_t e = 0; e < local; ++e) {
        if (counts[e] != want.count[e])
          return Failure{"iteration " + std::to_string(it) + " expert " + std::to_string(e) +
                         ": " + std::to_string(counts[e]) + " rows, reference " +
                         std::to_string(want.count[e])};
        if (plan.expert_begin[e] % config.expert_alignment != 0)
          return Failure{"expert rows not aligned"};
        const std::byte* got = recv_x.data() + std::size_t{plan.expert_begin[e]} * tb;
        const std::byte* exp = want.rows.data() + std::size_t{want.first[e]} * tb;
        if (std::memcmp(got, exp, counts[e] * tb) != 0)
          return Failure{"iteration " + std::to_string(it) + " expert " + std::to_string(e) +
                         " rows differ from the reference: " +
                         first_difference(got, exp, counts[e] * tb)};
        if (config.num_scales > 0 &&
            std::memcmp(recv_scales.data() + std::size_t{plan.expert_begin[e]} * config.num_scales,
                        want.scales.data() + std::size_t{want.first[e]} * config.num_scales,
                        std::size_t{counts[e]} * config.num_scales * 4) != 0)
          return Failure{"iteration " + std::to_string(it) + " scales differ"};
      }
    }
    // The experts: each local expert on its rows.
    for (std::uint32_t e = 0; e < local; ++e)
      for (std::uint32_t row = plan.expert_begin[e]; row < plan.expert_begin[e] + counts[e]; ++row)
        expert_forward(config, placement.first_expert(config.rank) + e, recv_x.data() + row * tb,
                       recv_scales.data() + std::size_t{row} * config.num_scales,
                       expert_out.data() + row * rb);
    if (auto st = device.combine_send(expert_out); !st.ok()) return fail("combine_send", st);
    if (auto st = device.combine_recv(in.weights, out); !st.ok()) return fail("combine_recv", st);
    const auto want = expected_combine(config, in);
    if (std::memcmp(out.data(), want.data(), want.size()) != 0)
      return Failure{"iteration " + std::to_string(it) + " combine differs from the reference: " +
                     first_difference(out.data(), want.data(), want.size())};
  }
  if (auto st = device.wait_idle(); !st.ok()) return Failure{"proxy: " + st.to_string()};
  if (!quiesce) return std::nullopt;
  if (auto st = group.quiesce(); !st.ok()) return Failure{"quiesce: " + st.to_string()};
  return std::nullopt;
}

namespace {

std::string stats_line(const MoeGroup& group) {
  const auto s = group.stats();
  std::ostringstream o;
  o << "ok iterations=" << s.iterations << " writes=" << s.writes_posted
    << " bytes=" << s.bytes_posted << " direct_bytes=" << s.direct_bytes
    << " imms=" << s.imms_consumed << " max_dispatch_writes=" << s.max_writes_per_peer_dispatch
    << " max_combine_writes=" << s.max_writes_per_peer_combine
    << " stray=" << group.stray_immediates() << " submissions=" << s.submissions
    << " completions=" << s.completions;
  return o.str();
}

Result<std::unique_ptr<TransferEngine>> make_engine(const Scenario& sc, std::uint32_t rank) {
  EngineConfig ec;
  ec.provider = sc.provider;
  ec.request_timeout = std::chrono::milliseconds(sc.victim >= 0 ? 1000 : 20000);
  ec.drain_timeout = std::chrono::milliseconds(500);
  // The rank that dies polls rarely while idle (fabric_test/victim.hpp): killed inside its own
  // shm poll it would leave its region's lock held, and every survivor that then writes to it
  // would spin inside the provider for good (the CI failure of 2026-12-01, all three survivors
  // of ADeadNodePeerIsNamed... timing out on each other).
  const bool victim = static_cast<std::int32_t>(rank) == sc.victim;
  return TransferEngine::create(victim ? fabric::test::victim_config(ec) : ec);
}

}  // namespace

long long report_value(const std::string& report, const std::string& key) {
  const auto at = report.find(" " + key + "=");
  if (at == std::string::npos) return -1;
  return std::stoll(report.substr(at + key.size() + 2));
}

int run_scenario_rank(const Scenario& sc, std::uint32_t rank, Channel& channel) {
  MoeConfig config = sc.config;
  config.rank = rank;
  auto engine = make_engine(sc, rank);
  if (!engine.ok()) {
    report(channel, "engine: " + engine.status().to_string());
    return 4;
  }
  auto group = MoeGroup::create(**engine, config, relay_all_gather(channel));
  if (!group.ok()) {
    report(channel, "create: " + group.status().to_string());
    return 4;
  }
  auto failure = run_iterations(**group, **engine, sc, config, 0, sc.iterations, sc.victim, sc.die_at);
  if (sc.victim < 0) {
    if (failure) {
      report(channel, failure->text);
      return 5;
    }
    report(channel, stats_line(**group));
    return 0;
  }
  // A rank died: this survivor must have failed, naming it, within the bound.
  if (!failure) {
    report(channel, "survivor finished without noticing the dead rank");
    return 6;
  }
  // Progress on stderr (ctest --output-on-failure shows it) in case a step hangs.
  std::fprintf(stderr, "[moe rank %u] noticed: %s\n", rank, failure->text.c_str());
  const auto broken = (*group)->broken_ranks();
  std::string named;
  for (const auto r : broken) named += (named.empty() ? "" : ",") + std::to_string(r);
  // Rebuild without it, ranks renumbered: by default on a new engine (libfabric 1.17's shm
  // wedges after a peer died with WRITEs outstanding, docs/reliability.md).
  group->reset();
  MoeConfig next = config;
  next.world_size = config.world_size - 1;
  next.rank = rank - (static_cast<std::int32_t>(rank) > sc.victim ? 1 : 0);
  next.num_experts = config.num_experts;
  if (!sc.rebuild_on_same_engine) {
    engine->reset();
    std::fprintf(stderr, "[moe rank %u] old group and engine released, rebuilding\n", rank);
    engine = make_engine(sc, rank);
    if (!engine.ok()) {
      report(channel, "rebuild engine: " + engine.status().to_string());
      return 7;
    }
  } else {
    std::fprintf(stderr, "[moe rank %u] old group released, rebuilding on the same engine\n", rank);
  }
  auto rebuilt = MoeGroup::create(**engine, next, relay_all_gather(channel));
  if (!rebuilt.ok()) {
    report(channel, "rebuild: " + rebuilt.status().to_string());
    return 7;
  }
  std::fprintf(stderr, "[moe rank %u] rebuilt as rank %u of %u\n", rank, next.rank, next.world_size);
  auto after = run_iterations(**rebuilt, **engine, sc, next, 1000, sc.iterations_after_rebuild, -1, 0);
  if (after) {
    report(channel, "after rebuild: " + after->text);
    return 8;
  }
  report(channel, stats_line(**rebuilt) + " detect_ms=" + std::to_string(failure->ms_into_iteration) + " named=" + named +
                      " error=" + failure->text);
  return 0;
}

}  // namespace fabric::moe::test
