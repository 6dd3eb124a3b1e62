#include "ping_pong.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/stats.hpp"
#include "fabric_proc/child_process.hpp"
#include <stdexcept>
#include <thread>

namespace fabric::latency {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kWait = std::chrono::seconds(10);
constexpr std::uint32_t kPing = 1;
constexpr std::uint32_t kPong = 2;

template <typename T>
T must(Result<T> r, const char* what) {
  if (!r) throw std::runtime_error(fmt::format("{}: {}", what, r.status().to_string()));
  return std::move(r).value();
}

void must(const Status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(fmt::format("{}: {}", what, st.to_string()));
}

// One side: an engine, a 64-byte target region and a counter for `listen`.
struct Side {
  std::unique_ptr<TransferEngine> engine;
  std::vector<std::byte> region = std::vector<std::byte>(64);
  Registered reg;
  std::shared_ptr<ImmCounter> counter;

  Side(const RunSpec& spec, std::uint32_t listen) {
    engine = must(TransferEngine::create(engine_config(spec)), "create engine");
    reg = must(engine->reg_mr(region.data(), region.size()), "reg_mr");
    counter = must(engine->imm_counter(listen), "imm_counter");
  }
};

// Every reply on the channel within kWait; failures become exceptions.
void send(proc::Channel& ch, const std::string& line) {
  if (!ch.send_string(line, kWait)) throw std::runtime_error("control channel: " + ch.last_error());
}
std::string recv(proc::Channel& ch) {
  auto line = ch.recv_string(kWait);
  if (!line) throw std::runtime_error("control channel: " + ch.last_error());
  return std::move(*line);
}

int respond(const RunSpec& spec, proc::Channel& ch) {
  try {
    Side side(spec, kPing);
    send(ch, side.reg.desc.to_string());
    const MrDesc pinger = must(MrDesc::parse(recv(ch)), "parse MrDesc");
    for (std::uint32_t i = 0; i < spec.iterations; ++i) {
      must(side.counter->wait_and_consume(1, kWait), "waiting for a ping");
      must(side.engine->submit_imm(kPong, pinger, OnDone{}), "submit pong");
    }
    send(ch, "done");
    (void)recv(ch);  // the pinger's last pong has landed: safe to stop
    side.engine->stop();
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "responder: {}\n", e.what());
    return 1;
  }
}

double percentile(std::vector<double>& sorted, double q) { return tools::quantile(sorted, q); }

}  // namespace

EngineConfig engine_config(const RunSpec& spec) {
  EngineConfig c;
  c.provider = spec.provider;
  c.busy_poll = spec.policy.busy_poll;
  c.idle_spin = spec.policy.idle_spin;
  c.idle_yield = spec.policy.idle_yield;
  c.idle_sleep = spec.policy.idle_sleep;
  return c;
}

Percentiles run_ping_pong(const RunSpec& spec) {
  // Fork before any engine thread exists in this process; the responder
  // never outlives a wedged parent (its own deadline) nor a dead one.
  proc::ChildProcess child = proc::spawn_child(
      [spec](proc::Channel& ch) { return respond(spec, ch); }, std::chrono::seconds(120));
  proc::Channel& ch = child.channel();
  std::vector<double> rtt_us;
  try {
    const MrDesc responder = must(MrDesc::parse(recv(ch)), "parse MrDesc");
    Side side(spec, kPong);
    send(ch, side.reg.desc.to_string());
    rtt_us.reserve(spec.iterations);
    for (std::uint32_t i = 0; i < spec.iterations; ++i) {
      if (spec.gap.count() > 0) std::this_thread::sleep_for(spec.gap);  // let workers idle
      const auto t0 = Clock::now();
      must(side.engine->submit_imm(kPing, responder, OnDone{}), "submit ping");
      must(side.counter->wait_and_consume(1, kWait), "waiting for a pong");
      rtt_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    if (recv(ch) != "done") throw std::runtime_error("responder failed");
    send(ch, "bye");
    side.engine->stop();
  } catch (...) {
    (void)child.kill();
    throw;
  }
  if (const proc::ChildExit exit = child.wait_exit(kWait); !exit.ok()) {
    throw std::runtime_error("responder " + exit.to_string());
  }
  std::sort(rtt_us.begin(), rtt_us.end());
  return {percentile(rtt_us, 0.5), percentile(rtt_us, 0.9), percentile(rtt_us, 0.99),
          percentile(rtt_us, 0.999), rtt_us.back()};
}

}  // namespace fabric::latency
