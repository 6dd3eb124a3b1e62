#pragma once
// Index arithmetic shared by the planner and the executor: how an image's rows
// map to bytes, which source box a chunk needs, and the scale tensors' boxes.

#include <cstdint>
#include <vector>

#include "fabric/weights/metadata.hpp"
#include "fabric/weights/schedule.hpp"

namespace fabric::weights {

// The scale entries covering `box` (target coordinates): 128-blocks of the last
// two dims, or every index but the last.
[[nodiscard]] Box scale_box(Quant quant, const Box& box);

// Chunks are cut in multiples of this many rows (whole 128-blocks for 2-dim
// block-quantized targets, whose dim 0 is blocked).
[[nodiscard]] std::int64_t row_quantum(const PlannedTarget& t);

// Rows of an image that are laid out alike: one span per part (fuse_dim 0, or a
// single part) or one span over all parts (fuse_dim 1).
struct RowSpan {
  std::int32_t part = 0;  // -1: every part
  std::int64_t rows = 0;
  std::uint64_t row_bytes = 0;
  std::uint64_t offset = 0;
  std::int64_t scale_rows = 0;
  std::uint64_t scale_row_bytes = 0;
  std::uint64_t scale_offset = 0;
};
[[nodiscard]] std::vector<RowSpan> row_spans(const PlannedTarget& t, const Image& img);
[[nodiscard]] Chunk make_chunk(const PlannedTarget& t, std::uint32_t image, const RowSpan& span,
                               std::int64_t lo, std::int64_t hi);
[[nodiscard]] RowSpan span_of(const PlannedTarget& t, const Image& img, const Chunk& c);

// Target-coordinate box of part p that rows [lo, hi) cover.
[[nodiscard]] Box chunk_part_box(const Box& part_box, std::int64_t lo, std::int64_t hi);
// What a sender must hold of part p's source (source coordinates) to produce
// rows [lo, hi): whole rows for per-channel scales, whole blocks for block scales.
[[nodiscard]] Box needed_source_box(const PlannedTarget& t, std::size_t p, const Box& part_box,
                                    std::int64_t lo, std::int64_t hi);
[[nodiscard]] Box needed_target_box(const PlannedTarget& t, std::size_t p, const Box& part_box,
                                    std::int64_t lo, std::int64_t hi);

}  // namespace fabric::weights
