// watcher_latency: how long a host write to a watched word takes to reach its
// callback, and what an idle watcher thread costs in CPU.
//
//   watcher_latency [--changes N] [--idle-changes N] [--poll-interval-us U]
//                   [--busy-poll] [--json FILE]
//
// hot:  the writer stores i, then waits for its delivery before storing i+1,
//       so the poller is always in its spin phase.
// idle: the writer pauses longer than spin + yield (plus a random 0-99 µs)
//       before each store, so every change lands while the poller sleeps.
// cpu:  process CPU time over one second with 1 and with 256 watchers active
//       and nothing written.
#include <sys/prctl.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/backoff.hpp"
#include "watcher/watcher_thread.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using fabric::watcher::WatcherOptions;
using fabric::watcher::WatcherThread;

struct Summary {
  std::string name;
  std::size_t samples = 0;
  double p50 = 0, p99 = 0, p999 = 0, max = 0;  // µs
};

struct Options {
  std::size_t changes = 100'000;
  std::size_t idle_changes = 2'000;
  long poll_interval_us = 50;
  bool busy_poll = false;
  std::string json;
};

double percentile(const std::vector<double>& sorted, double p) {
  const auto i = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

Summary measure(const char* name, WatcherThread& thread, std::size_t n,
                std::chrono::microseconds pause) {
  std::vector<Clock::time_point> written(n + 1), delivered(n + 1);
  std::atomic<std::uint64_t> last{0};
  auto w = thread.alloc([&](std::uint64_t, std::uint64_t v) {
    const auto now = Clock::now();
    if (v <= n) delivered[v] = now;
    last.store(v, std::memory_order_release);
    return true;
  });
  if (!w.ok()) {
    std::fprintf(stderr, "alloc failed: %s\n", w.status().to_string().c_str());
    std::exit(1);
  }
  // A random extra pause de-phases the writer from the poller's sleep cycle.
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> jitter_us(0, 99);
  for (std::uint64_t i = 1; i <= n; ++i) {
    if (pause.count() > 0) {  // pacing, not synchronisation
      std::this_thread::sleep_for(pause + std::chrono::microseconds(jitter_us(rng)));
    }
    written[i] = Clock::now();
    __atomic_store_n(w->word(), i, __ATOMIC_RELEASE);
    if (!fabric::wait_until(5s, [&] { return last.load(std::memory_order_acquire) == i; })) {
      std::fprintf(stderr, "%s: change %llu not delivered within 5 s\n", name,
                   static_cast<unsigned long long>(i));
      std::exit(1);
    }
  }
  std::vector<double> us(n);
  for (std::size_t i = 1; i <= n; ++i) {
    us[i - 1] = std::chrono::duration<double, std::micro>(delivered[i] - written[i]).count();
  }
  std::sort(us.begin(), us.end());
  return {name, n, percentile(us, 0.50), percentile(us, 0.99), percentile(us, 0.999), us.back()};
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// Percent of one core the process uses over `span` while `watchers` sit idle.
double idle_cpu_percent(const WatcherOptions& options, int watchers,
                        std::chrono::milliseconds span) {
  WatcherThread thread(options);
  std::vector<fabric::Watcher> all;
  for (int i = 0; i < watchers; ++i) {
    auto w = thread.alloc([](std::uint64_t, std::uint64_t) { return true; });
    if (!w.ok()) std::exit(1);
    all.push_back(std::move(w).value());
  }
  std::this_thread::sleep_for(100ms);  // past the spin and yield phases
  const double c0 = cpu_seconds();
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(span);
  const double c1 = cpu_seconds();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  return 100.0 * (c1 - c0) / wall;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--changes") {
      o.changes = std::strtoull(next(), nullptr, 10);
    } else if (a == "--idle-changes") {
      o.idle_changes = std::strtoull(next(), nullptr, 10);
    } else if (a == "--poll-interval-us") {
      o.poll_interval_us = std::strtol(next(), nullptr, 10);
    } else if (a == "--busy-poll") {
      o.busy_poll = true;
    } else if (a == "--json") {
      o.json = next();
    } else {
      std::fprintf(stderr,
                   "usage: %s [--changes N] [--idle-changes N] [--poll-interval-us U] "
                   "[--busy-poll] [--json FILE]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  if (o.changes == 0 || o.poll_interval_us <= 0) {
    std::fprintf(stderr, "--changes and --poll-interval-us must be positive\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // Without this the kernel batches the writer's wake-ups with the poller's
  // (both within timer slack), and idle latency would look near zero.
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  WatcherOptions options;
  options.poll_interval = std::chrono::microseconds(o.poll_interval_us);
  options.busy_poll = o.busy_poll;

  std::vector<Summary> results;
  {
    WatcherThread thread(options);
    results.push_back(measure("hot", thread, o.changes, 0us));
    if (o.idle_changes > 0 && !o.busy_poll) {
      const auto pause = options.idle_spin + options.idle_yield + 500us;
      results.push_back(measure("idle", thread, o.idle_changes, pause));
    }
  }
  const double cpu1 = idle_cpu_percent(options, 1, 1000ms);
  const double cpu256 = idle_cpu_percent(options, 256, 1000ms);

  std::printf("watcher_latency: poll_interval=%ld us busy_poll=%d hw_threads=%u loadavg=%.2f\n",
              o.poll_interval_us, o.busy_poll ? 1 : 0, std::thread::hardware_concurrency(),
              load[0]);
  std::printf("%-6s %9s %9s %9s %9s %9s\n", "mode", "changes", "p50_us", "p99_us", "p99.9_us",
              "max_us");
  for (const auto& r : results) {
    std::printf("%-6s %9zu %9.2f %9.2f %9.2f %9.2f\n", r.name.c_str(), r.samples, r.p50, r.p99,
                r.p999, r.max);
  }
  std::printf("idle CPU: %.1f%% of a core with 1 watcher, %.1f%% with 256\n", cpu1, cpu256);

  if (!o.json.empty()) {
    std::ofstream out(o.json);
    out << "{\n  \"poll_interval_us\": " << o.poll_interval_us
        << ",\n  \"busy_poll\": " << (o.busy_poll ? "true" : "false")
        << ",\n  \"hw_threads\": " << std::thread::hardware_concurrency()
        << ",\n  \"loadavg_1min_at_start\": " << load[0] << ",\n  \"modes\": [";
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      out << (i ? "," : "") << "\n    {\"mode\": \"" << r.name << "\", \"changes\": " << r.samples
          << ", \"p50_us\": " << r.p50 << ", \"p99_us\": " << r.p99
          << ", \"p999_us\": " << r.p999 << ", \"max_us\": " << r.max << "}";
    }
    out << "\n  ],\n  \"idle_cpu_percent\": {\"watchers_1\": " << cpu1
        << ", \"watchers_256\": " << cpu256 << "}\n}\n";
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", o.json.c_str());
      return 1;
    }
  }
  return 0;
}
