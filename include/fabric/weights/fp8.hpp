#pragma once
// BF16/FP32 -> FP8 e4m3 (the "fn" variant: no infinities, 0x7F is NaN, max 448)
// with round-to-nearest-even, and the two scale layouts of FP8 checkpoints.

#include <cstdint>
#include <span>

namespace fabric::weights {

inline constexpr float kFp8E4m3Max = 448.0f;

[[nodiscard]] float bf16_to_float(std::uint16_t bits) noexcept;
[[nodiscard]] std::uint16_t float_to_bf16(float value) noexcept;  // round to nearest even
// Saturates to +-448; NaN stays NaN.
[[nodiscard]] std::uint8_t float_to_fp8_e4m3(float value) noexcept;
[[nodiscard]] float fp8_e4m3_to_float(std::uint8_t bits) noexcept;

// The scale of a group of values with largest magnitude `amax`: amax / 448, or
// 1 for an all-zero group. Quantized value = fp8(x / scale).
[[nodiscard]] float fp8_scale(float amax) noexcept;

// Quantizes a row-major [rows, cols] float matrix. Block: one scale per
// 128x128 block (the last ones may be ragged), scales row-major
// [ceil(rows/128), ceil(cols/128)]. Per-channel: one scale per row.
void quantize_fp8_block128(std::span<const float> in, std::int64_t rows, std::int64_t cols,
                           std::span<std::uint8_t> out, std::span<float> scales);
void quantize_fp8_per_channel(std::span<const float> in, std::int64_t rows, std::int64_t cols,
                              std::span<std::uint8_t> out, std::span<float> scales);

}  // namespace fabric::weights
