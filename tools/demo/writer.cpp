#include "writer.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <sstream>
#include <thread>

#include <fabric/fabric.hpp>
#include <fmt/core.h>

#include "child_process.hpp"
#include "control_channel.hpp"
#include "demo_error.hpp"
#include "engine_setup.hpp"
#include "pattern.hpp"
#include "protocol.hpp"
#include "region.hpp"
#include "report.hpp"

namespace demo {
namespace {

using Clock = std::chrono::steady_clock;

struct Peer {
  fabric::NetAddr addr;
  fabric::MrDesc region;
};

// The target's bootstrap line is "<NetAddr text> <MrDesc text>".
Peer parse_bootstrap(const std::string& line) {
  std::istringstream in(line);
  std::string addr_text;
  std::string desc_text;
  if (!(in >> addr_text >> desc_text)) throw DemoError("malformed bootstrap line from target");
  Peer peer{take(fabric::NetAddr::parse(addr_text), "parsing the target's NetAddr"),
            take(fabric::MrDesc::parse(desc_text), "parsing the target's MrDesc")};
  if (!(peer.region.owner() == peer.addr)) {
    throw DemoError("the target's MrDesc names a different owner than its NetAddr");
  }
  if (peer.region.size() < kRegionBytes) throw DemoError("the target's region is too small");
  return peer;
}

std::uint64_t workload_seed(std::uint64_t base, std::size_t index) {
  return base + 0x9e3779b97f4a7c15ULL * (index + 1);
}

class Writer {
 public:
  Writer(const Options& options, ChildProcess& child)
      : options_(options), child_(child), budget_(budget_for(options.quick)) {}

  int run();

 private:
  void connect();
  Measurement measure(const Workload& w, std::uint64_t seed);
  // Runs `requests` requests of `w` with one immediate value and returns the
  // seconds from the first submission to the target's "reached".
  double run_round(const Workload& w, std::uint64_t requests);
  fabric::Status submit(const Workload& w, std::uint32_t imm,
                        const std::shared_ptr<fabric::CompletionCounter>& counter);
  void finish();

  const Options& options_;
  ChildProcess& child_;
  const Budget budget_;
  // Declared before the engine so both outlive it: the engine's receive
  // callbacks fill the mailbox, and its in-flight writes read the source.
  Mailbox mailbox_;
  std::unique_ptr<Region> source_;
  std::unique_ptr<fabric::TransferEngine> engine_;
  std::unique_ptr<ControlChannel> channel_;
  fabric::Registered registered_;
  Peer peer_;
  fabric::PagedWrite paged_;  // index lists of the current paged workload
  std::shared_ptr<fabric::CompletionCounter> round_;  // completions of the current round
  std::uint32_t next_imm_ = 0x100;
};

void Writer::connect() {
  source_ = std::make_unique<Region>(kRegionBytes);
  engine_ = make_engine(options_);
  channel_ = std::make_unique<ControlChannel>(*engine_, mailbox_);
  // Waits for the target's replies also end when the target dies or when a
  // write of the current round fails (the target would then never reach).
  channel_->set_watchdog([this] {
    child_.check_alive();
    if (round_ && round_->failed() != 0) check(round_->first_error(), "a write failed");
  });
  channel_->listen();
  registered_ = take(engine_->reg_mr(source_->data(), source_->size()), "reg_mr of the source");

  peer_ = parse_bootstrap(child_.read_line(kWaitLimit));
  if (peer_.addr.num_domains() != engine_->num_domains()) {
    throw DemoError(fmt::format("domain count differs: writer {}, target {}",
                                engine_->num_domains(), peer_.addr.num_domains()));
  }
  channel_->send(peer_.addr, {{"type", "hello"}, {"addr", engine_->main_address().to_string()}});
  channel_->expect("ready");
}

fabric::Status Writer::submit(const Workload& w, std::uint32_t imm,
                              const std::shared_ptr<fabric::CompletionCounter>& counter) {
  if (w.op == Op::paged_write) {
    paged_.imm = imm;
    return engine_->submit_paged_writes(paged_, counter);
  }
  fabric::SingleWrite request;
  request.length = w.size;
  request.imm = imm;
  request.src = {registered_.handle, 0};
  request.dst = {peer_.region, 0};
  return engine_->submit_single_write(request, counter);
}

double Writer::run_round(const Workload& w, std::uint64_t requests) {
  const std::uint32_t imm = next_imm_++;
  const std::uint64_t expected = requests * imms_per_request(w, engine_->num_domains());
  channel_->send(peer_.addr,
                 {{"type", "arm"}, {"workload", to_json(w)}, {"imm", imm}, {"expected", expected}});
  channel_->expect("armed");

  auto counter = std::make_shared<fabric::CompletionCounter>();
  round_ = counter;
  const std::uint64_t window = window_for(w);
  const auto start = Clock::now();
  // The limit applies to a lack of progress, not to the whole round, so a
  // slow provider is fine and a dead target still ends the run.
  auto last_progress = start;
  std::uint64_t last_completed = 0;
  std::uint64_t submitted = 0;
  auto stalled = [&] {
    const auto now = Clock::now();
    if (counter->completed() != last_completed) {
      last_completed = counter->completed();
      last_progress = now;
      return;
    }
    if (now - last_progress > std::chrono::milliseconds(100)) child_.check_alive();
    if (now - last_progress > kWaitLimit) {
      throw DemoError(fmt::format("no write completed for {} s ({} of {} submitted, {} done)",
                                  kWaitLimit.count(), submitted, requests, last_completed));
    }
  };
  while (submitted < requests) {
    if (counter->failed() != 0) check(counter->first_error(), "a write failed");
    // Back-pressure from our own window or from the engine: yield the core,
    // which on a small machine the workers need more than we do.
    if (submitted - counter->completed() >= window) {
      stalled();
      std::this_thread::yield();
      continue;
    }
    const fabric::Status status = submit(w, imm, counter);
    if (status.code() == fabric::Errc::again) {
      stalled();
      std::this_thread::yield();
      continue;
    }
    check(status, std::string("submit of ") + std::string(op_name(w.op)));
    ++submitted;
  }
  const nlohmann::json reached = channel_->expect("reached");
  const auto stop = Clock::now();
  check(counter->wait(requests, kWaitLimit), "local completion of the writes");
  round_.reset();
  if (reached.at("imm").get<std::uint32_t>() != imm) throw DemoError("reached for the wrong imm");
  return std::max(std::chrono::duration<double>(stop - start).count(), 1e-9);
}

Measurement Writer::measure(const Workload& w, std::uint64_t seed) {
  const std::uint64_t region = w.bytes_per_request();
  fill_pattern(seed, source_->bytes().first(region));
  if (w.op == Op::paged_write) {
    paged_ = {};
    paged_.page_length = w.size;
    paged_.src = registered_.handle;
    paged_.src_pages = {permutation(src_order_seed(seed), w.count), w.size, 0};
    paged_.dst = peer_.region;
    paged_.dst_pages = {permutation(dst_order_seed(seed), w.count), w.size, 0};
  }
  channel_->send(peer_.addr, {{"type", "prepare"}, {"workload", to_json(w)}, {"seed", seed}});
  channel_->expect("prepared");

  // Warm up until a round lasts long enough to give a usable rate; the first
  // rounds also pay for connection setup, which the timed run should not.
  std::uint64_t warmup = warmup_requests(w, budget_);
  double rate = 0;
  for (;;) {
    const double seconds = run_round(w, warmup);
    rate = static_cast<double>(warmup) / seconds;
    const std::uint64_t planned = timed_requests(w, budget_, rate);
    if (seconds >= budget_.seconds_per_workload / 10 || warmup * 4 > planned) break;
    warmup *= 4;
  }
  Measurement m{w, timed_requests(w, budget_, rate)};
  m.seconds = run_round(w, m.iterations);

  channel_->send(peer_.addr, {{"type", "verify"}, {"workload", to_json(w)}, {"seed", seed}});
  const nlohmann::json verdict = channel_->expect("verified");
  m.verified = verdict.at("ok").get<bool>();
  if (!m.verified && verdict.contains("offset")) {
    fmt::print(stderr,
               "fabric-demo: {} of {} bytes: first mismatch at destination offset {} "
               "(expected 0x{:02x}, got 0x{:02x})\n",
               op_name(w.op), w.size, verdict.at("offset").get<std::uint64_t>(),
               verdict.value("expected", 0U), verdict.value("actual", 0U));
  }
  if (verdict.contains("reason")) {
    fmt::print(stderr, "fabric-demo: {} of {} bytes: {}\n", op_name(w.op), w.size,
               verdict.at("reason").get<std::string>());
  }
  return m;
}

void Writer::finish() {
  channel_->send(peer_.addr, {{"type", "bye"}});
  channel_->expect("bye");
  check(engine_->dereg_mr(registered_.handle), "dereg_mr of the source");
  engine_->stop();
  const int code = child_.wait_exit(kWaitLimit);
  if (code != 0) throw DemoError(fmt::format("target process exited with code {}", code));
}

int Writer::run() {
  connect();
  fmt::print("fabric-demo: provider {}, {} Domain(s), writer {} -> target {}\n", options_.provider,
             engine_->num_domains(), engine_->main_address().describe(), peer_.addr.describe());
  print_header();
  std::vector<Measurement> results;
  bool all_verified = true;
  const auto workloads = all_workloads();
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    results.push_back(measure(workloads[i], workload_seed(options_.seed, i)));
    print_row(results.back());
    all_verified = all_verified && results.back().verified;
  }
  const std::string backend{fabric::backend_name(engine_->main_address().backend())};
  finish();
  if (!options_.json_path.empty()) {
    write_json(options_.json_path, describe_machine(options_.provider, backend), results);
    fmt::print("fabric-demo: wrote {}\n", options_.json_path);
  }
  if (!all_verified) {
    fmt::print(stderr, "fabric-demo: data verification FAILED\n");
    return 1;
  }
  fmt::print("fabric-demo: every byte verified\n");
  return 0;
}

}  // namespace

int run_writer(const Options& options) {
  // Fork first: the child must not inherit a half-built engine or its threads.
  std::vector<std::string> args = {"--role", "target", "--provider", options.provider, "--bind",
                                   options.bind};
  if (!options.iface.empty()) args.insert(args.end(), {"--iface", options.iface});
  ChildProcess child = !options.connect.empty() ? ChildProcess::remote(options.connect)
                                                : ChildProcess::spawn(args);
  choose_interface(options);
  // On any failure the Writer (and its engine) unwinds first, then the child
  // is killed and reaped by its destructor.
  Writer writer(options, child);
  return writer.run();
}

}  // namespace demo
