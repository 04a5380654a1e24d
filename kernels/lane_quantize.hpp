// Quantizing E8M0-scaled blocks with the block split over lanes: each lane loads and encodes a
// span of kLaneSpan elements, the lanes of a block combine their maxima (a warp shuffle on the
// GPU, a loop in the CPU twin), and every lane applies the block's plan. Two shapes run here:
// - the MLA FP8 tile of 128 (eight lanes): one thread per tile needs 155 registers and runs
//   slower (docs/performance.md);
// - FP32 input in blocks of 32 (two lanes; mxfp4-*, mxfp8, mxint8, mxint4): one thread per block
//   loads its 128 bytes at a 128-byte lane stride, 32 values in registers, and runs slower;
// - E4M3 blocks of 32 from BF16/FP16 input (two lanes; the MXFP8 rules): one thread per block
//   loaded its 64 bytes at a 64-byte lane stride and waited on them (docs/performance.md);
// - engine variants (kLaneVariants): MODEL1's E4M3 records as flat recipes (tiles of 64 and 32,
//   four and two lanes, any input), which ran quantize_block a thread a block, and ModelOpt's
//   MXFP4 from FP32 input (two lanes), which ran the packed variant route a thread a block.
//
// The codes and scale are quantize_block's (formats/recipes.hpp): the block max is the largest
// |x| with NaN ignored, in any order; lane_plan gives the same scale code and the same x * 2^-e
// as quantize_block's E8M0 case, and encode_element is its element code (4-bit spans of a finite
// block: quantize_block_packed's packed words, the same codes). The GPU kernel is checked against
// the CPU twin (quantize_cpu) and the twin against the recipe oracle, byte for byte.
#pragma once

#include <cstdint>
#include <string>

#include "formats/recipe_names.hpp"
#include "kernels/quantize.hpp"
#include "kernels/status.hpp"

namespace kvq::kernels {

inline constexpr int kLaneSpan = 16;  // 32 bytes of BF16/FP16 input (64 of FP32); 16 or 8 bytes of codes

// The engine variants that run lane-split, each in a kernel with its whole recipe as constants:
// E8M0 scales computed in FP32 (recipe_detail::pow2_plan is their rule), at their own block; E4M3
// elements from any input, E2M1 ones with a packed variant form (formats/packed_quantize.hpp
// has_packed_variant_form) from FP32 input (16-bit blocks of 32 run a thread a block).
inline constexpr std::string_view kLaneVariants[] = {"mla-model1-tile64", "mla-model1-mxfp8-tile32", "mxfp4-modelopt"};
inline constexpr int kLaneVariantCount = sizeof(kLaneVariants) / sizeof(kLaneVariants[0]);
template <int V>
constexpr Recipe kLaneVariantRecipe = recipe_from_name(kLaneVariants[V]).value().recipe;
// The index in kLaneVariants of recipe r (the whole recipe, its block included), or -1.
constexpr int lane_variant_of(const Recipe& r) {
  const auto at = [&]<int V>(auto& self) -> int {
    if constexpr (V == kLaneVariantCount) {
      return -1;
    } else {
      static_assert((kLaneVariantRecipe<V>.element == FormatId::e4m3fn ||
                     (kLaneVariantRecipe<V>.element == FormatId::e2m1 && has_packed_variant_form(kLaneVariantRecipe<V>))) &&
                        kLaneVariantRecipe<V>.scale == BlockScale::e8m0_pow2 &&
                        kLaneVariantRecipe<V>.scale_dtype == FormatId::fp32 && kLaneVariantRecipe<V>.block % 16 == 0 &&
                        32 % (kLaneVariantRecipe<V>.block / 16) == 0,
                    "a lane variant: E4M3, or packed E2M1, under FP32 E8M0 scales, whole lanes in a warp");
      constexpr Recipe kVariant = kLaneVariantRecipe<V>;
      return r == kVariant ? V : self.template operator()<V + 1>(self);
    }
  };
  return at.template operator()<0>(at);
}

// Whether shape s with input type `input` runs lane-split (quantize_cpu and device::quantize send
// it here): E8M0 blocks, either E4M3 tiles of 128 (mla-fp8-tile128) from any input, or blocks of
// 32 with elements rounded half to even (the named MX recipes) from FP32 input, E4M3 ones (MXFP8)
// from any input; and the engine variants of kLaneVariants (E2M1 ones from FP32 input).
KVQ_HD inline bool lane_split(const QuantizeShape& s, DType input) {
  const Recipe& r = s.recipe;
  if (r.scale != BlockScale::e8m0_pow2) return false;
  if (is_engine_variant(r)) return lane_variant_of(r) >= 0 && (r.element == FormatId::e4m3fn || input == DType::fp32);
  if (r.element == FormatId::e4m3fn && r.block == 128) return true;
  return r.block == 32 && (input == DType::fp32 || r.element == FormatId::e4m3fn) &&
         r.element_rounding == Rounding::nearest_even;
}
// The lane-split entry points' check of their arguments (quantize_lanes and its CPU twin).
inline Status validate_lane_split(const QuantizeShape& s, DType input) {
  if (auto e = validate(s); !e.ok()) return e;
  if (!lane_split(s, input))
    return "recipe: the lane-split quantizer takes E8M0 blocks of 128 E4M3 elements, of 32 from FP32 input or of "
           "E4M3, or a lane variant (kLaneVariants)";
  return {};
}
KVQ_HD inline int lanes_of(const QuantizeShape& s) { return s.recipe.block / kLaneSpan; }
// Code words (four bytes each) of a span: two of 4-bit codes, four of 8-bit ones.
KVQ_HD inline int span_words(const QuantizeShape& s) { return s.packed() ? kLaneSpan / 8 : kLaneSpan / 4; }

// The largest |x| of a span of kN values with NaN ignored, and whether some element is NaN (also a
// piece of the MLA writers' tiles, kernels/mla_kernels.hpp).
struct SpanMax {
  float max = 0.0f;
  bool nan = false;
};
// The larger of a and m, m never NaN, a possibly NaN (then m): one FMNMX on the device (max.f32
// gives the other operand for a NaN one); a compare and select on the host, where the C library's
// fmaxf returns NaN for a signaling NaN operand.
KVQ_HD inline float max_of_non_nan(float a, float m) {
#if defined(__CUDA_ARCH__)
  return fmaxf(a, m);
#else
  return a > m ? a : m;
#endif
}
template <int kN = kLaneSpan>
KVQ_HD inline SpanMax span_max(const float* x) {
  SpanMax m;
  KVQ_UNROLL
  for (int i = 0; i < kN; ++i) {
    const float a = fabsf(x[i]);
    m.nan = m.nan || a != a;
    m.max = max_of_non_nan(a, m.max);  // NaN never wins
  }
  return m;
}
KVQ_HD inline SpanMax combine(SpanMax a, SpanMax b) { return {max_of_non_nan(a.max, b.max), a.nan || b.nan}; }

// The plan of a lane-split block with max m: quantize_block_with_max's E8M0 case, the NaN plan of a
// NaN block (e8m0_nan_block), else pow2_plan's scale code and multiplier (the engine variants'
// rules too; the reference rules' 2^-e, plan_block's).
KVQ_HD inline BlockPlan lane_plan(const Recipe& r, SpanMax m) {
  if (e8m0_nan_block(r, m.max, m.nan)) return {0xFF, ElementOp::nan, 0.0f};
  return recipe_detail::pow2_plan(r, m.max);
}

// A span's codes under its block's plan (an E8M0 plan: multiply by 2^-e, or NaN: the values NaN,
// or under a float exponent x * 0, as quantize_block's) with block max m, as span_words(s)
// little-endian words:
// - 4-bit elements of a finite block with a packed fast form, or an engine variant's packed variant
//   form: the packed words of quantize_block_packed (formats/packed_quantize.hpp: signs, then
//   magics with integer adds; a variant's zero signs by sign_zeros, its rounding's magic by
//   block_magnitude), where the span allows them (sign_zeros, the four-over-six package's
//   rounding below 7: the span's max is at most the block's);
// - 8-bit elements: encode_byte_words (E4M3 half to even four at a time);
// - else encode_element of each, packed two a byte.
KVQ_HD inline void encode_span(const QuantizeShape& s, const BlockPlan& p, SpanMax m, const float* x,
                               std::uint32_t* words) {
  const Recipe& r = s.recipe;
  if (s.packed() && (has_packed_fast_form(r) || has_packed_variant_form(r)) && !m.nan && m.max <= kFp32Max &&
      p.op == ElementOp::multiply && packed_detail::packable(p)) {
    std::uint32_t signs[kLaneSpan / 8];
    KVQ_UNROLL
    for (int w = 0; w < kLaneSpan / 8; ++w) signs[w] = packed_detail::sign_nibbles(x + 8 * w);
    const packed_detail::Magnitude magnitude = packed_detail::block_magnitude(r, m.max, p.by);
    const packed_detail::ZeroSign zero = zero_sign_of(r);
    if ((r.element_cast != ElementCast::e2m1_by_rounding || magnitude == packed_detail::Magnitude::e2m1_below_7) &&
        (zero == packed_detail::ZeroSign::of_x || packed_detail::sign_zeros<kLaneSpan>(x, p, zero, signs))) {
      packed_detail::encode_words<kLaneSpan, false>(magnitude, x, signs, p.by, p.by, words);
      return;
    }
  }
  float q[kLaneSpan];
  KVQ_UNROLL
  for (int i = 0; i < kLaneSpan; ++i)
    q[i] = p.op != ElementOp::nan ? x[i] * p.by : (r.float_exponent ? x[i] * 0.0f : canonical_nan());
  if (!s.packed()) {
    encode_byte_words<kLaneSpan>(r, q, words);
    return;
  }
  std::uint8_t codes[kLaneSpan];
  KVQ_UNROLL
  for (int i = 0; i < kLaneSpan; ++i) codes[i] = encode_element(r, q[i]);
  pack_codes(codes, kLaneSpan, words);
}

// Both return success or an error (kernels/status.hpp) naming the argument; s must be lane_split for
// `input`. g: unused (E8M0 rules have no tensor parameter), as device::quantize passes it.
Status quantize_lanes_cpu(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                          std::uint8_t* scales);
namespace device {
Status quantize_lanes(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                      std::uint8_t* scales, void* stream);
}  // namespace device

}  // namespace kvq::kernels
