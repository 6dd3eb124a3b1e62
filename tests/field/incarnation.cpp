#include "incarnation.hpp"

#include <signal.h>

#include "fabric_test/data.hpp"
#include "field_config.hpp"
#include "peer_process.hpp"

namespace fabric::field {

std::uint64_t read_seed(std::uint64_t id) { return 0x7ead'0000'0000ull + id; }

Incarnation::Incarnation(std::uint64_t id, const std::string& provider)
    : id_(id), region_(SharedRegion::create(kChunk * kChunks + kReadArea)) {
  test::fill_random(region_.data().subspan(kChunk * kChunks, kReadArea), read_seed(id));
  for (std::uint32_t c = 0; c < kChunks; ++c) free_chunks_.push_back(c);
  process_ = spawn_peer(PeerSpec{"target", provider, region_.fd()});
}

::testing::AssertionResult Incarnation::connect() {
  // A start-up bound, not a claim: an engine starts in about 0.4 s alone, but the suite also
  // runs at load averages of 30-50 beside other builds, where one start took over 20 s.
  constexpr std::chrono::seconds kStartBound{60};
  auto desc = process_.channel().recv_desc(kStartBound);
  if (!desc) {
    const std::string threads = describe_threads(process_.pid());
    return ::testing::AssertionFailure() << "peer " << id_ << " sent no MrDesc: "
                                         << process_.channel().last_error()
                                         << "; its threads (tid state wchan): " << threads
                                         << "; process " << process_.wait_exit(kWait).to_string();
  }
  dst_ = *desc;
  return ::testing::AssertionSuccess();
}

std::optional<std::uint32_t> Incarnation::take_chunk() {
  std::lock_guard lock(mutex_);
  if (free_chunks_.empty()) return std::nullopt;
  const std::uint32_t c = free_chunks_.back();
  free_chunks_.pop_back();
  return c;
}

void Incarnation::give_chunk(std::uint32_t chunk) {
  std::lock_guard lock(mutex_);
  free_chunks_.push_back(chunk);
}

void Incarnation::kill() {
  expect_failures();
  (void)process_.kill();
}

::testing::AssertionResult Incarnation::quit() {
  auto& ch = process_.channel();
  const std::uint64_t sends = ok_sends();
  if (!ch.send_pod(sends) || !ch.expect("bye", kWait + kWait)) {
    return ::testing::AssertionFailure() << "peer " << id_ << " did not quit: " << ch.last_error()
                                         << "; process " << process_.wait_exit(kWait).to_string();
  }
  const auto exit = process_.wait_exit(kWait);
  if (!exit.ok()) return ::testing::AssertionFailure() << "peer " << id_ << ": " << exit.to_string();
  const RegionHeader& header = region_.header();
  if (header.messages_bad.load() != 0) {
    return ::testing::AssertionFailure() << "peer " << id_ << " received "
                                         << header.messages_bad.load() << " corrupt messages";
  }
  std::lock_guard lock(mutex_);
  for (const std::uint64_t seq : ok_sends_) {
    if (!header.was_seen(seq)) {
      return ::testing::AssertionFailure() << "peer " << id_ << ": SEND " << seq
                                           << " reported ok never arrived";
    }
  }
  return ::testing::AssertionSuccess();
}

void Incarnation::record_ok_send(std::uint64_t seq) {
  std::lock_guard lock(mutex_);
  ok_sends_.push_back(seq);
}

std::uint64_t Incarnation::ok_sends() {
  std::lock_guard lock(mutex_);
  return ok_sends_.size();
}

void Incarnation::record_failure(const char* kind, const Status& status) {
  if (failures_expected_.load()) return;
  unexpected_.fetch_add(1);
  std::lock_guard lock(mutex_);
  if (first_problem_.empty()) {
    first_problem_ = "peer " + std::to_string(id_) + ": a " + kind +
                     " failed while the peer ran: " + status.to_string();
  }
}

void Incarnation::record_wrong(const std::string& what) {
  wrong_.fetch_add(1);
  std::lock_guard lock(mutex_);
  if (first_problem_.empty()) first_problem_ = what;
}

std::string Incarnation::first_problem() {
  std::lock_guard lock(mutex_);
  return first_problem_;
}

}  // namespace fabric::field
