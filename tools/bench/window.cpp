#include "window.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "stats.hpp"

namespace bench {

namespace {
struct Pending {
  std::shared_ptr<fabric::CompletionFlag> flag;
  std::uint64_t t0 = 0;
};
}  // namespace

std::vector<std::uint64_t> run_window(std::uint64_t count, std::uint64_t window,
                                      const std::string& what, const SubmitOne& submit) {
  using namespace std::chrono_literals;
  std::vector<Pending> inflight;
  inflight.reserve(window);
  std::vector<std::uint64_t> lat;
  lat.reserve(count);
  std::uint64_t submitted = 0;
  const std::uint64_t deadline = now_ns() + std::chrono::nanoseconds(120s).count();
  while (lat.size() < count) {
    bool progress = false;
    while (submitted < count && inflight.size() < window) {
      Pending p{std::make_shared<fabric::CompletionFlag>(), now_ns()};
      const fabric::Status st = submit(p.flag);
      if (st.code() == fabric::Errc::again) break;
      if (!st.ok()) throw std::runtime_error("submit " + what + ": " + st.to_string());
      inflight.push_back(std::move(p));
      ++submitted;
      progress = true;
    }
    for (std::size_t i = 0; i < inflight.size();) {
      if (!inflight[i].flag->done()) {
        ++i;
        continue;
      }
      const std::uint64_t t = now_ns();
      if (const fabric::Status st = inflight[i].flag->status(); !st.ok()) {
        throw std::runtime_error(what + ": " + st.to_string());
      }
      lat.push_back(t - inflight[i].t0);
      inflight[i] = std::move(inflight.back());
      inflight.pop_back();
      progress = true;
    }
    // The engine's workers do the work: give them the CPUs when we have nothing to do (this
    // box may have fewer cores than busy threads). Wait as an application would, with the
    // engine's own wait on the oldest write in flight (writes on one connection complete in
    // order): it polls briefly, then sleeps until the completion wakes it. A yield loop here
    // took a third of the CPU time of an engine round at 64 MiB over tcp (perf, per thread).
    if (!progress) {
      if (now_ns() > deadline) throw std::runtime_error(what + " round did not finish in time");
      if (inflight.empty()) {
        std::this_thread::yield();
      } else {
        const auto oldest = std::min_element(
            inflight.begin(), inflight.end(),
            [](const Pending& a, const Pending& b) { return a.t0 < b.t0; });
        (void)oldest->flag->wait(100ms);  // bounded: the loop re-checks the round's deadline
      }
    }
  }
  return lat;
}

std::vector<std::uint64_t> run_windows(std::uint64_t count, std::uint64_t window,
                                       std::uint32_t threads, const std::string& what,
                                       const SubmitOne& submit) {
  if (threads <= 1) return run_window(count, window, what, submit);
  std::vector<std::vector<std::uint64_t>> lat(threads);
  std::exception_ptr failure;
  std::mutex failure_mu;
  {
    std::vector<std::jthread> pool;
    for (std::uint32_t t = 0; t < threads; ++t) {
      const std::uint64_t share = count / threads + (t < count % threads ? 1 : 0);
      pool.emplace_back([&, t, share] {
        try {
          lat[t] = run_window(share, window, what, submit);
        } catch (...) {
          const std::lock_guard lock(failure_mu);
          if (!failure) failure = std::current_exception();
        }
      });
    }
  }  // jthreads join here: every run_window is bounded by its own deadline
  if (failure) std::rethrow_exception(failure);
  std::vector<std::uint64_t> all;
  all.reserve(count);
  for (const auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  return all;
}

}  // namespace bench
