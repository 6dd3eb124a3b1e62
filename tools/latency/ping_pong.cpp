#include "ping_pong.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "common/stats.hpp"
#include <stdexcept>
#include <thread>

namespace fabric::latency {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kWait = std::chrono::seconds(10);
constexpr std::uint32_t kPing = 1;
constexpr std::uint32_t kPong = 2;

void write_line(int fd, const std::string& s) {
  const std::string line = s + "\n";
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    throw std::runtime_error("pipe write failed");
  }
}

std::string read_line(int fd) {
  std::string s;
  char c = 0;
  while (true) {
    const ssize_t n = ::read(fd, &c, 1);
    if (n != 1) throw std::runtime_error("peer closed its pipe");
    if (c == '\n') return s;
    s += c;
  }
}

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

int respond(const RunSpec& spec, int in_fd, int out_fd) {
  try {
    Side side(spec, kPing);
    write_line(out_fd, side.reg.desc.to_string());
    const MrDesc pinger = must(MrDesc::parse(read_line(in_fd)), "parse MrDesc");
    for (std::uint32_t i = 0; i < spec.iterations; ++i) {
      must(side.counter->wait_and_consume(1, kWait), "waiting for a ping");
      must(side.engine->submit_imm(kPong, pinger, OnDone{}), "submit pong");
    }
    write_line(out_fd, "done");
    read_line(in_fd);  // the pinger's last pong has landed: safe to stop
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
  int to_child[2];
  int from_child[2];
  if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) throw std::runtime_error("pipe failed");
  // Fork before any engine thread exists in this process.
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    ::alarm(120);  // never outlive a wedged parent
    ::_exit(respond(spec, to_child[0], from_child[1]));
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  auto reap = [&](bool kill) {
    if (kill) ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(to_child[1]);
    ::close(from_child[0]);
    return status;
  };

  std::vector<double> rtt_us;
  try {
    const MrDesc responder = must(MrDesc::parse(read_line(from_child[0])), "parse MrDesc");
    Side side(spec, kPong);
    write_line(to_child[1], side.reg.desc.to_string());
    rtt_us.reserve(spec.iterations);
    for (std::uint32_t i = 0; i < spec.iterations; ++i) {
      if (spec.gap.count() > 0) std::this_thread::sleep_for(spec.gap);  // let workers idle
      const auto t0 = Clock::now();
      must(side.engine->submit_imm(kPing, responder, OnDone{}), "submit ping");
      must(side.counter->wait_and_consume(1, kWait), "waiting for a pong");
      rtt_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    if (read_line(from_child[0]) != "done") throw std::runtime_error("responder failed");
    write_line(to_child[1], "bye");
    side.engine->stop();
  } catch (...) {
    reap(true);
    throw;
  }
  const int status = reap(false);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("responder exited with an error");
  }
  std::sort(rtt_us.begin(), rtt_us.end());
  return {percentile(rtt_us, 0.5), percentile(rtt_us, 0.9), percentile(rtt_us, 0.99),
          percentile(rtt_us, 0.999), rtt_us.back()};
}

}  // namespace fabric::latency
