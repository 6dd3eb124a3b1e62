#include "target.hpp"

#include <cstring>
#include <chrono>
#include <memory>
#include <unistd.h>
#include <vector>

#include <fabric/fabric.hpp>
#include <fmt/core.h>

#include "common/rendezvous.hpp"
#include "control_channel.hpp"
#include "demo_error.hpp"
#include "child_process.hpp"
#include "engine_setup.hpp"
#include "pattern.hpp"
#include "protocol.hpp"
#include "region.hpp"

namespace demo {
namespace {

class Target {
 public:
  explicit Target(const Options& options) : options_(options), region_(kRegionBytes) {}

  int run();
  // Best effort: tells the writer why we are about to exit.
  void report_failure(const std::string& error) noexcept;

 private:
  void announce();
  void arm(const nlohmann::json& message);
  nlohmann::json verify(const nlohmann::json& message);
  std::string surplus_immediates();

  const Options& options_;
  // Both outlive the engine: its callbacks fill the mailbox and remote
  // writes land in the region until it stops.
  Mailbox mailbox_;
  Region region_;
  std::unique_ptr<fabric::TransferEngine> engine_;
  std::unique_ptr<ControlChannel> channel_;
  fabric::Registered registered_;
  fabric::NetAddr writer_;
  std::vector<std::uint32_t> armed_imms_;  // of the current workload
};

void Target::announce() {
  if (options_.bootstrap_fd < 0) throw DemoError("the target needs --bootstrap-fd or --listen");
  engine_ = make_engine(options_);
  registered_ = take(engine_->reg_mr(region_.data(), region_.size()), "reg_mr of the destination");
  channel_ = std::make_unique<ControlChannel>(*engine_, mailbox_);
  channel_->listen();
  send_bootstrap(options_.bootstrap_fd,
                 engine_->main_address().to_string() + " " + registered_.desc.to_string());

  const nlohmann::json hello = channel_->expect("hello");
  writer_ = take(fabric::NetAddr::parse(hello.at("addr").get<std::string>()),
                 "parsing the writer's NetAddr");
  channel_->send(writer_, {{"type", "ready"}});
}

void Target::arm(const nlohmann::json& message) {
  const Workload w = workload_from(message);
  const auto imm = message.at("imm").get<std::uint32_t>();
  const auto expected = message.at("expected").get<std::uint64_t>();
  armed_imms_.push_back(imm);
  // Single writes wait through a callback and paged writes through a polled
  // counter, so the demo exercises both ways of counting.
  if (w.op == Op::single_write) {
    Mailbox& mailbox = mailbox_;
    check(engine_->expect_imm_count(imm, expected,
                                    [&mailbox](std::uint32_t value, std::uint64_t count) {
                                      mailbox.push({{"type", "imm_reached"},
                                                    {"imm", value},
                                                    {"count", count}});
                                    }),
          "expect_imm_count");
    channel_->send(writer_, {{"type", "armed"}});
    channel_->expect("imm_reached");
  } else {
    const auto counter = take(engine_->imm_counter(imm), "imm_counter");
    channel_->send(writer_, {{"type", "armed"}});
    check(counter->wait_and_consume(expected, kWaitLimit),
          fmt::format("waiting for {} immediates of imm {:#x} (have {})", expected, imm,
                      counter->value()));
    check(engine_->release_imm_counter(imm), "release_imm_counter");
  }
  channel_->send(writer_, {{"type", "reached"}, {"imm", imm}});
}

// The documented counts are exact: an immediate beyond them is a bug even
// when the data is right. Attaching a counter collects any carried-over ones.
std::string Target::surplus_immediates() {
  std::vector<std::shared_ptr<fabric::ImmCounter>> counters;
  for (std::uint32_t imm : armed_imms_) {
    counters.push_back(take(engine_->imm_counter(imm), "imm_counter"));
  }
  // imm_counter() hands over every arrival counted so far; a surplus still in
  // flight could be missed, but none is ever invented.
  std::string found;
  for (const auto& counter : counters) {
    if (counter->value() != 0) {
      found += fmt::format("{}{} surplus immediates of imm {:#x}", found.empty() ? "" : "; ",
                           counter->value(), counter->imm());
    }
    check(engine_->release_imm_counter(counter->imm()), "release_imm_counter");
  }
  armed_imms_.clear();
  return found;
}

nlohmann::json Target::verify(const nlohmann::json& message) {
  const Workload w = workload_from(message);
  const auto seed = message.at("seed").get<std::uint64_t>();
  const std::span<const std::byte> dst = region_.bytes();
  const std::optional<Mismatch> bad =
      w.op == Op::single_write
          ? check_single(seed, w.size, dst)
          : check_paged(seed, w.size, permutation(src_order_seed(seed), w.count),
                        permutation(dst_order_seed(seed), w.count), dst);
  nlohmann::json reply = {{"type", "verified"}, {"ok", !bad.has_value()}};
  if (bad) {
    reply["offset"] = bad->offset;
    reply["expected"] = bad->expected;
    reply["actual"] = bad->actual;
  }
  if (const std::string surplus = surplus_immediates(); !surplus.empty()) {
    reply["ok"] = false;
    reply["reason"] = surplus;
  }
  return reply;
}

int Target::run() {
  announce();
  for (;;) {
    const auto message = mailbox_.pop(kWaitLimit);
    if (!message) throw DemoError("the writer went silent");
    const std::string type = message->value("type", "");
    if (type == "prepare") {
      std::memset(region_.data(), 0, region_.size());
      channel_->send(writer_, {{"type", "prepared"}});
    } else if (type == "arm") {
      arm(*message);
    } else if (type == "verify") {
      channel_->send(writer_, verify(*message));
    } else if (type == "bye") {
      channel_->send(writer_, {{"type", "bye"}});
      break;
    } else if (type == "fail") {
      throw DemoError("writer failed: " + message->value("error", "(no reason)"));
    } else {
      throw DemoError("unexpected control message '" + type + "'");
    }
  }
  check(engine_->dereg_mr(registered_.handle), "dereg_mr of the destination");
  engine_->stop();
  return 0;
}

void Target::report_failure(const std::string& error) noexcept {
  if (!engine_ || writer_.empty()) return;
  try {
    channel_->send(writer_, {{"type", "fail"}, {"error", "target: " + error}});
  } catch (...) {  // NOLINT(bugprone-empty-catch): the writer times out instead
  }
}

}  // namespace

int serve(Options options) {
  tools::Listener listener(tools::parse_host_port(options.listen));
  fmt::print("fabric-demo: listening on {}\n", listener.address().to_string());
  std::fflush(stdout);
  // The writer learns our addresses over this connection, as a forked
  // target's writer does over its pipe; run_target closes it after that.
  options.bootstrap_fd = listener.accept(std::chrono::minutes(5)).release();
  return run_target(options);
}

int run_target(const Options& options) {
  choose_interface(options);
  Target target(options);
  try {
    return target.run();
  } catch (const std::exception& e) {
    target.report_failure(e.what());
    throw;
  }
}

}  // namespace demo
