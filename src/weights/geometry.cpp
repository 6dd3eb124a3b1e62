#include "weights/geometry.hpp"

#include <algorithm>

namespace fabric::weights {

Box scale_box(Quant quant, const Box& box) {
  Box s = box;
  const std::size_t n = box.lo.size();
  if (quant == Quant::fp8_block128) {
    for (std::size_t d = n - 2; d < n; ++d) {
      s.lo[d] = box.lo[d] / 128;
      s.hi[d] = (box.hi[d] + 127) / 128;
    }
  } else if (quant == Quant::fp8_per_channel) {
    s.lo.pop_back();
    s.hi.pop_back();
  }
  return s;
}

std::int64_t row_quantum(const PlannedTarget& t) {
  return t.quant == Quant::fp8_block128 && t.shape.size() == 2 ? 128 : 1;
}

namespace {
std::int64_t ext0(const Box& b) { return b.hi[0] - b.lo[0]; }
std::uint64_t per_row(std::int64_t numel, std::int64_t rows, std::size_t esize) {
  return rows > 0 ? static_cast<std::uint64_t>(numel / rows) * esize : 0;
}
}  // namespace

std::vector<RowSpan> row_spans(const PlannedTarget& t, const Image& img) {
  std::vector<RowSpan> spans;
  const std::size_t es = dtype_size(t.dtype);
  const bool quant = t.quant != Quant::none;
  if (img.part_boxes.size() == 1 || t.fuse_dim == 0) {
    std::uint64_t off = 0, soff = 0;
    for (std::size_t p = 0; p < img.part_boxes.size(); ++p) {
      const Box& b = img.part_boxes[p];
      RowSpan s;
      s.part = static_cast<std::int32_t>(p);
      s.rows = ext0(b);
      s.row_bytes = per_row(b.numel(), s.rows, es);
      s.offset = off;
      off += static_cast<std::uint64_t>(b.numel()) * es;
      if (quant) {
        Box sb = scale_box(t.quant, b);
        s.scale_rows = ext0(sb);
        s.scale_row_bytes = per_row(sb.numel(), s.scale_rows, 4);
        s.scale_offset = soff;
        soff += static_cast<std::uint64_t>(sb.numel()) * 4;
      }
      spans.push_back(s);
    }
    return spans;
  }
  RowSpan s;
  s.part = -1;
  s.rows = ext0(img.part_boxes[0]);
  for (const Box& b : img.part_boxes) {
    s.row_bytes += per_row(b.numel(), s.rows, es);
    if (quant) {
      Box sb = scale_box(t.quant, b);
      s.scale_rows = ext0(sb);
      s.scale_row_bytes += per_row(sb.numel(), s.scale_rows, 4);
    }
  }
  spans.push_back(s);
  return spans;
}

Chunk make_chunk(const PlannedTarget& t, std::uint32_t image, const RowSpan& span, std::int64_t lo,
                 std::int64_t hi) {
  Chunk c;
  c.image = image;
  c.part = span.part;
  c.row_lo = lo;
  c.row_hi = hi;
  c.offset = span.offset + static_cast<std::uint64_t>(lo) * span.row_bytes;
  c.bytes = static_cast<std::uint64_t>(hi - lo) * span.row_bytes;
  if (t.quant != Quant::none) {
    std::int64_t slo = lo, shi = hi;
    if (row_quantum(t) == 128) {
      slo = lo / 128;
      shi = (hi + 127) / 128;
    }
    c.scale_offset = span.scale_offset + static_cast<std::uint64_t>(slo) * span.scale_row_bytes;
    c.scale_bytes = static_cast<std::uint64_t>(shi - slo) * span.scale_row_bytes;
  }
  return c;
}

RowSpan span_of(const PlannedTarget& t, const Image& img, const Chunk& c) {
  auto spans = row_spans(t, img);
  if (c.part < 0) return spans.front();
  return spans[static_cast<std::size_t>(c.part)];
}

Box chunk_part_box(const Box& part_box, std::int64_t lo, std::int64_t hi) {
  Box b = part_box;
  b.lo[0] = part_box.lo[0] + lo;
  b.hi[0] = part_box.lo[0] + hi;
  return b;
}

Box needed_target_box(const PlannedTarget& t, std::size_t p, const Box& part_box, std::int64_t lo,
                      std::int64_t hi) {
  Box b = chunk_part_box(part_box, lo, hi);
  const std::size_t n = b.lo.size();
  const Shape& shape = t.part_shapes[p];
  if (t.quant == Quant::fp8_per_channel) {
    b.lo[n - 1] = 0;
    b.hi[n - 1] = shape[n - 1];
  } else if (t.quant == Quant::fp8_block128) {
    for (std::size_t d = n - 2; d < n; ++d) {
      b.lo[d] = b.lo[d] / 128 * 128;
      b.hi[d] = std::min(shape[d], (b.hi[d] + 127) / 128 * 128);
    }
  }
  return b;
}

Box needed_source_box(const PlannedTarget& t, std::size_t p, const Box& part_box, std::int64_t lo,
                      std::int64_t hi) {
  Box b = needed_target_box(t, p, part_box, lo, hi);
  if (t.transpose) {
    const std::size_t n = b.lo.size();
    std::swap(b.lo[n - 1], b.lo[n - 2]);
    std::swap(b.hi[n - 1], b.hi[n - 2]);
  }
  return b;
}

}  // namespace fabric::weights
