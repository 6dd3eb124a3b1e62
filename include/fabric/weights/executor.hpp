#pragma once
// The trainer side of an update. Per target (in schedule order): prepare this
// rank's chunks (fuse, transpose, cast or quantize to FP8) into registered
// staging memory, post their WRITEs at once, and start the next target while
// they fly; staging in use never exceeds the watermark. After each mesh group:
// wait for this rank's writes, then a barrier of immediates among the trainers.
// After the last: one commit immediate to every inference rank, which is what
// completes the inference side's count for the version.
//
// Unsharding (DTensor.full_tensor(), an FSDP all-gather) is the caller's: it
// hands send_target() views of what it holds after prepare.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fabric/engine.hpp"
#include "fabric/weights/imms.hpp"
#include "fabric/weights/schedule.hpp"

namespace fabric::weights {

// Row-major values of `region` (global coordinates) of a trainer parameter.
struct SourceView {
  std::string name;
  const std::byte* data = nullptr;
  DType dtype = DType::bf16;
  Box region;
};

struct ExecutorConfig {
  std::uint32_t rank = 0;
  // Registered staging memory: a chunk is prepared only once it fits.
  std::uint64_t watermark_bytes = 256ull << 20;
  // Bounds every wait: for staging, for this rank's writes, for the barrier.
  std::chrono::milliseconds timeout{30000};
};

struct ExecutorPeers {
  std::vector<MrDesc> inference_arenas;  // per inference rank: its one registration
  std::vector<MrDesc> trainer_barriers;  // per trainer rank (own entry unused)
  // The immediate blocks the ranks reserved on their engines (reserve_update_imms,
  // fabric/weights/imms.hpp), learnt with their descriptors: per inference rank, and per
  // trainer rank (own entry: the block this trainer counts barriers in). Both empty: the fixed
  // values of data_imm(version) and barrier_imm(version, group) (schedule.hpp), for receivers
  // that do not reserve (the Python receiver); they may collide with other workloads.
  std::vector<ImmBlock> inference_imms;
  std::vector<ImmBlock> trainer_imms;
};

struct ExecutorStats {
  std::uint64_t writes = 0;
  std::uint64_t bytes = 0;
  double post_s = 0;        // inside submit calls
  double prepare_s = 0;     // casting, fusing, quantizing
  double staging_wait_s = 0;
  double drain_wait_s = 0;
  double barrier_wait_s = 0;
  std::uint64_t peak_staging_bytes = 0;
};

class Executor {
 public:
  // own_imms: this trainer's reservation (the block peers.trainer_imms[rank] names), held
  // and released by the executor; may stay empty when the caller holds it.
  static Result<std::unique_ptr<Executor>> create(TransferEngine& engine, Schedule schedule,
                                                  ExecutorConfig config, ExecutorPeers peers,
                                                  ImmReservation own_imms = {});
  ~Executor();  // waits (bounded) for writes still in flight, then deregisters
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  [[nodiscard]] const Schedule& schedule() const noexcept;
  // Whether this rank writes anything of target t.
  [[nodiscard]] bool sends(std::uint32_t target) const;

  // Starts update `version`, which must exceed every earlier one (failed ones too).
  Status begin(std::uint64_t version);
  // sources: one view per part the target is made of (by name).
  Status send_target(std::uint32_t target, std::span<const SourceView> sources);
  Status finish_group(std::uint32_t group);
  Status commit();

  [[nodiscard]] ExecutorStats stats() const;

  // The engine has stopped (every write's completion was delivered): forget
  // the staging registration instead of deregistering it on destruction.
  void abandon() noexcept;

  struct Impl;

 private:
  explicit Executor(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;  // completions hold it too
};

// Prepares chunk c: its data into `out` (c.bytes) and scales into
// `scale_out` (c.scale_bytes). sources: one per part of the chunk's target,
// in part order (nullptr for parts the chunk does not touch).
Status prepare_chunk(const Schedule& schedule, const Chunk& c,
                     std::span<const SourceView* const> sources, std::span<std::byte> out,
                     std::span<std::byte> scale_out);

// Prepares a whole image (every chunk of it): what a rank-0 baseline ships.
Status prepare_image(const Schedule& schedule, std::uint32_t image,
                     std::span<const SourceView* const> sources, std::span<std::byte> out,
                     std::span<std::byte> scale_out);

}  // namespace fabric::weights
