#include "window.hpp"

#include <chrono>
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
    // The engine's worker does the work: give it the core when we have
    // nothing to do (this box may have fewer cores than busy threads).
    if (!progress) {
      if (now_ns() > deadline) throw std::runtime_error(what + " round did not finish in time");
      std::this_thread::yield();
    }
  }
  return lat;
}

}  // namespace bench
