#pragma once
// The static schedule: computed once from both sides' metadata (planner.hpp),
// serialised to JSON, reused for every update. It is self-contained: the
// executor, the receiver layout and the simulator need nothing else.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/status.hpp"
#include "fabric/weights/metadata.hpp"

namespace fabric::weights {

// One inference parameter as the schedule builds it from trainer sources.
struct PlannedTarget {
  std::string name;
  Shape shape;
  DType dtype = DType::bf16;
  Quant quant = Quant::none;
  std::int32_t fuse_dim = 0;
  bool transpose = false;
  std::vector<std::string> sources;  // trainer parameter names, one per part
  std::vector<Shape> part_shapes;    // each part in target orientation
  std::uint32_t mesh_group = 0;
};

// The local tensor one or more inference ranks hold of a target: one box per
// part (target coordinates). Rows are indices along dim 0 of the local tensor;
// with fuse_dim 0 the parts' rows follow one another, with fuse_dim 1 every row
// holds a piece of every part.
struct Image {
  std::uint32_t target = 0;
  std::vector<Box> part_boxes;
  std::uint64_t bytes = 0;
  std::uint64_t scale_bytes = 0;  // 0 unless the target is quantized
};

// Rows [row_lo, row_hi) of one part (part >= 0, fuse_dim 0) or of every part
// (part == -1, fuse_dim 1) of an image: a contiguous range of its bytes, and
// of its scale bytes.
struct Chunk {
  std::uint32_t image = 0;
  std::int32_t part = -1;
  std::int64_t row_lo = 0;
  std::int64_t row_hi = 0;
  std::uint64_t offset = 0;  // in the image
  std::uint64_t bytes = 0;
  std::uint64_t scale_offset = 0;
  std::uint64_t scale_bytes = 0;
};

// One WRITE: chunk data (or its scales) from a trainer rank into an inference
// rank's arena at dst_offset.
struct WriteOp {
  std::uint32_t group = 0;
  std::uint32_t trainer = 0;
  std::uint32_t inference = 0;
  std::uint32_t chunk = 0;
  bool scale = false;
  std::uint64_t dst_offset = 0;
  std::uint64_t length = 0;
};

// Where an inference rank keeps a target's data and scales in its arena.
struct ArenaEntry {
  std::uint32_t target = 0;
  std::uint32_t image = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::uint64_t scale_offset = 0;
  std::uint64_t scale_bytes = 0;
};

struct Prediction {
  double nic_bytes_per_s = 0;
  std::uint64_t max_nic_in_bytes = 0;   // the busiest inference NIC, whole update
  std::uint64_t max_nic_out_bytes = 0;  // the busiest trainer NIC, whole update
  double bound_s = 0;                   // max(in, out) / bandwidth
  double group_bound_s = 0;             // the same per mesh group, summed (groups are sequential)
  double predicted_s = 0;               // fluid-model simulation (simulator.hpp)
};

struct Schedule {
  static constexpr int kFormatVersion = 1;
  std::uint32_t trainer_ranks = 0;
  std::uint32_t inference_ranks = 0;
  std::uint32_t num_domains = 1;  // of every engine; decides the immediate counts
  std::vector<std::string> group_names;
  std::vector<PlannedTarget> targets;
  std::vector<Image> images;
  std::vector<Chunk> chunks;
  // Grouped by mesh group, then by trainer, each trainer's in posting order.
  std::vector<WriteOp> writes;
  // Per inference rank: its arena (one registration) and the immediates one
  // complete update brings it (every data write's, plus one commit per trainer).
  std::vector<std::vector<ArenaEntry>> arenas;
  std::vector<std::uint64_t> arena_bytes;
  std::vector<std::uint64_t> expected_imms;
  Prediction prediction;

  [[nodiscard]] std::string to_json() const;
  static Result<Schedule> from_json(std::string_view text);
};

// Immediates one WRITE of `length` bytes brings its target with the default
// routing over `num_domains` Domains: the engine's single_write_imm_count
// (fabric/imm_counts.hpp).
[[nodiscard]] std::uint64_t write_imm_count(std::uint64_t length, std::uint32_t num_domains);

// The immediate values of update `version`: every data write and every commit
// carries data_imm(version); the trainers' barrier after mesh group g carries
// barrier_imm(version, g). Versions are never reused, so arrivals of a failed
// update can never complete a later one.
[[nodiscard]] std::uint32_t data_imm(std::uint64_t version) noexcept;
[[nodiscard]] std::uint32_t barrier_imm(std::uint64_t version, std::uint32_t group) noexcept;

}  // namespace fabric::weights
