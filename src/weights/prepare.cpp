// Prepare: the bytes of one chunk, in the inference rank's local layout, from
// the trainer's (unsharded) source views: fuse (parts side by side), transpose
// (last two dims), cast, or quantize to FP8 with the scales beside.

#include <fmt/format.h>

#include <cstring>

#include "fabric/weights/executor.hpp"
#include "fabric/weights/fp8.hpp"
#include "weights/geometry.hpp"

namespace fabric::weights {
namespace {

struct Reader {
  const SourceView& view;
  std::vector<std::int64_t> stride;  // row-major over the view's region
  bool transpose;

  Reader(const SourceView& v, bool t) : view(v), stride(v.region.lo.size(), 1), transpose(t) {
    for (std::size_t d = stride.size(); d-- > 1;) {
      stride[d - 1] = stride[d] * (v.region.hi[d] - v.region.lo[d]);
    }
  }
  // Offset (elements) of target coordinates `i`, and the step along the target's last dim.
  std::int64_t offset(const std::vector<std::int64_t>& i) const {
    const std::size_t n = i.size();
    std::int64_t off = 0;
    for (std::size_t d = 0; d < n; ++d) {
      std::size_t sd = d;
      if (transpose && d >= n - 2) sd = (d == n - 1) ? n - 2 : n - 1;
      off += (i[d] - view.region.lo[sd]) * stride[sd];
    }
    return off;
  }
  std::int64_t inner_step() const { return transpose ? stride[stride.size() - 2] : 1; }
  float load(std::int64_t off) const {
    if (view.dtype == DType::bf16) {
      std::uint16_t b;
      std::memcpy(&b, view.data + off * 2, 2);
      return bf16_to_float(b);
    }
    float f;
    std::memcpy(&f, view.data + off * 4, 4);
    return f;
  }
};

// Calls fn(index, count) for every run along the last dim of `box`, in row-major order.
template <typename F>
void for_each_run(const Box& box, F&& fn) {
  const std::size_t n = box.lo.size();
  if (box.numel() == 0) return;
  std::vector<std::int64_t> i = box.lo;
  const std::int64_t len = box.hi[n - 1] - box.lo[n - 1];
  while (true) {
    fn(i, len);
    std::size_t d = n - 1;
    while (d-- > 0) {
      if (++i[d] < box.hi[d]) break;
      i[d] = box.lo[d];
    }
    if (d == static_cast<std::size_t>(-1)) return;
  }
}

// Copies a part's row-major bytes (rows along dim 0 of `rows` each `part_row` bytes) into
// `out` with the chunk's row pitch, at `row_offset` inside each row.
void place_rows(const std::vector<std::uint8_t>& part, std::uint64_t part_row, std::int64_t rows,
                std::span<std::byte> out, std::uint64_t pitch, std::uint64_t row_offset) {
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + r * pitch + row_offset, part.data() + r * part_row, part_row);
  }
}

Status prepare_part(const PlannedTarget& t, std::size_t p, const Box& part_box, const Chunk& c,
                    const SourceView& view, std::vector<std::uint8_t>& data,
                    std::vector<std::uint8_t>& scales) {
  const Box cb = chunk_part_box(part_box, c.row_lo, c.row_hi);
  const Box need = needed_target_box(t, p, part_box, c.row_lo, c.row_hi);
  Box need_src = need;
  const std::size_t n = need.lo.size();
  if (t.transpose) {
    std::swap(need_src.lo[n - 1], need_src.lo[n - 2]);
    std::swap(need_src.hi[n - 1], need_src.hi[n - 2]);
  }
  if (view.region.lo.size() != n || !view.region.contains(need_src)) {
    return Status(Errc::invalid_argument,
                  fmt::format("target '{}': source '{}' view holds {} but the chunk needs {}", t.name,
                              view.name, view.region.to_string(), need_src.to_string()));
  }
  Reader rd(view, t.transpose);
  const std::int64_t step = rd.inner_step();
  const std::size_t es = dtype_size(t.dtype);
  data.assign(static_cast<std::size_t>(cb.numel()) * es, 0);
  if (t.quant == Quant::none) {
    std::size_t o = 0;
    for_each_run(cb, [&](const std::vector<std::int64_t>& i, std::int64_t len) {
      std::int64_t off = rd.offset(i);
      if (t.dtype == view.dtype && step == 1) {  // same dtype, contiguous: a copy
        std::memcpy(data.data() + o, view.data + off * es, len * es);
        o += len * es;
        return;
      }
      for (std::int64_t k = 0; k < len; ++k, off += step, o += es) {
        float v = rd.load(off);
        if (t.dtype == DType::bf16) {
          std::uint16_t b = float_to_bf16(v);
          std::memcpy(data.data() + o, &b, 2);
        } else {
          std::memcpy(data.data() + o, &v, 4);
        }
      }
    });
    scales.clear();
    return {};
  }
  // FP8: quantize slab by slab along dim 0 (whole 128-blocks for 2-dim targets,
  // one index otherwise), each slab a stack of [R, C] matrices over the last two dims.
  const Box sb = scale_box(t.quant, cb);
  scales.assign(static_cast<std::size_t>(sb.numel()) * 4, 0);
  const std::int64_t q = row_quantum(t);
  const std::int64_t R = n == 2 ? 0 : need.hi[n - 2] - need.lo[n - 2];
  const std::int64_t C = need.hi[n - 1] - need.lo[n - 1];
  std::vector<float> slab;
  std::vector<std::uint8_t> qs;
  std::vector<float> ss;
  std::size_t data_o = 0, scale_o = 0;
  for (std::int64_t r0 = need.lo[0]; r0 < need.hi[0]; r0 += q) {
    Box s = need;
    s.lo[0] = r0;
    s.hi[0] = std::min(need.hi[0], r0 + q);
    const std::int64_t rows = n == 2 ? s.hi[0] - s.lo[0] : R;
    const std::int64_t mats = s.numel() / (rows * C);
    slab.resize(static_cast<std::size_t>(s.numel()));
    std::size_t o = 0;
    for_each_run(s, [&](const std::vector<std::int64_t>& i, std::int64_t len) {
      std::int64_t off = rd.offset(i);
      for (std::int64_t k = 0; k < len; ++k, off += step) slab[o++] = rd.load(off);
    });
    qs.resize(slab.size());
    for (std::int64_t m = 0; m < mats; ++m) {
      std::span<const float> in(slab.data() + m * rows * C, rows * C);
      std::span<std::uint8_t> out(qs.data() + m * rows * C, rows * C);
      if (t.quant == Quant::fp8_block128) {
        ss.resize(((rows + 127) / 128) * ((C + 127) / 128));
        quantize_fp8_block128(in, rows, C, out, ss);
      } else {
        ss.resize(rows);
        quantize_fp8_per_channel(in, rows, C, out, ss);
      }
      std::memcpy(scales.data() + scale_o, ss.data(), ss.size() * 4);
      scale_o += ss.size() * 4;
    }
    // Keep the chunk's own columns (per-channel needs whole rows, the chunk may hold fewer).
    const std::int64_t c0 = cb.lo[n - 1] - need.lo[n - 1];
    const std::int64_t cw = cb.hi[n - 1] - cb.lo[n - 1];
    for (std::int64_t row = 0; row < static_cast<std::int64_t>(qs.size()) / C; ++row) {
      std::memcpy(data.data() + data_o, qs.data() + row * C + c0, cw);
      data_o += cw;
    }
  }
  return {};
}

}  // namespace

Status prepare_chunk(const Schedule& s, const Chunk& c, std::span<const SourceView* const> sources,
                     std::span<std::byte> out, std::span<std::byte> scale_out) {
  const Image& img = s.images[c.image];
  const PlannedTarget& t = s.targets[img.target];
  if (out.size() < c.bytes || scale_out.size() < c.scale_bytes) {
    return Status(Errc::invalid_argument, fmt::format("target '{}': chunk output too small", t.name));
  }
  const RowSpan span = span_of(t, img, c);
  const std::int64_t rows = c.row_hi - c.row_lo;
  const std::int64_t srows = row_quantum(t) == 128 ? (c.row_hi + 127) / 128 - c.row_lo / 128 : rows;
  std::uint64_t row_off = 0, srow_off = 0;
  std::vector<std::uint8_t> data, scales;
  for (std::size_t p = 0; p < img.part_boxes.size(); ++p) {
    if (c.part >= 0 && static_cast<std::size_t>(c.part) != p) continue;
    if (p >= sources.size() || sources[p] == nullptr) {
      return Status(Errc::invalid_argument, fmt::format("target '{}': no view of source '{}'", t.name, t.sources[p]));
    }
    if (auto st = prepare_part(t, p, img.part_boxes[p], c, *sources[p], data, scales); !st.ok()) return st;
    const std::uint64_t part_row = rows > 0 ? data.size() / rows : 0;
    place_rows(data, part_row, rows, out, span.row_bytes, row_off);
    row_off += part_row;
    if (c.scale_bytes) {
      const std::uint64_t spart_row = srows > 0 ? scales.size() / srows : 0;
      place_rows(scales, spart_row, srows, scale_out, span.scale_row_bytes, srow_off);
      srow_off += spart_row;
    }
  }
  return {};
}

Status prepare_image(const Schedule& s, std::uint32_t image, std::span<const SourceView* const> sources,
                     std::span<std::byte> out, std::span<std::byte> scale_out) {
  if (image >= s.images.size()) return Status(Errc::invalid_argument, fmt::format("image {} of {}", image, s.images.size()));
  const Image& img = s.images[image];
  if (out.size() < img.bytes || scale_out.size() < img.scale_bytes) {
    return Status(Errc::invalid_argument, "image output too small");
  }
  for (const Chunk& c : s.chunks) {
    if (c.image != image) continue;
    if (auto st = prepare_chunk(s, c, sources, out.subspan(c.offset, c.bytes), scale_out.subspan(c.scale_offset, c.scale_bytes));
        !st.ok()) {
      return st;
    }
  }
  return {};
}

}  // namespace fabric::weights
