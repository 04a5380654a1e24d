// The fast conversion paths (formats/fast_paths.hpp) and the codec conversion each must equal,
// as numbered cases shared by the CPU sample (fast_path_properties.cpp) and the GPU sweep over
// all 2^32 inputs (gpu/format_sweeps.cu). Decode cases read the input's low byte as the code.
#pragma once

#include <cstdint>

#include "formats/fast_decode.hpp"
#include "formats/fast_paths.hpp"
#include "formats/packed_quantize.hpp"
#include "proptests/harness/mix32.hpp"

namespace kvq::props {

enum class FastPath : int {
  e2m1_rne, e2m1_rna, e4m3_satfinite, bf16_rne, fp16_rne, e2m1_value, e4m3_value, int4_rne, int8_rne, int4_value, int8_value,
  e4m3_from_fp64, e4m3_from_fp64_sticky, e2m1_magic, int4_magic, e2m1_divide_a, e2m1_divide_b, bf16x2_rne_finite,
  fp16x2_rne_finite, e4m3x2_of_products, e4m3x4_satfinite, e2m1_magic_away,
  e2m1_magic_below_7, e2m1_magic_to_4_5, scale_quotient_a, scale_quotient_b, code_terms, e2m1_round_below_7,
  bf16x2_max_magnitude, pair_sign_nibbles, fp16x2_max_magnitude, e4m3_nonsaturating, e2m1_magic_toward_zero,
  e4m3_tensor_quotient_a, e4m3_tensor_quotient_b
};
inline constexpr int kFastPathCount = 35;
inline constexpr const char* kFastPathNames[kFastPathCount] = {
    "e2m1-rne-satfinite", "e2m1-rna-satfinite", "e4m3-rne-satfinite", "bf16-rne",       "fp16-rne", "e2m1-value",
    "e4m3-value",         "int4-rne-satfinite", "int8-rne-satfinite", "int4-value", "int8-value",
    "e4m3-from-fp64-rne-satfinite", "e4m3-from-fp64-sticky-rne-satfinite", "e2m1-magnitude-magic",
    "int4-magnitude-magic", "e2m1-divide-by-reciprocal-set-a", "e2m1-divide-by-reciprocal-set-b", "bf16x2-rne-finite",
    "fp16x2-rne-finite", "e4m3x2-of-products-finite", "e4m3x4-rne-satfinite", "e2m1-magnitude-magic-away",
    "e2m1-magnitude-magic-below-7", "e2m1-magnitude-magic-to-4.5", "scale-quotient-by-reciprocal-set-a",
    "scale-quotient-by-reciprocal-set-b", "code-terms", "e2m1-round-below-7", "bf16x2-max-magnitude",
    "pair-sign-nibbles", "fp16x2-max-magnitude", "e4m3-rne-nonsaturating", "e2m1-magnitude-magic-toward-zero",
    "e4m3-tensor-quotient-set-a", "e4m3-tensor-quotient-set-b"};

// Denominators of the divide cases (formats/packed_quantize.hpp: divide_by_reciprocal is used for
// d in [2^-64, 2^64]): both ends, powers of two, E4M3 x FP32 products, odd mantissas, near-ones.
KVQ_HD inline float divide_denominator(int i) {
  constexpr float kDenominators[16] = {
      0x1p-64f,        0x1p64f,         1.0f,           3.0f,            0x1.555556p-2f, 0x1.fffffep-1f,
      0x1.000002p+0f,  0x1.8p-20f,      0x1.c3f2a6p-9f, 0x1.7d2b94p+11f, 0x1.23456p-37f, 0x1.fedcbap+40f,
      0x1.b00002p-63f, 0x1.fffffep+63f, 0x1.4cccccp-3f, 0x1.6db6dcp+5f};
  return kDenominators[i];
}

// Eight 4-bit codes of x / d for d in one half of divide_denominator's set, one a nibble: the packed
// path's (magnitude from the magic of |divide_by_reciprocal|, sign from x), or the codec's of the
// IEEE quotient. x NaN or inf never reaches the packed path (its block runs quantize_block).
KVQ_HD inline std::uint32_t divide_codes(std::uint32_t bits, int set, bool fast) {
  const float x = float_from_bits(bits);
  const Conversion e2m1 = convention_conversion(ConventionId::cuda_satfinite, FormatId::e2m1, Rounding::nearest_even);
  std::uint32_t word = 0;
  for (int j = 0; j < 8; ++j) {
    const float d = divide_denominator(8 * set + j);
    std::uint32_t code;
    if (fast && (bits & 0x7f800000u) != 0x7f800000u) {
      code = (bits_of(e2m1_magnitude_magic(fabsf(divide_by_reciprocal(x, d, 1.0f / d)))) - bits_of(kMagnitudeMagic)) |
             ((bits >> 28) & 8u);
    } else {
      code = static_cast<std::uint32_t>(encode(kE2M1, e2m1, unpack(kFP32, bits_of(x / d))));
    }
    word |= code << (4 * j);
  }
  return word;
}

// The per-tensor E4M3 quotients (kernels/block_quantize.hpp tensor_code_words): the E4M3 codes of
// x / d for d in one half of divide_denominator's set, satfinite in the low byte and non-saturating
// (PyTorch's cast) in the high, each pair folded as h = rotl(h, 5) ^ pair; the fast side's quotient
// is divide_for_e4m3_code's from RN(1/d) where |x| < d * kE4m3QuotientLimit (else the IEEE quotient,
// as the kernels divide there), the reference's the IEEE quotient.
KVQ_HD inline std::uint32_t tensor_quotient_codes(std::uint32_t bits, int set, bool fast) {
  const float x = float_from_bits(bits);
  const Conversion satfinite =
      convention_conversion(ConventionId::cuda_satfinite, FormatId::e4m3fn, Rounding::nearest_even);
  const Conversion nonsaturating = convention_conversion(ConventionId::torch, FormatId::e4m3fn, Rounding::nearest_even);
  std::uint32_t fold = 0;
  for (int j = 0; j < 8; ++j) {
    const float d = divide_denominator(8 * set + j);
    const float q = fast && fabsf(x) < d * kE4m3QuotientLimit ? divide_for_e4m3_code(x, d, 1.0f / d) : x / d;
    const auto pair = static_cast<std::uint32_t>(encode(kE4M3FN, satfinite, unpack(kFP32, bits_of(q))) |
                                                 encode(kE4M3FN, nonsaturating, unpack(kFP32, bits_of(q))) << 8);
    fold = ((fold << 5) | (fold >> 27)) ^ pair;
  }
  return fold;
}

// The lean scale quotients (formats/packed_quantize.hpp: two_level_plan_lean): x / d from RN(1/d)
// by divide_by_reciprocal for the divisors the plan uses, set a: 6 and values of g at and inside
// [kLeanScaleMin, kLeanScaleMax]; set b: E4M3 scale values (normal, subnormal, the largest). The
// dividends the plan divides: +0 and |x| in [2^-44, 2^41] (others read 0; -0 is never one, and
// divide_by_reciprocal makes it +0). The result folds the eight quotients as h = rotl(h, 5) ^ bits:
// one differing quotient always shows, and so do quotients differing in the same bits.
KVQ_HD inline float scale_denominator(int i) {
  constexpr float kDenominators[16] = {
      6.0f,       0x1p-40f,   0x1p40f,    0x1.fffffep39f, 0x1.000002p-40f, 0x1.8p-20f, 0x1.c3f2a6p-9f, 0x1.7d2b94p+11f,
      0x1p-9f,    0x1.cp-7f,  0x1.8p-8f,  0x1.6p-6f,      0x1.ap-3f,       0x1.2p+0f,  0x1.ep+3f,      448.0f};
  return kDenominators[i];
}
KVQ_HD inline std::uint32_t scale_quotients(std::uint32_t bits, int set, bool fast) {
  const float x = float_from_bits(bits), a = fabsf(x);
  if (!(bits == 0u || (a >= 0x1p-44f && a <= 0x1p41f))) return 0;
  std::uint32_t fold = 0;
  for (int j = 0; j < 8; ++j) {
    const float d = scale_denominator(8 * set + j);
    const float q = fast ? divide_by_reciprocal(x, d, 1.0f / d) : x / d;
    fold = ((fold << 5) | (fold >> 27)) ^ bits_of(q);
  }
  return fold;
}

// A g's code terms (formats/packed_quantize.hpp: code_terms, what the kernels' tables hold) against
// their definition from the codec's value sf of the code: (1/g)/sf and RN(RN(sf * g)^2), IEEE.
// The input: code bits & 0x7F, which term bit 7, g the positive FP32 (bits & 0x7FFFFF00) | 0x80
// (finite g only, and not the NaN code: others read 0).
KVQ_HD inline std::uint32_t code_terms_case(std::uint32_t bits, bool reference) {
  const int code = static_cast<int>(bits & 0x7fu);
  const bool square = (bits >> 7) & 1u;
  const float g = float_from_bits((bits & 0x7fffff00u) | 0x80u);
  if (!(g <= kFp32Max) || code == 0x7f) return 0;
  if (reference) {
    const float sf = decode_float(kE4M3FN, static_cast<std::uint64_t>(code)), s = sf * g;
    return bits_of(square ? s * s : (1.0f / g) / sf);
  }
  const CodeTerms t = code_terms(g, 1.0f / g, code);
  return bits_of(square ? t.s2 : t.by);
}

// E2M1 half to even by e2m1_round_below_7 (formats/fast_paths.hpp) for |x| < 7 (others read 0): the
// bits of its tiny, which must be the codec's magnitude code << 22 (a value off the E2M1 grid
// would show in other bits).
KVQ_HD inline std::uint32_t round_below_7_case(std::uint32_t bits, bool reference) {
  const float a = fabsf(float_from_bits(bits));
  if (!(a < 7.0f)) return 0;
  if (reference) {
    const Conversion e2m1 = convention_conversion(ConventionId::cuda_satfinite, FormatId::e2m1, Rounding::nearest_even);
    return (static_cast<std::uint32_t>(encode(kE2M1, e2m1, unpack(kFP32, bits))) & 7u) << 22;
  }
  return bits_of(e2m1_round_below_7(a).tiny);
}

// The 16-bit forms of the packed quantizer (formats/packed_quantize.hpp: block_signs_and_max). The
// paired maximum of magnitudes of a = bits and b = mix32(bits), each half against the larger
// magnitude of the codec's two values (a NaN half reads 0x7FFF on both sides; the result's sign
// bits, the XOR of the inputs', are dropped). The sign nibbles of the four words bits,
// rotl(bits, 8), ~bits, mix32(bits) against the sign bits one by one (bits 15 and 31 of a word,
// BF16 or FP16 alike).
KVQ_HD inline std::uint32_t pair_max_case(Format f, std::uint32_t bits, bool reference) {
  const std::uint32_t a = bits, b = mix32(bits);
  const std::uint32_t inf = f.mantissa_bits == 7 ? 0x7f80u : 0x7c00u;
  std::uint32_t r = 0;
  for (int h = 0; h < 2; ++h) {
    std::uint32_t half;
    if (reference) {
      const float va = fabsf(decode_float(f, (a >> (16 * h)) & 0xffffu));
      const float vb = fabsf(decode_float(f, (b >> (16 * h)) & 0xffffu));
      half = (va != va || vb != vb) ? 0x7fffu : static_cast<std::uint32_t>(encode(f, Conversion{}, unpack(kFP32, bits_of(va > vb ? va : vb))));
    } else {
      const std::uint32_t m = f.mantissa_bits == 7 ? packed_detail::pair_max_magnitude<PairWords::bf16>(a, b)
                                                   : packed_detail::pair_max_magnitude<PairWords::fp16>(a, b);
      half = (m >> (16 * h)) & 0x7fffu;
      if (half > inf) half = 0x7fffu;
    }
    r |= half << (16 * h);
  }
  return r;
}
KVQ_HD inline std::uint32_t pair_signs_case(std::uint32_t bits, bool reference) {
  const std::uint32_t pairs[4] = {bits, (bits << 8) | (bits >> 24), ~bits, mix32(bits)};
  if (!reference) return packed_detail::sign_nibbles_pairs(pairs);
  std::uint32_t r = 0;
  for (int k = 0; k < 8; ++k) r |= ((pairs[k / 2] >> (k % 2 ? 31 : 15)) & 1u) << (4 * k + 3);
  return r;
}

// The paired packers (formats/fast_decode.hpp) take non-NaN values only: x in the low half, -x in
// the high half (lane order and sign); a NaN input is outside their domain and reads as 0 in both.
KVQ_HD inline std::uint32_t paired_case(FastPath p, float x, bool reference) {
  if (x != x) return 0;
  if (reference) {
    const Format f = p == FastPath::bf16x2_rne_finite ? kBF16 : kFP16;
    return static_cast<std::uint32_t>(encode(f, Conversion{}, unpack(kFP32, bits_of(x)))) |
           static_cast<std::uint32_t>(encode(f, Conversion{}, unpack(kFP32, bits_of(-x)))) << 16;
  }
  return p == FastPath::bf16x2_rne_finite ? bf16x2_rne_finite(x, -x) : fp16x2_rne_finite(x, -x);
}

// Exact products rounded once to E4M3 (e4m3x2_of_products), finite inputs only (others read 0):
// x * 3 in the low byte (exact products on E4M3 midpoints, which must stay ties, and inexact ones
// just beside them) and x * -4/3 (inexact: the dropped bits must count; and the sign) in the high.
inline constexpr float kProductThree = 3.0f, kProductMinusFourThirds = -0x1.555556p0f;
KVQ_HD inline std::uint32_t products_case(float x, bool reference) {
  if (!(fabsf(x) <= kFp32Max)) return 0;
  if (reference) {
    const Conversion c = convention_conversion(ConventionId::cuda_satfinite, FormatId::e4m3fn, Rounding::nearest_even);
    const double lo = static_cast<double>(x) * kProductThree, hi = static_cast<double>(x) * kProductMinusFourThirds;
    return static_cast<std::uint32_t>(encode_double(kE4M3FN, c, lo) | encode_double(kE4M3FN, c, hi) << 8);
  }
  return e4m3x2_of_products(x, kProductThree, x, kProductMinusFourThirds);
}

// The FP64 cases read the input as the HIGH word of a double: low word 0 (every FP32-exact
// midpoint and code exactly), or a nonzero hash of it (just above each such value, and just
// below the next one): the inputs where rounding via FP32 could go wrong.
KVQ_HD inline double fp64_case_input(FastPath p, std::uint32_t bits) {
  const std::uint32_t low = p == FastPath::e4m3_from_fp64_sticky ? mix32(bits) | 1u : 0u;
  return double_from_bits(static_cast<std::uint64_t>(bits) << 32 | low);
}

KVQ_HD inline std::uint32_t fast_path_result(FastPath p, std::uint32_t bits) {
  const float x = float_from_bits(bits);
  const auto code = static_cast<std::uint8_t>(bits & 0xFF);
  switch (p) {
    case FastPath::e2m1_rne: return e2m1_satfinite_fast(x, false);
    case FastPath::e2m1_rna: return e2m1_satfinite_fast(x, true);
    case FastPath::e4m3_satfinite: return e4m3_satfinite_fast(x);
    case FastPath::bf16_rne: return bf16_rne_fast(x);
    case FastPath::fp16_rne: return fp16_rne_fast(x);
    case FastPath::e2m1_value: return bits_of(e2m1_value_fast(code & 0xF));
    case FastPath::e4m3_value: return bits_of(e4m3_value_fast(code));
    case FastPath::int4_rne: return int_satfinite_fast(x, 2, 7);
    case FastPath::int8_rne: return int_satfinite_fast(x, 6, 127);
    case FastPath::int4_value: return bits_of(int_value_fast(code & 0xF, 2, 7));
    case FastPath::int8_value: return bits_of(int_value_fast(code, 6, 127));
    case FastPath::e4m3_from_fp64:
    case FastPath::e4m3_from_fp64_sticky: return e4m3_satfinite_from_double_fast(fp64_case_input(p, bits));
    case FastPath::e2m1_magic: return bits_of(e2m1_magnitude_magic(fabsf(x))) - bits_of(kMagnitudeMagic);
    case FastPath::int4_magic: return bits_of(int4_magnitude_magic(fabsf(x))) - bits_of(kMagnitudeMagic);
    case FastPath::e2m1_divide_a: return divide_codes(bits, 0, true);
    case FastPath::e2m1_divide_b: return divide_codes(bits, 1, true);
    case FastPath::bf16x2_rne_finite:
    case FastPath::fp16x2_rne_finite: return paired_case(p, x, false);
    case FastPath::e4m3x2_of_products: return products_case(x, false);
    case FastPath::e4m3x4_satfinite: {  // lane order and sign: x, -x, -x, x
      const float y[4] = {x, -x, -x, x};
      return e4m3x4_satfinite_fast(y);
    }
    case FastPath::e2m1_magic_away:
      return bits_of(e2m1_magnitude_magic_away(fabsf(x))) - bits_of(kMagnitudeMagicAway);
    case FastPath::e2m1_magic_below_7:  // inputs outside the function's range read 0
      return fabsf(x) < 7.0f ? bits_of(e2m1_magnitude_magic_below_7(fabsf(x))) - bits_of(kMagnitudeMagic) : 0u;
    case FastPath::e2m1_magic_to_4_5:
      return fabsf(x) <= 4.5f ? bits_of(e2m1_magnitude_magic_to_4_5(fabsf(x))) - bits_of(kMagnitudeMagic) : 0u;
    case FastPath::scale_quotient_a: return scale_quotients(bits, 0, true);
    case FastPath::scale_quotient_b: return scale_quotients(bits, 1, true);
    case FastPath::code_terms: return code_terms_case(bits, false);
    case FastPath::e2m1_round_below_7: return round_below_7_case(bits, false);
    case FastPath::bf16x2_max_magnitude: return pair_max_case(kBF16, bits, false);
    case FastPath::pair_sign_nibbles: return pair_signs_case(bits, false);
    case FastPath::fp16x2_max_magnitude: return pair_max_case(kFP16, bits, false);
    case FastPath::e4m3_nonsaturating: {  // the four-value cast's x and -x, then the one-value cast's
      const float y[4] = {x, -x, 0.0f, 0.0f};
      return (e4m3x4_nonsaturating_fast(y) & 0xFFFFu) | std::uint32_t{e4m3_nonsaturating_fast(x)} << 16 |
             std::uint32_t{e4m3_nonsaturating_fast(-x)} << 24;
    }
    case FastPath::e2m1_magic_toward_zero:
      return bits_of(e2m1_magnitude_magic_toward_zero(fabsf(x))) - bits_of(kMagnitudeMagic);
    case FastPath::e4m3_tensor_quotient_a: return tensor_quotient_codes(bits, 0, true);
    case FastPath::e4m3_tensor_quotient_b: return tensor_quotient_codes(bits, 1, true);
  }
  return 0;
}

KVQ_HD inline std::uint32_t fast_path_reference(FastPath p, std::uint32_t bits) {
  const Conversion e2m1 = convention_conversion(ConventionId::cuda_satfinite, FormatId::e2m1, Rounding::nearest_even);
  Conversion e2m1_away = e2m1, e2m1_toward_zero = e2m1;
  e2m1_away.rounding = Rounding::nearest_away;
  e2m1_toward_zero.rounding = Rounding::nearest_toward_zero;
  const auto code = static_cast<std::uint8_t>(bits & 0xFF);
  switch (p) {
    case FastPath::e2m1_rne: return static_cast<std::uint32_t>(encode(kE2M1, e2m1, unpack(kFP32, bits)));
    case FastPath::e2m1_rna: return static_cast<std::uint32_t>(encode(kE2M1, e2m1_away, unpack(kFP32, bits)));
    case FastPath::e4m3_satfinite:
      return static_cast<std::uint32_t>(encode(
          kE4M3FN, convention_conversion(ConventionId::cuda_satfinite, FormatId::e4m3fn, Rounding::nearest_even),
          unpack(kFP32, bits)));
    case FastPath::bf16_rne: return static_cast<std::uint32_t>(encode(kBF16, Conversion{}, unpack(kFP32, bits)));
    case FastPath::fp16_rne: return static_cast<std::uint32_t>(encode(kFP16, Conversion{}, unpack(kFP32, bits)));
    case FastPath::e2m1_value: return static_cast<std::uint32_t>(widen(kE2M1, code & 0xF, kFP32));
    case FastPath::e4m3_value: return static_cast<std::uint32_t>(widen(kE4M3FN, code, kFP32));
    case FastPath::int4_rne: return static_cast<std::uint32_t>(encode(kINT4, e2m1, unpack(kFP32, bits)));  // recipes' rule
    case FastPath::int8_rne: return static_cast<std::uint32_t>(encode(kINT8, e2m1, unpack(kFP32, bits)));
    case FastPath::int4_value: return static_cast<std::uint32_t>(widen(kINT4, code & 0xF, kFP32));
    case FastPath::int8_value: return static_cast<std::uint32_t>(widen(kINT8, code, kFP32));
    case FastPath::e4m3_from_fp64:
    case FastPath::e4m3_from_fp64_sticky:
      return static_cast<std::uint32_t>(encode_double(
          kE4M3FN, convention_conversion(ConventionId::cuda_satfinite, FormatId::e4m3fn, Rounding::nearest_even),
          fp64_case_input(p, bits)));
    case FastPath::e2m1_magic:  // the magnitude code, NaN -> 7 (the codec's +6)
      return static_cast<std::uint32_t>(encode(kE2M1, e2m1, unpack(kFP32, bits))) & 7u;
    case FastPath::int4_magic: return static_cast<std::uint32_t>(encode(kINT4, e2m1, unpack(kFP32, bits))) & 7u;
    case FastPath::e2m1_divide_a: return divide_codes(bits, 0, false);
    case FastPath::e2m1_divide_b: return divide_codes(bits, 1, false);
    case FastPath::bf16x2_rne_finite:
    case FastPath::fp16x2_rne_finite: return paired_case(p, float_from_bits(bits), true);
    case FastPath::e4m3x2_of_products: return products_case(float_from_bits(bits), true);
    case FastPath::e4m3x4_satfinite: {
      const Conversion c = convention_conversion(ConventionId::cuda_satfinite, FormatId::e4m3fn, Rounding::nearest_even);
      const auto plus = static_cast<std::uint32_t>(encode(kE4M3FN, c, unpack(kFP32, bits)));
      const auto minus = static_cast<std::uint32_t>(encode(kE4M3FN, c, unpack(kFP32, bits ^ 0x80000000u)));
      return plus | minus << 8 | minus << 16 | plus << 24;
    }
    case FastPath::e2m1_magic_away:  // the magnitude code rounded half away, NaN -> 7
      return static_cast<std::uint32_t>(encode(kE2M1, e2m1_away, unpack(kFP32, bits))) & 7u;
    case FastPath::e2m1_magic_below_7:
    case FastPath::e2m1_magic_to_4_5: {
      const float a = fabsf(float_from_bits(bits));
      const bool in_range = p == FastPath::e2m1_magic_below_7 ? a < 7.0f : a <= 4.5f;
      return in_range ? static_cast<std::uint32_t>(encode(kE2M1, e2m1, unpack(kFP32, bits))) & 7u : 0u;
    }
    case FastPath::scale_quotient_a: return scale_quotients(bits, 0, false);  // IEEE division
    case FastPath::scale_quotient_b: return scale_quotients(bits, 1, false);
    case FastPath::code_terms: return code_terms_case(bits, true);
    case FastPath::e2m1_round_below_7: return round_below_7_case(bits, true);
    case FastPath::bf16x2_max_magnitude: return pair_max_case(kBF16, bits, true);
    case FastPath::pair_sign_nibbles: return pair_signs_case(bits, true);
    case FastPath::fp16x2_max_magnitude: return pair_max_case(kFP16, bits, true);
    case FastPath::e4m3_nonsaturating: {  // ElementCast::nonsaturating: a NaN value is the canonical +NaN
      const Conversion c = convention_conversion(ConventionId::torch, FormatId::e4m3fn, Rounding::nearest_even);
      const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
      const auto plus = static_cast<std::uint32_t>(encode(kE4M3FN, c, unpack(kFP32, nan ? bits_of(canonical_nan()) : bits)));
      const auto minus = static_cast<std::uint32_t>(
          encode(kE4M3FN, c, unpack(kFP32, nan ? bits_of(canonical_nan()) : bits ^ 0x80000000u)));
      return plus | minus << 8 | plus << 16 | minus << 24;
    }
    case FastPath::e2m1_magic_toward_zero:  // the magnitude code rounded half toward zero, NaN -> 7
      return static_cast<std::uint32_t>(encode(kE2M1, e2m1_toward_zero, unpack(kFP32, bits))) & 7u;
    case FastPath::e4m3_tensor_quotient_a: return tensor_quotient_codes(bits, 0, false);  // IEEE division
    case FastPath::e4m3_tensor_quotient_b: return tensor_quotient_codes(bits, 1, false);
  }
  return 0;
}

// Decoded NaNs may differ in payload (hardware conversions); every other result bit for bit.
KVQ_HD inline bool fast_path_agrees(FastPath p, std::uint32_t fast, std::uint32_t reference) {
  const bool value = p == FastPath::e2m1_value || p == FastPath::e4m3_value || p == FastPath::int4_value ||
                     p == FastPath::int8_value;
  if (value && (fast & 0x7fffffffu) > 0x7f800000u && (reference & 0x7fffffffu) > 0x7f800000u) return true;
  return fast == reference;
}

}  // namespace kvq::props
