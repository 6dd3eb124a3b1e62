#include "field_test.hpp"

#include <dirent.h>

#include <algorithm>
#include <fstream>

namespace fabric::field {

long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

long open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  long n = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n - 1;  // the directory's own descriptor
}

std::unique_ptr<TransferEngine> FieldTest::make_engine(
    std::chrono::milliseconds request_timeout) const {
  auto made = TransferEngine::create(engine_config(provider(), request_timeout));
  if (made.ok()) return std::move(made).value();
  ADD_FAILURE() << "TransferEngine::create(" << provider() << "): " << made.status().to_string();
  return nullptr;
}

std::int64_t ms(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

std::shared_ptr<Incarnation> Restarter::start() {
  return std::make_shared<Incarnation>(next_id_++, provider_);
}

::testing::AssertionResult Restarter::restart(std::size_t slot, std::shared_ptr<Incarnation> next,
                                              bool kill) {
  std::shared_ptr<Incarnation> old;
  if (provider_ == "shm" || !kill) {
    old = traffic_.swap(slot, std::move(next));
    if (old && !traffic_.wait_idle(*old, kRequestTimeout + kMargin)) {
      return ::testing::AssertionFailure()
             << "peer " << old->id() << ": " << old->outstanding.load()
             << " requests still outstanding " << ms(kRequestTimeout + kMargin)
             << " ms after traffic moved to its successor";
    }
    // A request to it that expired (a starved peer, under load) was reported while its WRITE
    // stayed with the provider: killing the peer now would strand that WRITE for good.
    if (old && kill && provider_ == "shm" && !traffic_.wait_released(kWait)) {
      kill = false;
      ++lives_.kills_spared;
    }
    if (old && kill) old->kill();
  } else {
    // Killed while requests to it are in flight, and found dead by the traffic still aimed at it.
    old = traffic_.at(slot);
    if (old) old->kill();
    (void)traffic_.swap(slot, std::move(next));
  }
  if (!old) return ::testing::AssertionSuccess();
  if (kill) {
    ++lives_.killed;
  } else {
    ++lives_.quit;
    if (auto quit = old->quit(); !quit) return quit;
  }
  retiring_.emplace_back(std::move(old), Clock::now() + kRequestTimeout + kMargin);
  return ::testing::AssertionSuccess();
}

void Restarter::retire(Incarnation& peer) {
  lives_.ok += peer.ok.load();
  lives_.failed += peer.failed.load();
  lives_.wrong += peer.wrong();
  lives_.unexpected += peer.unexpected_failures();
  if (lives_.first_problem.empty()) lives_.first_problem = peer.first_problem();
}

::testing::AssertionResult Restarter::settle(bool all) {
  while (!retiring_.empty()) {
    auto& [peer, deadline] = retiring_.front();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const bool idle = all ? traffic_.wait_idle(*peer, std::max(left, 0ms))
                          : peer->outstanding.load() == 0;
    if (!idle) {
      if (Clock::now() < deadline) return ::testing::AssertionSuccess();  // not yet: later
      return ::testing::AssertionFailure()
             << "peer " << peer->id() << " (ended): " << peer->outstanding.load()
             << " requests never completed within request_timeout + " << ms(kMargin) << " ms";
    }
    retire(*peer);
    retiring_.pop_front();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult metrics_match(const TransferEngine& engine, const Traffic& traffic) {
  const EngineMetrics m = engine.metrics();
  for (Kind kind : {Kind::single, Kind::paged, Kind::send, Kind::imm, Kind::read}) {
    const RequestCounts& got = m.requests[metrics_index(kind)];
    const KindTally& sent = traffic.tally(kind);
    if (got.ok != sent.ok.load() || got.failed != sent.failed.load() ||
        got.bytes_ok != sent.bytes_ok.load()) {
      return ::testing::AssertionFailure()
             << kind_name(kind) << ": metrics() says ok=" << got.ok << " failed=" << got.failed
             << " bytes_ok=" << got.bytes_ok << "; the traffic saw ok=" << sent.ok.load()
             << " failed=" << sent.failed.load() << " bytes_ok=" << sent.bytes_ok.load();
    }
  }
  if (m.in_flight != 0) return ::testing::AssertionFailure() << "metrics() in_flight=" << m.in_flight;
  return ::testing::AssertionSuccess();
}

}  // namespace fabric::field
