#include "fabric/weights/metadata.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace fabric::weights {

std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::bf16: return 2;
    case DType::f32: return 4;
    case DType::fp8_e4m3: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::bf16: return "bfloat16";
    case DType::f32: return "float32";
    case DType::fp8_e4m3: return "float8_e4m3fn";
  }
  return "?";
}

Result<DType> parse_dtype(std::string_view name) {
  if (name == "bfloat16" || name == "bf16") return DType::bf16;
  if (name == "float32" || name == "f32") return DType::f32;
  if (name == "float8_e4m3fn" || name == "fp8_e4m3" || name == "fp8") return DType::fp8_e4m3;
  return Status(Errc::invalid_argument, fmt::format("unknown dtype '{}'", name));
}

std::string_view quant_name(Quant quant) noexcept {
  switch (quant) {
    case Quant::none: return "none";
    case Quant::fp8_block128: return "block128";
    case Quant::fp8_per_channel: return "per_channel";
  }
  return "?";
}

Result<Quant> parse_quant(std::string_view name) {
  if (name == "none" || name.empty()) return Quant::none;
  if (name == "block128") return Quant::fp8_block128;
  if (name == "per_channel") return Quant::fp8_per_channel;
  return Status(Errc::invalid_argument, fmt::format("unknown quantization '{}'", name));
}

std::uint32_t Mesh::num_ranks() const noexcept {
  std::uint32_t n = 1;
  for (const auto& d : dims) n *= d.size;
  return n;
}

std::vector<std::uint32_t> Mesh::coords(std::uint32_t rank) const {
  std::vector<std::uint32_t> c(dims.size());
  for (std::size_t i = dims.size(); i-- > 0;) {
    c[i] = rank % dims[i].size;
    rank /= dims[i].size;
  }
  return c;
}

std::int64_t Box::numel() const noexcept {
  std::int64_t n = 1;
  for (std::size_t i = 0; i < lo.size(); ++i) n *= std::max<std::int64_t>(0, hi[i] - lo[i]);
  return n;
}

bool Box::contains(const Box& other) const noexcept {
  if (other.lo.size() != lo.size()) return false;
  for (std::size_t i = 0; i < lo.size(); ++i) {
    if (other.lo[i] < lo[i] || other.hi[i] > hi[i]) return false;
  }
  return true;
}

std::string Box::to_string() const {
  std::string s = "[";
  for (std::size_t i = 0; i < lo.size(); ++i) {
    s += fmt::format("{}{}:{}", i ? ", " : "", lo[i], hi[i]);
  }
  return s + "]";
}

std::string shape_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

LocalBox local_box(const Shape& shape, const std::vector<Placement>& placements,
                   const std::vector<std::uint32_t>& mesh_sizes,
                   const std::vector<std::uint32_t>& coords, const std::vector<bool>& skip) {
  LocalBox out;
  out.box.lo.assign(shape.size(), 0);
  out.box.hi = shape;
  for (std::size_t d = 0; d < placements.size() && d < mesh_sizes.size(); ++d) {
    const Placement& p = placements[d];
    if (p.kind == Placement::Kind::only) {
      if (coords[d] != static_cast<std::uint32_t>(p.value)) return {};
      continue;
    }
    if (p.kind != Placement::Kind::shard || (d < skip.size() && skip[d])) continue;
    auto dim = static_cast<std::size_t>(p.value);
    std::int64_t n = out.box.hi[dim] - out.box.lo[dim];
    std::int64_t k = mesh_sizes[d];
    std::int64_t c = (n + k - 1) / k;  // torch.chunk: ceil-sized pieces, the last ones short
    std::int64_t i = coords[d];
    std::int64_t base = out.box.lo[dim];
    out.box.lo[dim] = base + std::min(i * c, n);
    out.box.hi[dim] = base + std::min((i + 1) * c, n);
  }
  out.held = true;
  return out;
}

}  // namespace fabric::weights
