// Dequantizing eight 4-bit element codes (E2M1 or INT4, sign-magnitude) at once: the dequantize
// kernels' inner loop for the packed recipes. Equal bit for bit to dequantize_scaled_element
// wherever it is used (NaN-free spans); the caller decides that once per
// span from the scale code and g (nibble_scaling) and runs the general element code otherwise.
// Host and device run the same integer and FP32 code; only the output packers use the device's
// paired conversions (cvt.rn.bf16x2.f32, cvt.rn.f16x2.f32), held to bf16_rne_fast and
// fp16_rne_fast over all non-NaN FP32 inputs by the fast-paths suites.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#include "formats/recipes.hpp"

namespace kvq {

// A 4-bit code as an FP32 bit pattern, without any table: the magnitude bits at bit mag_shift,
// the sign at bit 31. E2M1 s.e1e0.m at mag_shift 22 is the FP32 exponent field e1e0 over the
// mantissa m, i.e. value * 2^-126 (code 1, 0.5, is the subnormal 2^-127); INT4 s.kkk at 20 is the
// subnormal k * 2^-129 = value * 2^-127. nibble_unscale is that power: 126 or 127.
struct NibbleFormat {
  int mag_shift;
  int unscale;
};
KVQ_HD constexpr NibbleFormat nibble_format(FormatId element) {
  return element == FormatId::e2m1 ? NibbleFormat{22, 126} : NibbleFormat{20, 127};
}
static_assert(0b0'01'1 << 22 == 0x00C00000);  // E2M1 1.5 -> 1.5 * 2^-126 (exponent field 1, mantissa .1)
static_assert(0b0'11'1 << 22 == 0x01C00000);  // E2M1 6 -> 1.5 * 2^-124 = 6 * 2^-126

// The FP32 pattern of the nibble at bit `position` of `isolated` (a word whose only other set
// bits form a second nibble exactly 16 bits away; position <= mag_shift). One multiply writes
// two copies of the nibble, at mag_shift (its magnitude) and at 28 (its sign at 31); the copies
// and the partner's copies never overlap, so no carry crosses the masked bits, and the partner
// lands above bit 31 or below bit 16 (masked off). The multiply issues on the FMA pipe (IMAD).
KVQ_HD inline float nibble_pattern(std::uint32_t isolated, int position, int mag_shift) {
  const std::uint32_t copies = isolated * ((1u << (mag_shift - position)) + (1u << (28 - position)));
  return float_from_bits(copies & (0x80000000u | (7u << mag_shift)));
}

// The per-span factors of a NaN-free span: element i's value is (pattern_i * a) * g, where the first
// product is exact (value * sf * 2^-10 or value itself) and the second rounds once, as
// dequantize_scaled_element's (v * sf) * g (v * sf is exact) or v * 2^e do. Two-level scales
// under an encode or amax tensor parameter (param): with t = (pattern_i * a) * 2^10 = v * sf (exact),
// (t * g) / divisor, dequantize_scaled_element's operations on the same values (encode: g = 1, the
// divisor e; amax: g = amax, the divisor D); the division by the reciprocal rd and two FMA
// corrections (divide_signed_by_reciprocal) where every operand is in kDecodeQuotientRange. A recipe
// that writes +0 for every zero (unsigned_zero) has its -0 values replaced by +0.
struct NibbleScaling {
  bool nan_free;  // no NaN can arise: the general element code is not needed
  float a, g;
  TensorParam param = TensorParam::decode;
  float divisor = 1.0f, rd = 0.0f;
  bool by_reciprocal = false;
  bool unsigned_zero = false;
};
// |g| and |divisor| within [2^-40, 2^40]: with |v * sf| in [2^-11, 3136] (E2M1 [2^-10, 2688], INT4
// [2^-9, 3136] and the E4M3 subnormal scale 2^-9 for E2M1's 0.5; or 0), every product and quotient is
// a normal FP32 number, where divide_by_reciprocal gives the IEEE quotient.
inline constexpr float kDecodeQuotientMin = 0x1p-40f, kDecodeQuotientMax = 0x1p40f;
KVQ_HD inline bool in_decode_quotient_range(float x) {
  return fabsf(x) >= kDecodeQuotientMin && fabsf(x) <= kDecodeQuotientMax;
}
inline constexpr int kNibbleSplit = 10;  // two-level: a = sf * 2^(unscale - 10) <= 448 * 2^117, finite
static_assert(kNibbleSplit == 10, "nibble_scaling's bound on g is 2^(128 - kNibbleSplit) = 2^118");

// Two-level (E4M3 scale sf): NaN-free unless sf is NaN (0x7F, 0xFF) or g is not what the tensor
// parameter admits. Decode: |g| < 2^118 (g * 2^10 exact; inf and NaN excluded), and (v * sf) * g
// has no NaN: v * sf is finite and g finite. Encode: e finite and nonzero ((v * sf) / e: no 0 / 0,
// no NaN e). Amax: amax finite and the divisor D finite and nonzero ((v * sf) * amax: no 0 * inf;
// an overflow to inf stays inf over a finite D; no 0 / 0). E8M0 (2^e): NaN-free unless the scale is
// NaN (0xFF).
KVQ_HD inline NibbleScaling nibble_scaling(const Recipe& r, std::uint8_t scale_code, float g) {
  const NibbleFormat f = nibble_format(r.element);
  const float unscale = float_from_bits(static_cast<std::uint32_t>(f.unscale + 127) << 23);
  if (r.scale == BlockScale::e4m3_two_level) {
    const float sf = block_scale_value(r, scale_code);
    const float split = float_from_bits(static_cast<std::uint32_t>(kNibbleSplit + 127) << 23);
    const TensorParam param = dequantize_tensor_param(r);
    // first, so a kernel decides it once
    const bool g_ok = param == TensorParam::decode   ? fabsf(g) < 0x1p118f  // 2^(128 - kNibbleSplit)
                      : param == TensorParam::encode ? fabsf(g) <= kFp32Max && g != 0.0f
                                                     : fabsf(g) <= kFp32Max && fabsf(r.tensor_divisor) <= kFp32Max &&
                                                           r.tensor_divisor != 0.0f;
    const bool nan_free = g_ok & ((scale_code & 0x7Fu) != 0x7Fu);
    const float a = sf * (unscale / split);
    if (param == TensorParam::decode) return {nan_free, a, g * split, param, 1.0f, 0.0f, false, r.dequantize_unsigned_zero};
    const float m = param == TensorParam::encode ? 1.0f : g, divisor = param == TensorParam::encode ? g : r.tensor_divisor;
    const bool by_reciprocal = in_decode_quotient_range(m) && in_decode_quotient_range(divisor);
    return {nan_free, a, m, param, divisor, by_reciprocal ? 1.0f / divisor : 0.0f, by_reciprocal, r.dequantize_unsigned_zero};
  }
  return {r.scale == BlockScale::e8m0_pow2 && scale_code != 0xFF, unscale, block_scale_value(r, scale_code),
          TensorParam::decode, 1.0f, 0.0f, false, r.dequantize_unsigned_zero};
}

// Eight codes of a little-endian word (element i in bits 4i..4i+3) -> their FP32 patterns. Pairs
// 16 bits apart share one isolating mask; the upper four elements of each pair word come from
// w >> 8 so that every multiply shifts left.
KVQ_HD inline void nibble_word_patterns(std::uint32_t w, int mag_shift, float* pattern) {
  const std::uint32_t high = w >> 8;
  const std::uint32_t pairs[4] = {w & 0x000F000Fu, w & 0x00F000F0u, high & 0x000F000Fu, high & 0x00F000F0u};
  KVQ_UNROLL
  for (int i = 0; i < 8; ++i) {
    const int pair = i & 3, position = (i & 1) * 4 + (i >> 2) * 16;  // elements 0,4 | 1,5 | 2,6 | 3,7
    pattern[i] = nibble_pattern(pairs[pair], position, mag_shift);
  }
}

// The FP32 value of a code's pattern in a NaN-free span.
KVQ_HD inline float nibble_pattern_value(float pattern, const NibbleScaling& k) {
  const float split = float_from_bits(static_cast<std::uint32_t>(kNibbleSplit + 127) << 23);
  float y;
  if (k.param == TensorParam::decode) {
    y = (pattern * k.a) * k.g;
  } else {
    const float p = ((pattern * k.a) * split) * k.g;  // (v * sf) * g, v * sf exact
    y = k.by_reciprocal ? divide_signed_by_reciprocal(p, k.divisor, k.rd) : p / k.divisor;
  }
  return k.unsigned_zero && y == 0.0f ? 0.0f : y;
}

// Eight codes of a word -> the FP32 values of a NaN-free span.
KVQ_HD inline void nibble_word_values(std::uint32_t w, int mag_shift, const NibbleScaling& k, float* y) {
  nibble_word_patterns(w, mag_shift, y);
  KVQ_UNROLL
  for (int i = 0; i < 8; ++i) y[i] = nibble_pattern_value(y[i], k);
}

// Two non-NaN FP32 values -> BF16 / FP16 (round to nearest even), lo in the low half: the device's
// paired conversion, bf16_rne_fast / fp16_rne_fast on the host (equal for every non-NaN input).
KVQ_HD inline std::uint32_t bf16x2_rne_finite(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  const __nv_bfloat162_raw p = __floats2bfloat162_rn(lo, hi);
  return p.x | (std::uint32_t{p.y} << 16);
#else
  return bf16_rne_fast(lo) | (std::uint32_t{bf16_rne_fast(hi)} << 16);
#endif
}
KVQ_HD inline std::uint32_t fp16x2_rne_finite(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  const __half2_raw p = __floats2half2_rn(lo, hi);
  return p.x | (std::uint32_t{p.y} << 16);
#else
  return fp16_rne_fast(lo) | (std::uint32_t{fp16_rne_fast(hi)} << 16);
#endif
}

// Decoding by magnitude. In a NaN-free span, code c's 16-bit output is that of the positive code
// of c's magnitude with c's sign: each step of nibble_pattern_value is odd in the pattern (exact or
// correctly rounded products and quotients; divide_signed_by_reciprocal divides magnitudes and
// puts the sign back) and so are the round-to-nearest-even conversions, except that a recipe's +0
// zeros (unsigned_zero) take no sign. A block's outputs are thus eight entries, the outputs of
// magnitudes 0-7, which its codes select and sign: where each element's value costs a division by
// the tensor parameter, the two threads that decode a block's two words compute four entries each
// and trade them (kernels/quantize_device.cu, docs/dequantize-4bit.md).
//
// Four entries (magnitudes first to first + 3) as BF16 or FP16 outputs, in byte planes: byte i of
// `low` is entry first + i's low byte, of `high` its high byte, and of `signs` 0x80 where the entry
// takes its code's sign (every entry but an unsigned zero), else 0.
struct NibbleEntries {
  std::uint32_t low, high, signs;
};
KVQ_HD inline NibbleEntries nibble_entries(const NibbleScaling& k, int mag_shift, int first, bool fp16) {
  float v[4];
  KVQ_UNROLL
  for (int i = 0; i < 4; ++i) {
    const float pattern = float_from_bits(static_cast<std::uint32_t>(first + i) << mag_shift);  // positive code
    v[i] = nibble_pattern_value(pattern, k);
  }
  const std::uint32_t p0 = fp16 ? fp16x2_rne_finite(v[0], v[1]) : bf16x2_rne_finite(v[0], v[1]);
  const std::uint32_t p1 = fp16 ? fp16x2_rne_finite(v[2], v[3]) : bf16x2_rne_finite(v[2], v[3]);
  std::uint32_t signs = 0x80808080u;
  if (k.unsigned_zero) {
    signs = 0;
    KVQ_UNROLL
    for (int i = 0; i < 4; ++i) signs |= v[i] != 0.0f ? 0x80u << (8 * i) : 0u;
  }
  return {byte_permute(p0, p1, 0x6420u), byte_permute(p0, p1, 0x7531u), signs};  // bytes 0, 2, 4, 6 | 1, 3, 5, 7
}

// Eight codes of a little-endian word -> the four pair words of their 16-bit outputs (element 2i
// in the low half of word i), from the entries of magnitudes 0-3 (`a`) and 4-7 (`b`), or the
// other way round where `swapped`. A code's magnitude, as byte_permute's selector, picks its
// entry's bytes (bit 2: from b; flipped where swapped); byte_permute's sign mode copies element
// 2j's sign (bit 3 of byte j, the top bit of byte j of w << 4) and element 2j + 1's (the top bit
// of byte j of w) into whole bytes, which the sign planes mask and the high bytes take.
KVQ_HD inline void nibble_word_from_entries(std::uint32_t w, const NibbleEntries& a, const NibbleEntries& b, bool swapped,
                                            bool unsigned_zero, std::uint32_t* out) {
  const std::uint32_t select = (w & 0x77777777u) ^ (swapped ? 0x44444444u : 0u), shifted = w << 4;
  // Elements 0-3: [shifted.0, w.0, shifted.1, w.1], each byte's top bit in all eight; 4-7: bytes 2, 3.
  constexpr std::uint32_t kSigns[2] = {0xD9C8u, 0xFBEAu};
  KVQ_UNROLL
  for (int h = 0; h < 2; ++h) {
    const std::uint32_t s = select >> (16 * h);  // byte_permute reads the low 16 bits
    const std::uint32_t signs = byte_permute(shifted, w, kSigns[h]) &
                                (unsigned_zero ? byte_permute(a.signs, b.signs, s) : 0x80808080u);
    const std::uint32_t low = byte_permute(a.low, b.low, s), high = byte_permute(a.high, b.high, s) ^ signs;
    out[2 * h] = byte_permute(low, high, 0x5140u);      // [low.0, high.0, low.1, high.1]
    out[2 * h + 1] = byte_permute(low, high, 0x7362u);  // [low.2, high.2, low.3, high.3]
  }
}

// The prefill workspace (requantize_e4m3) of a NaN-free span: element i is e4m3(pattern_i * a * g),
// the exact product rounded once, with g = factor * 2^10 (two-level: a as nibble_scaling's) or
// factor * 2^e (E8M0). NaN-free as nibble_scaling, and where g is finite (e4m3x2_of_products takes
// finite inputs; an inf factor leaves the general code). factor * 2^e may lose bits below FP32's
// normal range, and then every |product| <= 6 * 2^-126 rounds to E4M3 +-0 either way.
// The workspace's value does not depend on the tensor parameter (the factor carries it) or on the
// sign of a zero's dequantized value: both are read as decode's and signed.
KVQ_HD inline NibbleScaling nibble_requant_scaling(const Recipe& r, std::uint8_t scale_code, float factor) {
  if (r.scale == BlockScale::e4m3_two_level) {
    Recipe decode = r;
    decode.tensor_param = TensorParam::decode;
    decode.two_level = TwoLevel::reference;  // not an amax style
    return nibble_scaling(decode, scale_code, factor);
  }
  NibbleScaling k = nibble_scaling(r, scale_code, 1.0f);  // k.g = 2^e
  k.g = factor * k.g;
  k.nan_free = k.nan_free && fabsf(k.g) <= kFp32Max;
  return k;
}

// Two exact products a * b, each rounded ONCE to E4M3FN (cvt.rn.satfinite), the first in the
// low byte; every input finite. Device: the product rounded to odd in FP32, then one paired
// conversion (Boldo and Melquiond: FP32 keeps more than E4M3's bits plus two, so the odd last
// bit stands for all dropped bits, as in e4m3_satfinite_from_double_fast). Rounding to odd is
// the product toward zero with the last bit of its magnitude rounded up OR-ed in: where the
// product is exact both are equal; otherwise they are neighbours, consecutive as integers, and
// the OR picks the odd one (toward zero never overflows; up gives inf = FLT_MAX's bits + 1).
// Host: the exact FP64 product through e4m3_satfinite_from_double_fast.
KVQ_HD constexpr std::uint32_t round_to_odd_bits(std::uint32_t toward_zero, std::uint32_t magnitude_up) {
  return toward_zero | (magnitude_up & 1u);
}
#if defined(__CUDA_ARCH__)
// The exact product a * b rounded to odd in FP32, a and b finite: the product rounded toward zero,
// its last bit set where the magnitude rounded up differs (round_to_odd_bits).
__device__ inline float product_rounded_to_odd(float a, float b) {
  return __uint_as_float(
      round_to_odd_bits(__float_as_uint(__fmul_rz(a, b)), __float_as_uint(__fmul_ru(fabsf(a), fabsf(b)))));
}
#endif
KVQ_HD inline std::uint16_t e4m3x2_of_products(float a0, float b0, float a1, float b1) {
#if defined(__CUDA_ARCH__)
  return __nv_cvt_float2_to_fp8x2(float2{product_rounded_to_odd(a0, b0), product_rounded_to_odd(a1, b1)},
                                  __NV_SATFINITE, __NV_E4M3);
#else
  return static_cast<std::uint16_t>(
      e4m3_satfinite_from_double_fast(static_cast<double>(a0) * static_cast<double>(b0)) |
      e4m3_satfinite_from_double_fast(static_cast<double>(a1) * static_cast<double>(b1)) << 8);
#endif
}

// The exact product a * b rounded ONCE to BF16 (RNE, IEEE overflow); a, b finite. Device: the product
// rounded to odd in FP32 (product_rounded_to_odd; FP32 keeps 16 bits more than BF16 at every
// exponent, subnormals included, so the odd last bit stands for all dropped bits; past FP32 max the
// odd FLT_MAX rounds to inf), then RNE to BF16. Host: the exact FP64 product (bf16_rne_from_double).
KVQ_HD inline std::uint16_t bf16_rne_of_product(float a, float b) {
#if defined(__CUDA_ARCH__)
  return bf16_rne_fast(product_rounded_to_odd(a, b));
#else
  return bf16_rne_from_double(static_cast<double>(a) * static_cast<double>(b));
#endif
}

// Eight codes of a word -> eight workspace E4M3 codes of a NaN-free span, as two little-endian words
// (elements 0-3, 4-7).
KVQ_HD inline void nibble_word_e4m3(std::uint32_t w, int mag_shift, const NibbleScaling& k, std::uint32_t* out) {
  float t[8];
  nibble_word_patterns(w, mag_shift, t);
  KVQ_UNROLL
  for (int i = 0; i < 2; ++i)  // pattern * a is exact: value * sf * 2^-10, or the value
    out[i] = e4m3x2_of_products(t[4 * i] * k.a, k.g, t[4 * i + 1] * k.a, k.g) |
             static_cast<std::uint32_t>(e4m3x2_of_products(t[4 * i + 2] * k.a, k.g, t[4 * i + 3] * k.a, k.g)) << 16;
}

// The prefill workspace of 8-bit element codes (E4M3FN; INT8 sign-magnitude, value k / 64), four
// codes a word. Element i becomes e4m3(v_i * g), the exact product rounded once, with g = factor
// (per tensor) or factor * 2^e (E8M0), times 2^-6 for INT8 (whose v is then k). NaN-free unless the
// E8M0 scale is NaN (0xFF), a code is an E4M3 NaN (0x7F, 0xFF), or g is not finite. Where g lost
// bits below FP32's normal range, |v * g| and the exact product are both < 448 * 2^-126 and round
// to E4M3 +-0 alike, with the same sign (as nibble_requant_scaling argues for 4-bit codes).
struct ByteRequantScaling {
  bool nan_free;  // no NaN can arise
  float g;
};
KVQ_HD inline ByteRequantScaling byte_requant_scaling(const Recipe& r, std::uint8_t scale_code, float factor) {
  float g = r.scale == BlockScale::e8m0_pow2 ? factor * block_scale_value(r, scale_code) : factor;  // 0xFF: NaN
  if (r.element == FormatId::int8) g = g * 0x1p-6f;
  return {r.scale != BlockScale::e4m3_two_level && fabsf(g) <= kFp32Max, g};
}
// Whether a word holds an E4M3 NaN code (low seven bits all set): adding 1 to each byte's low seven
// bits carries into its top bit only there, and never into the next byte.
KVQ_HD constexpr bool word_has_e4m3_nan(std::uint32_t w) { return (((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u) != 0; }
static_assert(word_has_e4m3_nan(0x00007F00u) && word_has_e4m3_nan(0xFF000000u) && !word_has_e4m3_nan(0x7E80FE00u));
// w with each E4M3 NaN code (0x7F, 0xFF) replaced by +448 (0x7E): tl.clamp's NaN -> +max applied
// after a satfinite cast, which gives a NaN code for a NaN input and for nothing else.
KVQ_HD constexpr std::uint32_t e4m3_nan_codes_to_max(std::uint32_t w) {
  if (!word_has_e4m3_nan(w)) return w;
  for (int i = 0; i < 4; ++i)
    if (((w >> (8 * i)) & 0x7Fu) == 0x7Fu) w = (w & ~(0xFFu << (8 * i))) | (0x7Eu << (8 * i));
  return w;
}
static_assert(e4m3_nan_codes_to_max(0xFF7F0180u) == 0x7E7E0180u && e4m3_nan_codes_to_max(0x7EFE0000u) == 0x7EFE0000u);

// Byte i of w as the FP32 value it scales: E4M3 s.eeee.mmm as the FP32 pattern with eeee.mmm at
// bit 20 (value * 2^-120, subnormals included) times 2^120, exact; INT8 as +-k, the magic 2^23 + k
// less 2^23, exact. The sign is the code's top bit (zero codes give +-0, as element_value's).
KVQ_HD inline float byte_code_value(bool int8, std::uint32_t w, int i) {
  const std::uint32_t b = (w >> (8 * i)) & 0xFFu, sign = (b & 0x80u) << 24;
  if (int8) return float_from_bits(bits_of(float_from_bits(0x4B000000u | (b & 0x7Fu)) - 0x1p23f) | sign);
  return float_from_bits(((b & 0x7Fu) << 20) | sign) * 0x1p120f;
}

// The factor of a NaN-free span of 8-bit codes for dequantize: element i's value is
// byte_code_value(i) * g, the product dequantize_scaled_element rounds once: v * 2^e (E8M0; INT8:
// k * 2^(e - 6), where 2^(e - 6) is exact, subnormal at worst, as is k / 64, so both round the
// exact k * 2^(e - 6) once) or v * g (E4M3 per tensor). NaN-free unless the E8M0 scale is NaN (0xFF)
// or a per-tensor g is not finite (0 * inf); two-level scales and INT8 per tensor (g * 2^-6 may
// lose bits) are never NaN-free. The caller also tests the codes for E4M3 NaNs (word_has_e4m3_nan).
struct ByteScaling {
  bool nan_free;  // no NaN can arise
  float g;
};
KVQ_HD inline ByteScaling byte_scaling(const Recipe& r, std::uint8_t scale_code, float g) {
  const bool int8 = r.element == FormatId::int8;
  if (r.dequantize_unsigned_zero) return {false, g};  // the general element code writes +0
  if (r.scale == BlockScale::e8m0_pow2)
    return {scale_code != 0xFF, block_scale_value(r, scale_code) * (int8 ? 0x1p-6f : 1.0f)};
  if (r.scale == BlockScale::tensor_only && !int8) return {fabsf(g) <= kFp32Max, g};
  return {false, g};
}

// Sixteen 8-bit codes of a NaN-free span (four little-endian words) -> sixteen workspace E4M3 codes.
KVQ_HD inline void byte_words_e4m3(bool int8, const std::uint32_t* in, float g, std::uint32_t* out) {
  KVQ_UNROLL
  for (int w = 0; w < 4; ++w) {
    float v[4];
    KVQ_UNROLL
    for (int i = 0; i < 4; ++i) v[i] = byte_code_value(int8, in[w], i);
    out[w] = e4m3x2_of_products(v[0], g, v[1], g) | static_cast<std::uint32_t>(e4m3x2_of_products(v[2], g, v[3], g)) << 16;
  }
}

}  // namespace kvq
