// fabric-bench: the engine's throughput and latency next to a minimal loop
// posted straight to libfabric, in one run, over the same memory.

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>

#include "common/rendezvous.hpp"
#include "metrics_report.hpp"
#include "options.hpp"
#include "peer_runs.hpp"
#include "report.hpp"
#include "scripts.hpp"
#include "sizes.hpp"
#include "sweep.hpp"

int main(int argc, char** argv) {
  bench::Options opt;
  CLI::App app{"fabric-bench: engine vs raw libfabric, same run"};
  app.add_flag("--local", opt.local, "spawn the target process(es) here");
  app.add_option("--listen", opt.listen,
                 "server role: serve one client as its target, control channel on HOST:PORT "
                 "(port 0 picks one; the line 'listening on HOST:PORT' says which)");
  app.add_option("--connect", opt.connect,
                 "client role: drive the server(s) at HOST:PORT (repeat for scatter peers)");
  app.add_option("--provider", opt.provider, "shm, tcp, sockets, ...");
  auto* bind = app.add_option("--bind", opt.bind,
                              "IP providers bind here (default 127.0.0.1; with --listen, its HOST)");
  app.add_option("--iface", opt.iface,
                 "interface for IP providers (FI_TCP_IFACE/FI_SOCKETS_IFACE; default lo for a "
                 "loopback --bind)");
  app.add_option("--backend", opt.backend,
                 "libfabric (engine and raw loop on --provider) or verbs (engine only; compare "
                 "with ib_write_bw: tools/bench/verbs-vm.sh)")
      ->check(CLI::IsMember({"libfabric", "verbs"}));
  app.add_option("--ops", opt.ops,
                 "single_write, paged_write, single_read, paged_read, imm, sendrecv, "
                 "sendrecv_addressed (sendrecv on a channel, alternating with sendrecv), scatter "
                 "(1, 2, 4 target processes)")->delimiter(',');
  app.add_flag("--quick", opt.quick, "few sizes, short rounds (CI smoke)");
  app.add_option("--sizes", opt.sizes,
                 "single_write sizes: a list (4K,64K,1M), a range of powers of two (4K-64M) or "
                 "all (8 B to 64 MiB)")
      // Checked here, before any target process starts: a sweep refused later would leave
      // the targets' shm regions behind in /dev/shm.
      ->check([](const std::string& spec) {
        try {
          (void)bench::parse_sizes(spec, bench::kMaxSingleWrite);
          return std::string{};
        } catch (const std::exception& e) {
          constexpr std::string_view kOwnPrefix = "--sizes: ";  // CLI11 adds it again
          std::string_view why = e.what();
          if (why.starts_with(kOwnPrefix)) why.remove_prefix(kOwnPrefix.size());
          return std::string{why};
        }
      });
  app.add_option("--iters", opt.iters, "requests per measured round (default: ~1 GiB a round)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 24));
  app.add_option("--duration", opt.duration_s,
                 "seconds per measured round of single_write and paged_write, instead of "
                 "--iters: the request count comes from the warm-up round's rate")
      ->check(CLI::Range(0.01, 600.0))
      ->excludes("--iters");
  app.add_flag("--bidir", opt.bidir,
               "each single_write size also runs bidirectionally: the target writes the same "
               "size back at the same time; rows single_write_bidir report each direction "
               "(timed by its sender, first submit to last completion) and their sum; engine "
               "only, its counterpart is the unidirectional raw row (servers: pass it too for "
               "sizes above 32 MiB)");
  app.add_option("--threads", opt.threads,
                 "threads submitting to the one engine in single_write and paged_write rounds, "
                 "each keeping its own --window outstanding (raw loop: always one thread)")
      ->check(CLI::Range(1u, 64u));
  app.add_option("--window", opt.window, "outstanding writes (paged: window/16 batches)")
      ->check(CLI::Range(1u, 4096u));
  app.add_option("--pages", opt.pages, "pages per paged batch")->check(CLI::Range(1024u, 16384u));
  app.add_option("--reps", opt.reps, "measured rounds per size and mode, best kept (default 3, quick 1)");
  app.add_flag("--busy-poll", opt.busy_poll, "engine workers spin (EngineConfig::busy_poll)");
  app.add_flag("--post-on-submit", opt.post_on_submit,
               "the submitting thread posts each request's first WRITE "
               "(EngineConfig::post_on_submit)");
  auto* no_metrics =
      app.add_flag("--no-metrics", [&opt](std::int64_t) { opt.metrics = false; },
                   "engines count nothing for metrics() (EngineConfig::metrics off), to measure "
                   "what counting costs");
  app.add_flag("--metrics", opt.print_metrics,
               "after the sweep, print the initiator engine's metrics() snapshot (requests and "
               "bytes by kind and outcome, latency, gauges) and add it to the JSON as 'metrics'")
      ->excludes(no_metrics);
  auto* metrics_ab = app.add_flag("--metrics-ab", opt.metrics_ab,
               "single_write and paged_write rows also run on a second initiator engine with "
               "metrics off, its rounds alternating with the metrics-on engine's and raw's; "
               "the table and JSON give on / off per row")
      ->excludes(no_metrics);
  app.add_flag("--metrics-aa", opt.metrics_aa,
               "as --metrics-ab, but the second engine counts too: the two engines differ in "
               "nothing, so their ratio is the machine's noise floor for --metrics-ab")
      ->excludes(no_metrics)
      ->excludes(metrics_ab);
  app.add_option("--imm-wait", opt.imm_wait,
                 "imm op: waiters call TransferEngine::progress (progress) or leave delivery to "
                 "the worker threads (worker)")
      ->check(CLI::IsMember({"progress", "worker"}));
  app.add_flag("--breakdown", opt.breakdown,
               "stage-by-stage posting times of the engine's requests (call, queue, worker, "
               "first and last post; a few clock reads per request)");
  bool no_pin = false;
  app.add_flag("--no-pin", no_pin,
               "leave every thread unpinned (default: the bench's main thread on CPU 0 and "
               "each target's on the next CPU, after the engines started; engine threads float)");
  app.add_flag("--raw", [](std::int64_t) {},
               "accepted for clarity: raw figures are always measured alongside");
  app.add_option("--nics", opt.nics,
                 "one interface or address per Domain (EngineConfig::nics), e.g. nic0,nic1 "
                 "inside a netbed host; no raw loop, no FI_TCP_IFACE=lo")
      ->delimiter(',');
  app.add_option("--groups", opt.groups,
                 "DomainGroups per engine (EngineConfig::groups), --nics split evenly among "
                 "them; single writes from each group's registration of the buffer into the "
                 "peer's same group, in turn (default 1)")
      ->check(CLI::Range(1, 16));
  app.add_option("--verbs-ack-timeout", opt.verbs_ack_timeout,
                 "RC ACK timeout exponent of both sides, 4.096 us * 2^N (VerbsConfig::ack_timeout)")
      ->check(CLI::Range(1u, 31u));
  app.add_option("--verbs-max-inline", opt.verbs_max_inline,
                 "bytes a small WRITE from host memory carries in its work request, both sides "
                 "(VerbsConfig::max_inline_data; 0: off)");
  app.add_option("--request-timeout-ms", opt.request_timeout_ms,
                 "fail a request after this long without a completion of its own (default: the "
                 "engine's, 60 s with --nics); for slow emulated NICs");
  app.add_option("--round-mib", opt.round_mib,
                 "MiB per measured round (default 1024, 16 with --quick)");
  app.add_option("--json", opt.json_path, "write the results here");
  app.add_option("--plot", opt.plot_path, "bandwidth vs size, engine vs raw (PNG)");
  app.add_option("--peer", opt.peers,
                 "after the sweep, repeat its single_write and paged_write rows through another "
                 "engine (mooncake: its TCP transport; nixl: UCX over tcp, or cma beside shm) and "
                 "report engine / peer; needs the peer's wheel in --peer-python")
      ->check(CLI::IsMember({"mooncake", "nixl"}))
      ->delimiter(',');
  if (const char* py = std::getenv("FABRIC_BENCH_PEER_PYTHON"); py != nullptr && *py != '\0') {
    opt.peer_python = py;
  }
  app.add_option("--peer-python", opt.peer_python,
                 "interpreter for --peer (default: $FABRIC_BENCH_PEER_PYTHON, else python3)");
  // Which copies --plot and --peer run: an installed prefix's or the source tree's.
  app.footer(fmt::format("Scripts: {} (--plot), {} (--peer)", bench::plot_script(),
                         bench::peer_script()));
  CLI11_PARSE(app, argc, argv);
  opt.pin_processes = !no_pin;

  const int roles = int{opt.local} + int{!opt.listen.empty()} + int{!opt.connect.empty()};
  if (roles != 1) {
    fmt::print(stderr, "fabric-bench: give exactly one of --local, --listen HOST:PORT, "
                       "--connect HOST:PORT\n");
    return 2;
  }
  try {
    // A server binds its engine where it listens unless told otherwise.
    if (!opt.listen.empty() && bind->count() == 0) opt.bind = tools::parse_host_port(opt.listen).host;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fabric-bench: --listen: {}\n", e.what());
    return 2;
  }
  // Before any provider is touched: IP providers read these once. With
  // --nics every Domain binds its own NIC's address instead, and a
  // process-wide interface filter would hide all NICs but one.
  if (opt.nics.empty()) tools::choose_interface(opt.bind, opt.iface);

  if (!opt.peers.empty() && (!opt.listen.empty() || opt.backend != "libfabric")) {
    fmt::print(stderr, "fabric-bench: --peer needs the client role (--local or --connect) on the "
                       "libfabric backend\n");
    return 2;
  }

  if (!opt.listen.empty()) return bench::serve(opt);
  bool peers_ok = true;
  try {
    const bench::SweepResult result = bench::run_sweep(opt);
    const std::vector<bench::PeerRun> peers = bench::run_peers(opt, result);
    bench::print_table(result, peers);
    if (result.metrics) bench::print_metrics(*result.metrics);
    std::string json = opt.json_path;
    if (json.empty() && !opt.plot_path.empty()) json = opt.plot_path + ".json";
    if (!json.empty()) bench::write_json(opt, result, peers, json);
    if (!opt.plot_path.empty()) bench::plot(json, opt.plot_path);
    for (const bench::PeerRun& p : peers) peers_ok = peers_ok && p.error.empty();
  } catch (const std::exception& e) {
    fmt::print(stderr, "fabric-bench: {}\n", e.what());
    return 1;
  }
  // The engine's figures are complete either way; 3 says a requested peer is missing.
  return peers_ok ? 0 : 3;
}
