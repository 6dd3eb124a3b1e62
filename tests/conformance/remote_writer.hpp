#pragma once
// A child process that WRITEs into the parent on command. The parent is the
// target: it owns the destination buffer, counts immediates and verifies
// bytes with gtest assertions, while the writer reports each submission's
// outcome back over the Channel.
//
// The writer's source region is `src_size` bytes of fill_random(src_seed), so
// the parent can rebuild every expected byte without shipping data.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fabric/fabric.hpp"
#include "fabric_test/child_process.hpp"
#include "fixture.hpp"

namespace fabric::conformance {

// What happened to one command's submission(s) on the writer's side.
struct Outcome {
  bool accepted = false;  // every submit_* call returned ok
  Status status;          // the submit error, or the (first failed) completion status
  [[nodiscard]] bool ok() const { return accepted && status.ok(); }
  [[nodiscard]] std::string to_string() const;
};

struct SingleWriteSpec {
  std::uint64_t length = 0;
  std::optional<std::uint32_t> imm;
  std::uint64_t src_offset = 0;
  std::uint64_t dst_offset = 0;
  WriteRouting routing = WriteRouting::all_domains();
};

struct PagedWriteSpec {
  std::uint64_t page_length = 0;
  std::optional<std::uint32_t> imm;
  Pages src;
  Pages dst;
};

// `count` writes submitted back to back without waiting: write i copies
// `length` bytes from src offset i*src_stride to dst offset i*dst_stride.
struct BurstSpec {
  std::uint32_t count = 0;
  std::uint64_t length = 0;
  std::optional<std::uint32_t> imm;
  std::uint64_t src_stride = 0;
  std::uint64_t dst_stride = 0;
};

struct BurstResult {
  std::uint64_t submitted = 0;  // submit calls that returned ok
  std::uint64_t completed = 0;  // counter after waiting for `submitted`
  std::uint64_t failed = 0;
  std::uint64_t completed_later = 0;  // counter after a further quiet period
  Status first_error;                 // first submit or completion error
};

// How the writer's engine ended.
struct WriterSummary {
  std::uint64_t burst_submitted = 0;  // over all bursts
  std::uint64_t burst_completed = 0;  // counters after the writer's engine stopped
};

class RemoteWriter {
 public:
  // Forks the writer. Call before the parent creates its own engine.
  RemoteWriter(const EngineConfig& config, std::uint64_t src_size, std::uint64_t src_seed);

  // Waits for the writer's engine, then hands it the destination.
  [[nodiscard]] ::testing::AssertionResult connect(const MrDesc& dst);
  // The writer engine's address (after connect()).
  [[nodiscard]] const NetAddr& addr() const { return addr_; }

  Outcome single_write(const SingleWriteSpec& spec);
  Outcome paged_write(const PagedWriteSpec& spec);
  // `count` submit_imm() calls, then waits for all their completions.
  Outcome imm(std::uint32_t imm, std::uint32_t count);
  BurstResult burst(const BurstSpec& spec);

  // Stops the writer's engine and reaps the process; returns its summary
  // (nullopt with a gtest failure recorded when the child misbehaved).
  std::optional<WriterSummary> finish();

  [[nodiscard]] ChildProcess& process() { return child_; }

 private:
  ChildProcess child_;
  NetAddr addr_;
};

}  // namespace fabric::conformance
