// 4-bit blocks (E2M1 with RNE, INT4) quantized straight into packed words with the operations a
// GPU issues cheaply: the same scale code and element codes as quantize_block (formats/recipes.hpp)
// for every input, packed as the kernels store them.
//
// quantize_block converts one element at a time through compares and selects, which on Hopper
// share the half-rate integer pipe: the E2M1 kernels ran out of issue slots, not bandwidth. Here
// each element costs three FMAs and three minimums (e2m1_magnitude_magic), its code and sign move
// to its nibble with integer multiply-adds, and the IEEE division of
// the reference recipe becomes a reciprocal per block and two FMA corrections per element
// (divide_by_reciprocal). Blocks that are not plain (a NaN or inf element; rules or variants with
// no fast form here) run quantize_block itself, so the results never differ.
#pragma once

#include <cstdint>

#include "formats/recipes.hpp"

namespace kvq {

// x / d correctly rounded, given y = 1/d correctly rounded (IEEE): q0 = x * y is within two ulps
// of x / d, one FMA correction q1 = q0 + (x - q0 * d) * y makes it faithful, and a second gives
// the correctly rounded quotient (Markstein's theorem: y within half an ulp of 1/d, q1 within an
// ulp of x / d; each residual x - q * d is then exact in one FMA). Holds while nothing over- or
// underflows: the caller keeps d in [2^-64, 2^64]. Quotients that overflow give inf or NaN, which
// every 4-bit code saturates the same way as the IEEE quotient. The gpu suite compares the codes
// of the two over all 2^32 x for a set of d (fast-paths/...).
KVQ_HD inline float divide_by_reciprocal(float x, float d, float y) {
  const float q0 = x * y;
  const float q1 = fmaf(fmaf(-q0, d, x), y, q0);
  return fmaf(fmaf(-q1, d, x), y, q1);
}
inline constexpr float kDivideByReciprocalMin = 0x1p-64f, kDivideByReciprocalMax = 0x1p64f;

namespace packed_detail {

// max(m, a) with NaN propagating (PTX max.NaN.f32): one pass over a block tells a finite block
// (the result is then its max |x|, as quantize_block's) from one with NaN or inf.
KVQ_HD inline float max_nan(float m, float a) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(m), "f"(a));
  return r;
#else
  return (m != m || a != a) ? float_from_bits(0x7fffffffu) : (a > m ? a : m);
#endif
}

// The sign bit of x as 0 or 1. On the device the high word of bits * 2, an IMAD.HI on the FMA pipe
// (a shift would take the integer pipe, which the minimums already load).
KVQ_HD inline std::uint32_t sign_bit(float x) {
#if defined(__CUDA_ARCH__)
  return __umulhi(bits_of(x), 2u);
#else
  return bits_of(x) >> 31;
#endif
}

// The magnitude code of element q as the bits of kMagnitudeMagic + code.
template <bool kInt4>
KVQ_HD inline std::uint32_t magic_bits(float q) {
  return bits_of(kInt4 ? int4_magnitude_magic(fabsf(q)) : e2m1_magnitude_magic(fabsf(q)));
}

// Eight scaled elements q (their signs from the unscaled x: a scale is positive, and x * 0 keeps
// the sign as quantize_block's x * 0 does) to one word: element k in bits 4k..4k+3. The nibbles
// add up as sum((magic_bits_k - bits(kMagnitudeMagic) + 8 * sign_k) * 16^k), exact in 32-bit
// wrapping arithmetic: integer multiply-adds (IMAD, the FMA pipe), the magic subtracted once.
template <bool kInt4>
KVQ_HD inline std::uint32_t pack_eight(const float* q, const float* x) {
  constexpr std::uint32_t kMagicBits = 0x4b000000u;               // bits_of(kMagnitudeMagic)
  constexpr std::uint32_t kMagicSum = kMagicBits * 0x11111111u;  // sum of kMagicBits * 16^k, wrapped
  std::uint32_t word = 0u - kMagicSum;
  KVQ_UNROLL
  for (int k = 0; k < 8; ++k) word += magic_bits<kInt4>(q[k]) * (1u << (4 * k)) + sign_bit(x[k]) * (8u << (4 * k));
  return word;
}

// The words of a block: q = x * y, or x / d from y = 1/d (kDivide); one loop per case.
template <int kN, bool kDivide>
KVQ_HD inline void encode_words(bool int4, const float* x, float d, float y, std::uint32_t* words) {
  KVQ_UNROLL
  for (int w = 0; w < kN / 8; ++w) {
    float q[8];
    KVQ_UNROLL
    for (int k = 0; k < 8; ++k) q[k] = kDivide ? divide_by_reciprocal(x[8 * w + k], d, y) : x[8 * w + k] * y;
    words[w] = int4 ? pack_eight<true>(q, x + 8 * w) : pack_eight<false>(q, x + 8 * w);
  }
}

}  // namespace packed_detail

// Whether quantize_block_packed has a fast form for the recipe's elements (else it runs
// quantize_block for every block).
KVQ_HD constexpr bool has_packed_fast_form(const Recipe& r) {
  const bool four_bit = r.element == FormatId::e2m1 || r.element == FormatId::int4;
  return four_bit && r.element_rounding == Rounding::nearest_even && !r.element_input_bf16 &&
         !(r.scale == BlockScale::e4m3_two_level && r.two_level == TwoLevel::four_over_six);
}

// Unpacked 4-bit codes (one a byte) to words, element 8w + k in bits 4k..4k+3 of word w.
KVQ_HD inline void pack_codes(const std::uint8_t* codes, int n, std::uint32_t* words) {
  KVQ_UNROLL
  for (int w = 0; w < n / 8; ++w) {
    std::uint32_t word = 0;
    KVQ_UNROLL
    for (int k = 0; k < 8; ++k) word |= static_cast<std::uint32_t>(codes[8 * w + k] & 0xFu) << (4 * k);
    words[w] = word;
  }
}

// One block of kN values (a multiple of 8) of a 4-bit recipe: kN / 8 words (their little-endian
// bytes are the packed pairs, element 2i in the low nibble) and the scale code, always equal to
// quantize_block's codes packed.
template <int kN>
KVQ_HD inline std::uint8_t quantize_block_packed(const Recipe& r, float g, const float* x, std::uint32_t* words) {
  static_assert(kN % 8 == 0 && kN <= kMaxRecipeBlock, "whole words");
  if (has_packed_fast_form(r)) {
    float m = 0.0f;
    KVQ_UNROLL
    for (int i = 0; i < kN; ++i) m = packed_detail::max_nan(m, fabsf(x[i]));
    if (m <= 3.4028235e38f) {  // finite: m is the block max, and no element is NaN
      const BlockPlan p = plan_block(r, g, m, false);
      // A finite multiplier (an inf one makes 0 * inf = NaN, which quantize_block codes without its
      // sign), or a divisor where divide_by_reciprocal is exact.
      const bool multiply = p.op == ElementOp::multiply && p.by <= 3.4028235e38f;
      if (multiply || (p.op == ElementOp::divide && p.by >= kDivideByReciprocalMin && p.by <= kDivideByReciprocalMax)) {
        const bool int4 = r.element == FormatId::int4;
        if (multiply) {
          packed_detail::encode_words<kN, false>(int4, x, p.by, p.by, words);
        } else {
          packed_detail::encode_words<kN, true>(int4, x, p.by, 1.0f / p.by, words);
        }
        return p.scale_code;
      }
    }
  }
  std::uint8_t codes[kN];
  const std::uint8_t scale = quantize_block(r, g, x, kN, codes);
  pack_codes(codes, kN, words);
  return scale;
}

}  // namespace kvq
