#include "report.hpp"

#include <fmt/format.h>
#include <rdma/fabric.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/stats.hpp"
#include "fabric/version.hpp"
#include "metrics_report.hpp"
#include "scripts.hpp"

namespace bench {

namespace {

// a / b, 0 where the reference b measured nothing (a row's raw loop, a peer, the metrics-off
// engine).
double over(double a, double b) { return b > 0 ? a / b : 0; }

double ratio(const Row& r) {
  // Zero-payload ops compare rates: higher is better either way.
  if (r.op == "imm") return over(r.engine.ops_per_s, r.raw.ops_per_s);
  return over(r.engine.gbps, r.raw.gbps);
}


std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

nlohmann::json machine(const Options& opt, const SweepResult& r) {
  utsname u{};
  ::uname(&u);
  double load[3] = {0, 0, 0};
  ::getloadavg(load, 3);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::uint32_t v = fi_version();
  return {{"hostname", host},
          {"cpus", std::thread::hardware_concurrency()},
          {"cpu_model", cpu_model()},
          {"kernel", fmt::format("{} {}", u.sysname, u.release)},
          {"libfabric", fmt::format("{}.{}", FI_MAJOR(v), FI_MINOR(v))},
          {"provider", r.provider},
          {"delivery_complete", r.delivery_complete},
          {"fabric_lib", fmt::format("{}.{}.{}", fabric::kVersionMajor, fabric::kVersionMinor,
                                     fabric::kVersionPatch)},
          {"loadavg_at_end", {load[0], load[1], load[2]}},
          {"window", opt.window},
          {"busy_poll", opt.busy_poll},
          {"post_on_submit", opt.post_on_submit},
          {"metrics", opt.metrics},
          {"metrics_ab", opt.metrics_ab},
          {"metrics_aa", opt.metrics_aa},
          {"imm_wait", opt.imm_wait},
          {"pin_processes", opt.pin_processes},
          {"threads", opt.threads},
          {"bidir", opt.bidir},
          {"duration_s", opt.duration_s > 0 ? nlohmann::json(opt.duration_s) : nullptr},
          {"iters", opt.iters != 0 ? nlohmann::json(opt.iters) : nullptr},
          {"reps", opt.reps != 0 ? opt.reps : (opt.quick ? 1u : 3u)},
          {"quick", opt.quick},
          {"time", static_cast<std::int64_t>(std::time(nullptr))}};
}

}  // namespace

void print_table(const SweepResult& r, const std::vector<PeerRun>& peers) {
  fmt::print("provider {}{}\n", r.provider, r.delivery_complete ? " (delivery-complete)" : "");
  // perftest's columns: bytes, iterations, BW peak (the best measured
  // round) and BW average (all measured rounds' bytes / their time), msg
  // rate. Every latency here is a round trip; none is one-way.
  fmt::print("BW peak: best measured round; BW avg: all measured rounds' bytes / their time; "
             "req/s: requests of the peak round (msg rate); rt: round-trip latency (writes: "
             "submit to local completion, which waits for the target's ack; imm: ping to pong)\n");
  fmt::print("{:<18} {:>9} {:>6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>6} {:>10} {:>8} {:>8} {:>9} {:>8}\n",
             "op", "bytes", "count", "iters", "eng peak", "eng avg", "raw peak", "raw avg",
             "ratio", "eng req/s", "rt p50", "rt p99", "rt p99.9", "raw p50");
  fmt::print("{:<18} {:>9} {:>6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>6} {:>10} {:>8} {:>8} {:>9} {:>8}\n",
             "", "", "", "", "Gbit/s", "Gbit/s", "Gbit/s", "Gbit/s", "", "", "us", "us", "us",
             "rt us");
  for (const Row& row : r.rows) {
    const auto cell = [](double v, int prec) {
      return std::isnan(v) ? std::string("-") : fmt::format("{:.{}f}", v, prec);
    };
    const auto raw_cell = [&](double v, int prec) {
      return row.has_raw ? cell(v, prec) : std::string("-");
    };
    fmt::print("{:<18} {:>9} {:>6} {:>7} {:>9.2f} {:>9.2f} {:>9} {:>9} {:>6} {:>10.0f} {:>8} {:>8} {:>9} {:>8}\n",
               row.op, row.size, row.count, row.iterations, row.engine.gbps, row.engine_avg_gbps,
               raw_cell(row.raw.gbps, 2), raw_cell(row.raw_avg_gbps, 2), raw_cell(ratio(row), 3),
               row.engine.ops_per_s, cell(row.engine.p50_us, 1), cell(row.engine.p99_us, 1),
               cell(row.engine.p999_us, 1), raw_cell(row.raw.p50_us, 1));
  }
  bool ab_header = false;
  for (const Row& row : r.rows) {
    if (!row.unmetered) continue;
    if (!ab_header) {
      fmt::print("\nmetrics on / off in one run (--metrics-ab; --metrics-aa: on / on): the "
                 "initiator's two engines, rounds alternating with raw's\n");
      fmt::print("{:<12} {:>9} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7}\n", "op", "bytes", "on peak",
                 "off peak", "on/off", "on avg", "off avg", "on/off");
      ab_header = true;
    }
    fmt::print("{:<12} {:>9} {:>9.2f} {:>9.2f} {:>7.3f} {:>9.2f} {:>9.2f} {:>7.3f}\n", row.op,
               row.size, row.engine.gbps, row.unmetered->gbps,
               over(row.engine.gbps, row.unmetered->gbps), row.engine_avg_gbps,
               row.unmetered_avg_gbps, over(row.engine_avg_gbps, row.unmetered_avg_gbps));
  }
  for (const Row& row : r.rows) {
    if (row.op != "single_write_bidir") continue;
    fmt::print("bidir {} B: initiator→target {:.2f} Gbit/s + target→initiator {:.2f} Gbit/s = "
               "{:.2f} Gbit/s (peak round; average {:.2f}); each direction timed by its sender\n",
               row.size, row.out_gbps, row.in_gbps, row.engine.gbps, row.engine_avg_gbps);
  }
  for (const Row& row : r.rows) {
    if (row.op != "scatter") continue;
    fmt::print("scatter to {} peers: posting p50 engine {:.0f} ns (submit_scatter), raw {:.0f} ns "
               "({} fi_writedata); p99 {:.0f} / {:.0f} ns\n",
               row.count, row.engine_post_p50_ns, row.raw_post_p50_ns, row.count,
               row.engine_post_p99_ns, row.raw_post_p99_ns);
  }
  bool header = false;
  for (const Row& row : r.rows) {
    if (!row.breakdown) continue;
    if (!header) {
      fmt::print("\nposting path, ns p50 / p99 / p99.9 (call → enqueued → worker picks up → "
                 "first post → last post; raw post: the raw loop's fi_writedata call alone)\n");
      fmt::print("{:<12} {:>9} {:>6} {:>8} {:>22} {:>22} {:>22} {:>22} {:>22} {:>22}\n", "op",
                 "size", "count", "samples", "call→enqueued", "queue", "worker→1st post",
                 "1st→last post", "call→1st post", "raw post");
      header = true;
    }
    const Breakdown& b = *row.breakdown;
    const auto cell = [](const StageFigures& f) {
      return fmt::format("{:.0f}/{:.0f}/{:.0f}", f.p50_ns, f.p99_ns, f.p999_ns);
    };
    fmt::print("{:<12} {:>9} {:>6} {:>8} {:>22} {:>22} {:>22} {:>22} {:>22} {:>22}\n", row.op,
               row.size, row.count, b.samples, cell(b.call_to_enqueued), cell(b.enqueued_to_picked),
               cell(b.picked_to_first), cell(b.first_to_last), cell(b.call_to_first),
               b.raw_post_call ? cell(*b.raw_post_call) : std::string("-"));
  }  for (const PeerRun& p : peers) {
    fmt::print("\npeer {} ({} transport{}{}): same patterns, same run\n", p.peer,
               p.transport.empty() ? "-" : p.transport, p.version.empty() ? "" : ", version ",
               p.version);
    if (!p.figures.empty()) {
      fmt::print("{:<12} {:>9} {:>6} {:>10} {:>10} {:>11}\n", "op", "size", "count", "eng Gb/s",
                 "peer Gb/s", "eng / peer");
    }
    for (const Row& row : r.rows) {
      const PeerFigure* f = p.find(row);
      if (f == nullptr) continue;
      fmt::print("{:<12} {:>9} {:>6} {:>10.2f} {:>10.2f} {:>11.3f}\n", row.op, row.size,
                 row.count, row.engine.gbps, f->gbps, over(row.engine.gbps, f->gbps));
    }
    if (!p.error.empty()) fmt::print("peer {} not measured{}: {}\n", p.peer,
                                     p.figures.empty() ? "" : " in full", p.error);
  }
}

void write_json(const Options& opt, const SweepResult& r, const std::vector<PeerRun>& peers,
                const std::string& path) {
  nlohmann::json results = nlohmann::json::array();
  for (const Row& row : r.rows) {
    results.push_back({{"op", row.op},
                       {"provider", opt.provider},
                       {"libfabric_provider", r.provider},
                       {"backend", opt.backend},
                       {"nics", opt.nics},
                       {"groups", opt.groups},
                       {"size", row.size},
                       {"count", row.count},
                       {"iterations", row.iterations},
                       {"engine_gbps", row.engine.gbps},
                       {"raw_gbps", row.has_raw ? nlohmann::json(row.raw.gbps) : nullptr},
                       {"engine_avg_gbps", row.engine_avg_gbps},
                       {"raw_avg_gbps", row.has_raw ? nlohmann::json(row.raw_avg_gbps) : nullptr},
                       {"latency", "round_trip"},
                       {"ratio", row.has_raw ? nlohmann::json(ratio(row)) : nullptr},
                       {"ratio_basis", row.op == "imm" ? "ops_per_s" : "gbps"},
                       {"ops_per_s", row.engine.ops_per_s},
                       {"p50_us", row.engine.p50_us},
                       {"p99_us", row.engine.p99_us},
                       {"p999_us", row.engine.p999_us},
                       {"raw_ops_per_s", row.raw.ops_per_s},
                       {"raw_p50_us", row.raw.p50_us},
                       {"raw_p99_us", row.raw.p99_us},
                       {"raw_p999_us", row.raw.p999_us},
                       {"verified", row.verified}});
    if (row.breakdown) {
      const Breakdown& b = *row.breakdown;
      const auto stage = [](const StageFigures& f) {
        return nlohmann::json{{"p50_ns", f.p50_ns}, {"p90_ns", f.p90_ns}, {"p99_ns", f.p99_ns},
                              {"p999_ns", f.p999_ns}};
      };
      results.back()["breakdown"] = {{"samples", b.samples},
                                     {"call_to_enqueued", stage(b.call_to_enqueued)},
                                     {"enqueued_to_picked_up", stage(b.enqueued_to_picked)},
                                     {"picked_up_to_first_post", stage(b.picked_to_first)},
                                     {"first_to_last_post", stage(b.first_to_last)},
                                     {"call_to_first_post", stage(b.call_to_first)},
                                     {"raw_post_call", b.raw_post_call
                                                           ? stage(*b.raw_post_call)
                                                           : nlohmann::json(nullptr)}};
    }
    for (const PeerRun& p : peers) {
      const PeerFigure* f = p.find(row);
      if (f == nullptr) continue;
      results.back()["peer_runs"][p.peer] = {
          {"transport", p.transport}, {"gbps", f->gbps}, {"iterations", f->iterations},
          {"verified", f->verified}, {"ratio", over(row.engine.gbps, f->gbps)}};
    }
    if (row.unmetered) {
      results.back()["metrics_off_gbps"] = row.unmetered->gbps;
      results.back()["metrics_off_avg_gbps"] = row.unmetered_avg_gbps;
      results.back()["metrics_on_over_off"] = over(row.engine.gbps, row.unmetered->gbps);
      results.back()["metrics_on_over_off_avg"] =
          over(row.engine_avg_gbps, row.unmetered_avg_gbps);
    }
    if (row.op == "single_write_bidir") {
      results.back()["out_gbps"] = row.out_gbps;
      results.back()["in_gbps"] = row.in_gbps;
    }
    if (row.op == "scatter") {
      results.back()["peers"] = row.count;
      results.back()["engine_post_p50_ns"] = row.engine_post_p50_ns;
      results.back()["engine_post_p99_ns"] = row.engine_post_p99_ns;
      results.back()["raw_post_p50_ns"] = row.raw_post_p50_ns;
      results.back()["raw_post_p99_ns"] = row.raw_post_p99_ns;
      results.back()["post_ratio"] =
          over(row.engine_post_p50_ns, row.raw_post_p50_ns);
    }
  }
  std::ofstream out(path);
  nlohmann::json doc{{"machine", machine(opt, r)}, {"results", results}};
  if (r.metrics) doc["metrics"] = metrics_json(*r.metrics);
  if (!peers.empty()) {
    doc["peers"] = nlohmann::json::array();
    for (const PeerRun& p : peers) {
      doc["peers"].push_back({{"peer", p.peer},
                              {"transport", p.transport},
                              {"version", p.version},
                              {"network", p.network},
                              {"error", p.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.error)}});
    }
  }
  out << doc.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

void plot(const std::string& json_path, const std::string& png_path) {
  // Debian's matplotlib lives under the system interpreter, not a venv's.
  const std::string cmd = fmt::format("/usr/bin/python3 '{}' '{}' '{}'", plot_script(),
                                      json_path, png_path);
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    fmt::print(stderr, "fabric-bench: no plot written (see above); the JSON is complete\n");
  }
}

}  // namespace bench
