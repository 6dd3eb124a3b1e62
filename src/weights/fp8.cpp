#include "fabric/weights/fp8.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace fabric::weights {

float bf16_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t float_to_bf16(float value) noexcept {
  auto u = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

std::uint8_t float_to_fp8_e4m3(float value) noexcept {
  auto u = std::bit_cast<std::uint32_t>(value);
  auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80);
  if (std::isnan(value)) return sign | 0x7F;
  float a = std::fabs(value);
  if (a >= kFp8E4m3Max) return sign | 0x7E;
  // Below the smallest normal (2^-6) the grid is uniform, steps of 2^-9:
  // nearbyint rounds half to even in the default rounding mode.
  if (a < 0x1p-6f) {
    auto m = static_cast<std::uint32_t>(std::nearbyint(a * 0x1p9f));  // 0..8; 8 is 2^-6
    return sign | static_cast<std::uint8_t>(m);
  }
  std::uint32_t bits = std::bit_cast<std::uint32_t>(a);
  std::int32_t exp = static_cast<std::int32_t>(bits >> 23) - 127;
  std::uint32_t mant = bits & 0x7FFFFF;
  // Keep 3 mantissa bits, rounding the 20 dropped ones to nearest even.
  std::uint32_t keep = mant >> 20;
  std::uint32_t rest = mant & 0xFFFFF;
  if (rest > 0x80000 || (rest == 0x80000 && (keep & 1))) ++keep;
  if (keep == 8) {
    keep = 0;
    ++exp;
  }
  std::uint32_t code = (static_cast<std::uint32_t>(exp + 7) << 3) | keep;
  return sign | static_cast<std::uint8_t>(std::min<std::uint32_t>(code, 0x7E));
}

float fp8_e4m3_to_float(std::uint8_t bits) noexcept {
  float sign = (bits & 0x80) ? -1.0f : 1.0f;
  std::uint32_t exp = (bits >> 3) & 0xF;
  std::uint32_t mant = bits & 0x7;
  if (exp == 0xF && mant == 0x7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, static_cast<int>(exp) - 7);
}

float fp8_scale(float amax) noexcept { return amax > 0.0f ? amax / kFp8E4m3Max : 1.0f; }

namespace {
inline std::uint8_t quantize_one(float x, float scale) noexcept {
  float q = x / scale;
  return float_to_fp8_e4m3(std::clamp(q, -kFp8E4m3Max, kFp8E4m3Max));
}
}  // namespace

void quantize_fp8_block128(std::span<const float> in, std::int64_t rows, std::int64_t cols,
                           std::span<std::uint8_t> out, std::span<float> scales) {
  const std::int64_t brows = (rows + 127) / 128;
  const std::int64_t bcols = (cols + 127) / 128;
  for (std::int64_t br = 0; br < brows; ++br) {
    const std::int64_t r0 = br * 128;
    const std::int64_t r1 = std::min(rows, r0 + 128);
    for (std::int64_t bc = 0; bc < bcols; ++bc) {
      const std::int64_t c0 = bc * 128;
      const std::int64_t c1 = std::min(cols, c0 + 128);
      float amax = 0.0f;
      for (std::int64_t r = r0; r < r1; ++r) {
        for (std::int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(in[r * cols + c]));
      }
      const float scale = fp8_scale(amax);
      scales[br * bcols + bc] = scale;
      for (std::int64_t r = r0; r < r1; ++r) {
        for (std::int64_t c = c0; c < c1; ++c) out[r * cols + c] = quantize_one(in[r * cols + c], scale);
      }
    }
  }
}

void quantize_fp8_per_channel(std::span<const float> in, std::int64_t rows, std::int64_t cols,
                              std::span<std::uint8_t> out, std::span<float> scales) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(in[r * cols + c]));
    const float scale = fp8_scale(amax);
    scales[r] = scale;
    for (std::int64_t c = 0; c < cols; ++c) out[r * cols + c] = quantize_one(in[r * cols + c], scale);
  }
}

}  // namespace fabric::weights
