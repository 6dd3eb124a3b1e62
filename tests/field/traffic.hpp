#pragma once
// Traffic from this process's engine to a set of peer slots, each holding the current
// Incarnation of a peer: threads submit mixed requests (WRITEs of 1 B to 256 KiB, paged WRITEs,
// SENDs, immediates, READs) and check every completion against the bytes themselves (the
// peer's region is mapped here): an ok WRITE's bytes are in the peer's memory when its on_done
// runs, an ok READ brought the peer's bytes, an ok SEND is checked when its peer quits.
// WRITEs carry no immediate: shm completes small writes with one once they are queued in the
// peer's region, before they land (docs/reliability.md), and this checks landing at completion.

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <semaphore>
#include <thread>
#include <vector>

#include "fabric/fabric.hpp"
#include "incarnation.hpp"

namespace fabric::field {

enum class Kind : std::uint8_t { single, paged, send, imm, read };
inline constexpr std::size_t kKinds = 5;
const char* kind_name(Kind kind);
// The kind's index in EngineMetrics::requests.
std::size_t metrics_index(Kind kind);

struct KindTally {
  std::atomic<std::uint64_t> accepted{0};  // submit_* returned ok
  std::atomic<std::uint64_t> ok{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> bytes_ok{0};
};

class Traffic {
 public:
  // In flight per thread, at most.
  static constexpr std::ptrdiff_t kWindow = 16;

  Traffic(TransferEngine& engine, std::size_t slots, std::uint64_t seed);
  Traffic(const Traffic&) = delete;
  Traffic& operator=(const Traffic&) = delete;
  ~Traffic();

  void start(std::size_t threads);
  // Joins the threads, then waits (bounded) until every request has completed; false if some
  // never did.
  bool stop(std::chrono::milliseconds bound);

  // Makes `next` the slot's target (nullptr: none) and returns the previous one; requests
  // already submitted to it still complete into it.
  std::shared_ptr<Incarnation> swap(std::size_t slot, std::shared_ptr<Incarnation> next);
  [[nodiscard]] std::shared_ptr<Incarnation> at(std::size_t slot);
  // Until `peer` has at least `n` ok completions (bounded).
  bool wait_ok(const Incarnation& peer, std::uint64_t n, std::chrono::milliseconds bound);
  // Until `peer` has nothing outstanding (bounded).
  bool wait_idle(const Incarnation& peer, std::chrono::milliseconds bound);
  // Until the engine holds no operation of a request it already reported (an expired request
  // whose WRITE the provider still has: EngineMetrics::held_after_report), bounded.
  bool wait_released(std::chrono::milliseconds bound);

  [[nodiscard]] const KindTally& tally(Kind kind) const {
    return tally_[static_cast<std::size_t>(kind)];
  }
  // submit_* refusals other than Errc::again (each a test failure).
  [[nodiscard]] std::uint64_t refused() const { return refused_.load(); }
  [[nodiscard]] std::string first_refusal();

 private:
  struct Request;
  void run(std::size_t thread);
  bool submit(std::size_t thread, std::mt19937_64& rng, std::counting_semaphore<kWindow>& window);
  void complete(const std::shared_ptr<Request>& r, const Status& status);
  void check(Request& r);

  TransferEngine& engine_;
  std::uint64_t seed_;
  std::vector<std::byte> src_;
  std::vector<std::byte> reads_;  // kWindow read slots per thread
  MrHandle src_mr_;
  MrHandle reads_mr_;
  std::size_t threads_ = 0;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::shared_ptr<Incarnation>> slots_;
  std::vector<std::thread> workers_;
  std::vector<std::unique_ptr<std::counting_semaphore<kWindow>>> windows_;
  std::vector<std::vector<std::uint32_t>> free_reads_;  // per thread, under mutex_
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> outstanding_{0};
  std::array<KindTally, kKinds> tally_{};
  std::atomic<std::uint64_t> refused_{0};
  std::string first_refusal_;
};

}  // namespace fabric::field
