#include "peer_runs.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "scripts.hpp"

namespace bench {

namespace {

// Single quotes for /bin/sh, so a venv path with spaces still works.
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string join(const std::set<std::uint64_t>& values) {
  std::string out;
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on "," + to_string().
  for (const std::uint64_t v : values) {
    if (!out.empty()) out += ',';
    out += std::to_string(v);
  }
  return out;
}

struct Capture {
  std::string stdout_text;
  int status = -1;
};

Capture run_capturing_stdout(const std::string& command) {
  Capture c;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) return c;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0) c.stdout_text.append(buf, n);
  c.status = ::pclose(pipe.release());
  return c;
}

// The harness prints progress and its peer's logs around one JSON line: the
// last line that parses as an object is the report.
nlohmann::json last_json_object(const std::string& text) {
  std::size_t end = text.size();
  while (end > 0) {
    const std::size_t begin = text.rfind('\n', end - 1);
    const std::size_t from = begin == std::string::npos ? 0 : begin + 1;
    const std::string line = text.substr(from, end - from);
    if (!line.empty() && line.front() == '{') {
      auto doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (doc.is_object()) return doc;
    }
    if (begin == std::string::npos) break;
    end = begin;
  }
  return nullptr;
}

PeerRun run_one(const Options& opt, const std::string& peer, const std::string& transport,
                const std::set<std::uint64_t>& singles, const std::set<std::uint64_t>& pages) {
  PeerRun run{peer, transport, "", "", "", {}};
  const std::uint32_t reps = opt.reps != 0 ? opt.reps : (opt.quick ? 1u : 3u);
  // timeout(1) bounds the whole harness even if its peer wedges in a C call.
  const std::string command = fmt::format(
      "timeout -k 10 {} {} {} --peer {} --transport {} --single-sizes '{}' --page-sizes '{}' "
      "--pages {} --window {} --reps {}{}",
      opt.quick ? 300 : 1800, shell_quote(opt.peer_python), shell_quote(peer_script()),
      shell_quote(peer), transport, join(singles), join(pages), opt.pages, opt.window, reps,
      opt.quick ? " --quick" : "");
  fmt::print(stderr, "fabric-bench: --peer {}: {}\n", peer, command);
  std::fflush(stderr);
  const Capture c = run_capturing_stdout(command);
  const nlohmann::json doc = last_json_object(c.stdout_text);
  if (!doc.is_object()) {
    const int code = WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1;
    run.error = code == 124 ? "the peer harness ran past its time limit"
                : code == 127 ? fmt::format("cannot run {} (set --peer-python)", opt.peer_python)
                              : fmt::format("the peer harness printed no report (exit status {})",
                                            code);
    return run;
  }
  run.version = doc.value("version", "");
  run.network = doc.value("network", "");
  run.error = doc.value("error", "");
  for (const auto& r : doc.value("results", nlohmann::json::array())) {
    run.figures.push_back({r.value("op", ""), r.value("size", std::uint64_t{0}),
                           r.value("count", std::uint64_t{0}),
                           r.value("iterations", std::uint64_t{0}), r.value("gbps", 0.0),
                           r.value("verified", false)});
  }
  return run;
}

}  // namespace

const PeerFigure* PeerRun::find(const Row& row) const {
  for (const PeerFigure& f : figures) {
    if (f.op == row.op && f.size == row.size && f.count == row.count) return &f;
  }
  return nullptr;
}

std::string peer_transport(const std::string& provider) {
  return provider == "shm" ? "shm" : "tcp";
}

std::vector<PeerRun> run_peers(const Options& opt, const SweepResult& sweep) {
  std::set<std::uint64_t> singles, pages;
  for (const Row& row : sweep.rows) {
    if (row.op == "single_write") singles.insert(row.size);
    if (row.op == "paged_write") pages.insert(row.size);
  }
  std::vector<PeerRun> runs;
  for (const std::string& peer : opt.peers) {
    if (singles.empty() && pages.empty()) {
      runs.push_back(
          {peer, "", "", "", "no single_write or paged_write rows in this run to repeat", {}});
      continue;
    }
    runs.push_back(run_one(opt, peer, peer_transport(opt.provider), singles, pages));
  }
  return runs;
}

}  // namespace bench
