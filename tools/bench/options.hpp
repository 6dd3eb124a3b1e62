#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bench {

struct Options {
  bool local = false;
  // Two roles in separate processes: a server (the target) listening on
  // host:port, and a client (the initiator) connecting to one or more.
  std::string listen;
  std::vector<std::string> connect;
  std::string provider = "shm";
  // IP providers bind here (engine and raw loop); --iface names the interface.
  std::string bind = "127.0.0.1";
  std::string iface;
  // "verbs": the engine on its verbs backend. Its raw counterpart is perftest's
  // ib_write_bw (tools/bench/verbs-vm.sh), so no raw libfabric loop runs.
  std::string backend = "libfabric";
  std::vector<std::string> ops = {"single_write", "paged_write", "imm", "sendrecv", "scatter"};
  bool quick = false;
  std::uint32_t window = 64;  // outstanding writes (single) or batches (paged)
  std::uint32_t pages = 1024;
  bool busy_poll = false;
  bool post_on_submit = false;  // EngineConfig::post_on_submit
  // EngineConfig::metrics on both sides; --no-metrics measures what counting costs
  // (docs/observability.md).
  bool metrics = true;
  // --metrics-ab: write rows also run on a second initiator engine with metrics off, rounds
  // alternating, so the cost of counting is one run's ratio (docs/observability.md).
  bool metrics_ab = false;
  // --metrics-aa: the same with metrics on in both engines (the noise floor of --metrics-ab).
  bool metrics_aa = false;
  // --metrics: the initiator engine's metrics() after the sweep, printed and in the JSON.
  bool print_metrics = false;
  // How the imm op's waiters wait: "progress" (TransferEngine::progress in the wait loop) or
  // "worker" (poll the ImmCounter, the worker threads deliver).
  std::string imm_wait = "progress";
  // Stamp the initiator's requests (EngineConfig::record_post_timings) and
  // report where their time goes before the NIC sees them.
  bool breakdown = false;
  std::string sizes;        // --sizes (sizes.hpp); empty: 4 KiB .. 64 MiB by 4x
  std::uint64_t iters = 0;  // requests per measured round; 0: sized to ~1 GiB per round
  // --duration: seconds per measured round of single_write and paged_write;
  // the round's request count comes from the warm-up's rate (replaces iters).
  double duration_s = 0;
  // --bidir: each single_write size also runs with the target writing the
  // same size back at once (engine only; see sweep.cpp).
  bool bidir = false;
  // --threads: this many threads submit single_write/paged_write requests to
  // the one engine, each keeping its own `window` outstanding (engine rounds
  // only; the raw loop stays one thread on one endpoint).
  std::uint32_t threads = 1;
  std::uint32_t reps = 0;  // measured rounds per size and mode, best kept; 0: 3 (1 with --quick)
  // The bench's main thread on CPU 0, target i's on CPU (1 + i) mod N, after
  // the engines started (their worker and callback threads stay unpinned).
  // On by default: unpinned, two single-threaded busy loops (the raw
  // baseline) often share one CPU of a small box and halve each other.
  bool pin_processes = true;
  // One NIC per Domain (EngineConfig::nics), e.g. nic0,nic1 on a netbed host
  // (docs/netbed.md). Turns off the raw loop (one endpoint, loopback only):
  // the counterpart is the NICs' own rate.
  std::vector<std::string> nics;
  // EngineConfig::groups of this many groups on both sides (--nics split among them); single
  // writes take the groups in turn.
  std::uint32_t groups = 1;
  // EngineConfig::request_timeout (ms) of both sides; 0 keeps the default.
  std::uint32_t request_timeout_ms = 0;
  // VerbsConfig::ack_timeout of both sides (--backend verbs); 0 keeps the default.
  std::uint32_t verbs_ack_timeout = 0;
  // VerbsConfig::max_inline_data of both sides; unset keeps the default.
  std::optional<std::uint32_t> verbs_max_inline;
  // Bytes each measured round moves (0: 1 GiB, 16 MiB with --quick); a
  // rate-limited NIC needs smaller rounds to finish in reasonable time.
  std::uint64_t round_mib = 0;
  std::string json_path;
  std::string plot_path;
  // --peer: other transfer engines run over the same single/paged patterns
  // after the sweep, through this interpreter (a venv holding their wheels).
  std::vector<std::string> peers;
  std::string peer_python = "python3";
};

}  // namespace bench
