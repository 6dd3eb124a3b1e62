#pragma once
// One life of a target peer: its process, the region the test maps beside it, and what the
// test's requests to it did. A restart is a new Incarnation (new process, NetAddr, keys).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fabric/fabric.hpp"
#include "fabric_test/child_process.hpp"
#include "shared_region.hpp"

namespace fabric::field {

// Every WRITE takes one chunk of the target's region for itself (at a random offset within it)
// and gives it back once its completion was checked, so chunks are reused.
inline constexpr std::uint64_t kChunk = 256 * 1024;
inline constexpr std::uint32_t kChunks = 64;
// Behind the chunks: bytes READs fetch, written once by the test before the peer starts.
inline constexpr std::uint64_t kReadArea = 256 * 1024;

class Incarnation {
 public:
  // Starts the peer process (from the test's main thread: peer_process.hpp).
  Incarnation(std::uint64_t id, const std::string& provider);
  // Waits (bounded) for the peer's MrDesc.
  [[nodiscard]] ::testing::AssertionResult connect();

  [[nodiscard]] std::uint64_t id() const { return id_; }
  [[nodiscard]] const MrDesc& dst() const { return dst_; }
  [[nodiscard]] const NetAddr& addr() const { return dst_.owner(); }
  [[nodiscard]] std::span<std::byte> memory() const { return region_.data(); }
  [[nodiscard]] std::span<const std::byte> read_area() const {
    return memory().subspan(kChunk * kChunks, kReadArea);
  }
  [[nodiscard]] test::ChildProcess& process() { return process_; }

  std::optional<std::uint32_t> take_chunk();
  void give_chunk(std::uint32_t chunk);

  // Marks the failures of requests to this peer as expected from now on (it is being killed,
  // stopped, fenced), then SIGKILLs and reaps it.
  void expect_failures() { failures_expected_ = true; }
  void kill();
  // Asks the peer to take in the SENDs reported ok, stop its engine and exit; then checks that
  // each of them arrived intact.
  ::testing::AssertionResult quit();

  // Requests submitted to it and not yet completed.
  std::atomic<std::uint32_t> outstanding{0};
  std::atomic<std::uint64_t> ok{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> next_send{0};

  // Completion outcomes that break the contract, recorded by the callback thread.
  void record_ok_send(std::uint64_t seq);
  void record_failure(const char* kind, const Status& status);
  void record_wrong(const std::string& what);
  [[nodiscard]] std::uint64_t wrong() const { return wrong_.load(); }
  [[nodiscard]] std::uint64_t unexpected_failures() const { return unexpected_.load(); }
  [[nodiscard]] std::string first_problem();
  [[nodiscard]] std::uint64_t ok_sends();

 private:
  std::uint64_t id_;
  SharedRegion region_;
  test::ChildProcess process_;
  MrDesc dst_;
  std::atomic<bool> failures_expected_{false};
  std::atomic<std::uint64_t> wrong_{0};
  std::atomic<std::uint64_t> unexpected_{0};
  std::mutex mutex_;
  std::vector<std::uint32_t> free_chunks_;
  std::vector<std::uint64_t> ok_sends_;
  std::string first_problem_;
};

// The read area's bytes for incarnation `id`.
std::uint64_t read_seed(std::uint64_t id);

}  // namespace fabric::field
