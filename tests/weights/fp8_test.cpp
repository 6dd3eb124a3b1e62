#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fabric/weights/fp8.hpp"

namespace fabric::weights {
namespace {

TEST(Fp8, EveryFiniteCodeRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    auto b = static_cast<std::uint8_t>(code);
    if ((b & 0x7F) == 0x7F) continue;  // NaN
    EXPECT_EQ(float_to_fp8_e4m3(fp8_e4m3_to_float(b)), b) << code;
  }
}

TEST(Fp8, KnownValues) {
  EXPECT_EQ(float_to_fp8_e4m3(1.0f), 0x38);
  EXPECT_EQ(float_to_fp8_e4m3(448.0f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(1000.0f), 0x7E);   // saturates
  EXPECT_EQ(float_to_fp8_e4m3(-1000.0f), 0xFE);
  EXPECT_EQ(float_to_fp8_e4m3(0x1p-9f), 0x01);   // smallest subnormal
  EXPECT_EQ(float_to_fp8_e4m3(0x1p-10f), 0x00);  // half of it: ties to even (0)
  EXPECT_EQ(float_to_fp8_e4m3(3 * 0x1p-10f), 0x02);  // 1.5 steps: ties to even (2)
  EXPECT_EQ(float_to_fp8_e4m3(1.0625f), 0x38);   // halfway 1 and 1.125: even
  EXPECT_EQ(float_to_fp8_e4m3(1.1875f), 0x3A);   // halfway 1.125 and 1.25: even
  EXPECT_EQ(float_to_fp8_e4m3(std::nanf("")) & 0x7F, 0x7F);
}

TEST(Fp8, BlockScalesCoverRaggedEdges) {
  const std::int64_t rows = 130, cols = 200;
  std::vector<float> in(rows * cols);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = std::sin(static_cast<float>(i)) * (1 + i % 7);
  std::vector<std::uint8_t> out(in.size());
  std::vector<float> scales(2 * 2);
  quantize_fp8_block128(in, rows, cols, out, scales);
  // The block's largest magnitude maps to 448.
  float amax = 0;
  for (std::int64_t r = 128; r < rows; ++r)
    for (std::int64_t c = 128; c < cols; ++c) amax = std::max(amax, std::fabs(in[r * cols + c]));
  EXPECT_FLOAT_EQ(scales[3], amax / 448.0f);
  for (std::size_t i = 0; i < in.size(); ++i) {
    std::int64_t r = static_cast<std::int64_t>(i) / cols, c = static_cast<std::int64_t>(i) % cols;
    float s = scales[(r / 128) * 2 + c / 128];
    EXPECT_NEAR(fp8_e4m3_to_float(out[i]) * s, in[i], std::fabs(in[i]) / 8 + s * 0x1p-9f);
  }
}

TEST(Fp8, PerChannelScaleIsRowMax) {
  std::vector<float> in = {1, -2, 3, 0, 0, 0};
  std::vector<std::uint8_t> out(6);
  std::vector<float> scales(2);
  quantize_fp8_per_channel(in, 2, 3, out, scales);
  EXPECT_FLOAT_EQ(scales[0], 3.0f / 448.0f);
  EXPECT_FLOAT_EQ(scales[1], 1.0f);  // an all-zero row
  EXPECT_EQ(out[2], 0x7E);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie -> even
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie -> even
  EXPECT_EQ(bf16_to_float(0x4040), 3.0f);
}

}  // namespace
}  // namespace fabric::weights
