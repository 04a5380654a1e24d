// Quantizing large 8-bit blocks (the MLA FP8 tile of 128) with the block split over lanes: each
// lane loads and encodes a span of kLaneSpan elements, the lanes of a block combine their maxima
// (a warp shuffle on the GPU, a loop in the CPU twin), and every lane applies the block's plan.
// One thread per 128-element tile needed 155 registers and ran at 65% of copy bandwidth.
//
// The codes and scale are quantize_block's (formats/recipes.hpp): the block max is the largest
// |x| with NaN ignored, in any order; plan_block gives the same scale code and the same x * 2^-e
// as quantize_block's E8M0 case, and encode_element is its element code. The GPU kernel is checked
// against the CPU twin (quantize_cpu) and this file's twin against quantize_cpu, byte for byte.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/quantize.hpp"

namespace kvq::kernels {

inline constexpr int kLaneSpan = 16;  // 32 bytes of BF16/FP16 input, 16 bytes of codes

// Whether shape s runs lane-split (quantize_cpu and device::quantize send it here): E4M3
// elements, E8M0 blocks of 128 (mla-fp8-tile128).
KVQ_HD inline bool lane_split(const QuantizeShape& s) {
  return s.recipe.element == FormatId::e4m3fn && s.recipe.scale == BlockScale::e8m0_pow2 && s.recipe.block == 128 &&
         !s.recipe.element_input_bf16;
}

// The largest |x| of a span with NaN ignored, and whether some element is NaN.
struct SpanMax {
  float max = 0.0f;
  bool nan = false;
};
KVQ_HD inline SpanMax span_max(const float* x) {
  SpanMax m;
  KVQ_UNROLL
  for (int i = 0; i < kLaneSpan; ++i) {
    const float a = fabsf(x[i]);
    m.nan = m.nan || a != a;
    m.max = a > m.max ? a : m.max;  // NaN never wins
  }
  return m;
}
KVQ_HD inline SpanMax combine(SpanMax a, SpanMax b) { return {a.max > b.max ? a.max : b.max, a.nan || b.nan}; }

// A span's codes under its block's plan (an E8M0 plan: multiply by 2^-e, or NaN), as four
// little-endian words: encode_element of each, four at a time (e4m3x4_satfinite_fast) where that is
// what encode_element does (E4M3 nearest-even, lane_split excludes the BF16 input variant).
KVQ_HD inline void encode_span(const Recipe& r, const BlockPlan& p, const float* x, std::uint32_t* words) {
  float q[kLaneSpan];
  KVQ_UNROLL
  for (int i = 0; i < kLaneSpan; ++i) q[i] = p.op == ElementOp::nan ? float_from_bits(0x7fc00000u) : x[i] * p.by;
  if (r.element == FormatId::e4m3fn && r.element_rounding == Rounding::nearest_even && !r.element_input_bf16) {
    KVQ_UNROLL
    for (int w = 0; w < kLaneSpan / 4; ++w) words[w] = e4m3x4_satfinite_fast(q + 4 * w);
    return;
  }
  KVQ_UNROLL
  for (int w = 0; w < kLaneSpan / 4; ++w) {
    words[w] = 0;
    KVQ_UNROLL
    for (int i = 0; i < 4; ++i) words[w] |= std::uint32_t{encode_element(r, q[4 * w + i])} << (8 * i);
  }
}

// Both return "" or an error naming the argument; s must be lane_split.
std::string quantize_lanes_cpu(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                               std::uint8_t* scales);
namespace device {
std::string quantize_lanes(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                           std::uint8_t* scales, void* stream);
}  // namespace device

}  // namespace kvq::kernels
