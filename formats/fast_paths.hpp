// Fast conversions for the kernels' inner loops, each equal to the codec for every input:
// the gpu suite compares them with the device-compiled codec over all 2^32 FP32 inputs
// (fast-paths/...), the formats suite on the CPU over a stratified sample of 2^24 inputs.
// Where the device has an exact conversion instruction (cvt to E4M3, FP16, from E4M3) the
// device path uses it and the host path is the codec; everything else is the same integer
// code on both sides.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#include "formats/conventions.hpp"
#include "formats/float_bits.hpp"

namespace kvq {

// FP32 -> E2M1, CUDA satfinite (saturate; NaN -> +6 = 0x7), round half to even or (ties_away)
// half away from zero. E2M1's magnitudes are a uniform grid per range: step 0.5 below 2 (codes
// 0-4), step 1 in [2, 4) (codes 4-6), step 2 from 4 (codes 6-7). So the code is the nearest
// integer of |y| / step plus the range's first code: scaling by a power of two is exact (an FP32-
// subnormal product rounds to 0 either way). Half to even: adding 2^23 + first rounds once to the
// FP32 grid of [2^23, 2^24), the integers, ties to even (first is even, so the parity is that of
// the rounded quotient); fminf saturates (NaN and inf give 2^23 + 7) and the code is the low
// bits. Half away compares the exact fraction v - floor(v) with 0.5 (v + 0.5 would round:
// 0.49999997 + 0.5 is 1.0 in FP32). FP32 arithmetic throughout: it issues at twice the integer
// rate on the GPU, and no float-to-int conversion (a quarter-rate pipe) is needed.
KVQ_HD inline std::uint8_t e2m1_satfinite_fast(float y, bool ties_away) {
  constexpr float kIntegers = 0x1p23f;  // the FP32 spacing from here to 2^24 is 1
  const float a = fabsf(y);
  const float per_step = a < 2.0f ? 2.0f : (a < 4.0f ? 1.0f : 0.5f);
  const float first = a < 2.0f ? 0.0f : (a < 4.0f ? 2.0f : 4.0f);
  const float v = a * per_step;
  float code;
  if (ties_away) {
    const float whole = floorf(v);
    code = fminf((v - whole >= 0.5f ? whole + 1.0f : whole) + first, 7.0f) + kIntegers;  // NaN: fminf gives 7
  } else {
    code = fminf(v + (kIntegers + first), kIntegers + 7.0f);
  }
  const std::uint32_t sign = a == a ? (bits_of(y) >> 28) & 0x8u : 0u;
  return static_cast<std::uint8_t>(sign | (bits_of(code) & 0x7u));
}

// The magnitude code of |y| (E2M1 with RNE, or INT4 with 2 fraction bits), saturating, as the FP32
// kMagic + code: every FP32 in [2^23, 2^24) is an integer, so one FMA that adds 2^23 rounds once,
// half to even, onto the integers (bits_of(result) - bits_of(kMagic) is the code). E2M1's code is
// the nearest integer of min(2a, a + 2, a/2 + 4) (affine on each range, equal at its ends 2 and 4),
// and rounding is monotonic, so the minimum of the three rounded pieces is the rounded minimum; a
// final minimum saturates at 7. FMA and min only (no compare, select or conversion); NaN -> 7.
// a = |y|, any FP32; the caller supplies the sign.
inline constexpr float kMagnitudeMagic = 0x1p23f;
KVQ_HD inline float e2m1_magnitude_magic(float a) {
  constexpr float m = kMagnitudeMagic;
  const float low_or_mid = fminf(fmaf(a, 2.0f, m), a + (m + 2.0f));
  return fminf(fminf(low_or_mid, fmaf(a, 0.5f, m + 4.0f)), m + 7.0f);
}
// The same code from fewer pieces where a is known to be small: below 7 the high piece a/2 + 4
// stays under 7.5 and needs no saturation; up to 4.5 the middle piece a + 2 (at most 6.5, which
// rounds to 6) is never above the high piece's rounding (both 6 on (4, 4.5]). NaN is outside both.
KVQ_HD inline float e2m1_magnitude_magic_below_7(float a) {
  constexpr float m = kMagnitudeMagic;
  return fminf(fminf(fmaf(a, 2.0f, m), a + (m + 2.0f)), fmaf(a, 0.5f, m + 4.0f));
}
KVQ_HD inline float e2m1_magnitude_magic_to_4_5(float a) {
  return fminf(fmaf(a, 2.0f, kMagnitudeMagic), a + (kMagnitudeMagic + 2.0f));
}
KVQ_HD inline float int4_magnitude_magic(float a) {  // INT4: k = RNE(4a), at most 7
  return fminf(fmaf(a, 4.0f, kMagnitudeMagic), kMagnitudeMagic + 7.0f);
}

// E2M1 half to even of a in [0, 7), as its value v and as the FP32 with bits code << 22 (v * 2^-126:
// E2M1's pattern is FP32's bottom binades with one mantissa bit, 0.5 the subnormal 2^-127).
// c = 2^floor(log2 max(a, 1)) is 1, 2 or 4, and the E2M1 step of a's range is c / 2 (0.5 below 2, 1 in
// [2, 4), 2 in [4, 8)): a + c * 2^22 lies in c * 2^22's binade, whose ulp is c / 2, so the FMA rounds a
// onto that step half to even (an even multiple is an even code), and subtracting c * 2^22 is exact.
// Four instructions for v, one more for the code's bits; a = 7 would give 8 (no saturation).
struct E2m1Rounded {
  float value, tiny;
};
KVQ_HD inline E2m1Rounded e2m1_round_below_7(float a) {
  const float c = float_from_bits(bits_of(fmaxf(a, 1.0f)) & 0x7f800000u);
  const float v = fmaf(c, -0x1p22f, fmaf(c, 0x1p22f, a));
  return {v, v * 0x1p-126f};  // exact: the build keeps subnormals
}

// fmaf(a, k, c) rounded toward -inf (the device's FFMA.RM) or +inf (FFMA.RP). The host, which has
// no per-instruction rounding mode (and must not change the process-wide one), splits a*k + c
// exactly into a double sum hi + lo (a*k is exact in FP64: 48 significant bits; TwoSum adds c),
// rounds hi to nearest FP32 and steps one FP32 down where that lies above hi + lo (up where below).
// Overflow gives FLT_MAX rounding down, inf rounding up, as the device does.
#if !defined(__CUDA_ARCH__)
inline float fmaf_directed_host(float a, float k, float c, bool up) {
  const double p = static_cast<double>(a) * static_cast<double>(k), q = static_cast<double>(c);
  const double hi = p + q, q_part = hi - p, lo = (p - (hi - q_part)) + (q - q_part);  // TwoSum: hi + lo = p + q
  const float f = static_cast<float>(hi);
  if (up) {
    const bool below = static_cast<double>(f) < hi || (static_cast<double>(f) == hi && lo > 0.0);
    return below ? std::nextafter(f, INFINITY) : f;
  }
  const bool above = static_cast<double>(f) > hi || (static_cast<double>(f) == hi && lo < 0.0);
  return above ? std::nextafter(f, -INFINITY) : f;
}
#endif
KVQ_HD inline float fmaf_round_down(float a, float k, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rd(a, k, c);
#else
  return fmaf_directed_host(a, k, c, false);
#endif
}
KVQ_HD inline float fmaf_round_up(float a, float k, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_ru(a, k, c);
#else
  return fmaf_directed_host(a, k, c, true);
#endif
}

// The E2M1 magnitude code of |y| rounded half AWAY from zero (SGLang's ">= threshold" rule),
// saturating, as the FP32 kMagnitudeMagicAway + code (code 0 is kMagnitudeMagicAway itself).
// Half away is floor(t + 1/2), and a round-down FMA of t + (2^23 - 1/2) gives 2^23 - 1 + floor(t + 1/2)
// on the integer grid of [2^23, 2^24); t < 1/2 gives 2^23 - 1/2, one FP32 step below 2^23 (whose
// spacing is 1/2): the bits of every result are bits_of(2^23 - 1/2) + floor(t + 1/2). The three
// affine pieces of e2m1_magnitude_magic, each rounded once, the pieces' offsets 2 and 4 added after
// (the constant 2^23 + 3/2 is not an FP32); min saturates at code 7, NaN -> 7. Below its range a
// piece's add rounds (2^23 + 3/2 -> code 3, 2^23 + 7/2 -> code 5): above the low piece's code there.
inline constexpr float kMagnitudeMagicAway = 0x1p23f - 0.5f;  // bits 0x4affffff
KVQ_HD inline float e2m1_magnitude_magic_away(float a) {
  constexpr float m = kMagnitudeMagicAway;
  const float low_or_mid = fminf(fmaf_round_down(a, 2.0f, m), fmaf_round_down(a, 1.0f, m) + 2.0f);
  return fminf(fminf(low_or_mid, fmaf_round_down(a, 0.5f, m) + 4.0f), 0x1p23f + 6.0f);  // code 7: m + 7 steps
}

// The E2M1 magnitude code of |y| rounded half TOWARD zero (Rounding::nearest_toward_zero, ModelOpt's
// MXFP4 cast), saturating, as the FP32 kMagnitudeMagic + code. Half toward zero is ceil(t - 1/2),
// and a round-up FMA of t + (2^23 - 1/2) gives 2^23 + ceil(t - 1/2) for t > 0 (from t = 1/2 on the
// integer grid of [2^23, 2^24); for 0 < t < 1/2 the sum lies in (2^23 - 1/2, 2^23) and rounds up to
// 2^23); t = 0 gives 2^23 - 1/2 itself, which the final maximum lifts to 2^23 (code 0). The three
// affine pieces of e2m1_magnitude_magic, each rounded once, the offsets 2 and 4 added after (exact
// on the integers; at t = 0 those pieces round to codes 2 and 4, above the low piece's 0); min
// saturates at code 7, NaN -> 7.
KVQ_HD inline float e2m1_magnitude_magic_toward_zero(float a) {
  constexpr float m = kMagnitudeMagicAway;  // 2^23 - 1/2
  const float low_or_mid = fminf(fmaf_round_up(a, 2.0f, m), fmaf_round_up(a, 1.0f, m) + 2.0f);
  const float code = fminf(fminf(low_or_mid, fmaf_round_up(a, 0.5f, m) + 4.0f), kMagnitudeMagic + 7.0f);
  return fmaxf(code, kMagnitudeMagic);
}

// E2M1 code -> FP32 (exact): 0, 0.5, then 2^(e-1) * 1.m from the code's own bits.
KVQ_HD inline float e2m1_value_fast(std::uint8_t code) {
  const std::uint32_t c = code & 7u, sign = static_cast<std::uint32_t>(code & 8u) << 28;
  const std::uint32_t mag = c >= 2u ? (c + 252u) << 22 : (c == 1u ? 0x3f000000u : 0u);
  return float_from_bits(sign | mag);
}

// FP32 -> E4M3FN, CUDA satfinite RNE (the cuda-satfinite convention).
KVQ_HD inline std::uint8_t e4m3_satfinite_fast(float y) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E4M3));
#else
  return static_cast<std::uint8_t>(
      encode_float(kE4M3FN, convention_conversion(ConventionId::cuda_satfinite, FormatId::e4m3fn, Rounding::nearest_even), y));
#endif
}

// PyTorch's eager cast to float8_e4m3fn (ConventionId::torch, half to even) of a value whose NaN
// is the GPU's canonical +NaN (ElementCast::nonsaturating): the satfinite cast up to 464, which
// rounds to 448 (the tie goes to 448's even mantissa); past it NaN with the sign, 0x7F | sign;
// a NaN 0x7F.
KVQ_HD inline std::uint8_t e4m3_nonsaturating_fast(float v) {
  if (v != v) return 0x7F;
  if (fabsf(v) > 464.0f) return static_cast<std::uint8_t>(0x7Fu | ((bits_of(v) >> 24) & 0x80u));
  return e4m3_satfinite_fast(v);
}

// Two FP32 values -> two E4M3FN codes (CUDA satfinite RNE), lo in the low byte: one paired
// conversion on the device.
KVQ_HD inline std::uint16_t e4m3x2_satfinite_fast(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  return __nv_cvt_float2_to_fp8x2(float2{lo, hi}, __NV_SATFINITE, __NV_E4M3);
#else
  return static_cast<std::uint16_t>(e4m3_satfinite_fast(lo) | e4m3_satfinite_fast(hi) << 8);
#endif
}

// Four FP32 values -> four E4M3FN codes (CUDA satfinite RNE), y[0] in the low byte: each
// e4m3_satfinite_fast's. On the device two cvt.rn.satfinite.e4m3x2.f32, each converting two values
// independently (its first operand into the high byte), packed without masking.
KVQ_HD inline std::uint32_t e4m3x4_satfinite_fast(const float* y) {
#if defined(__CUDA_ARCH__)
  std::uint32_t r;
  asm("{\n\t.reg .b16 lo, hi;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n\t"
      "mov.b32 %0, {lo, hi};\n\t}"
      : "=r"(r)
      : "f"(y[0]), "f"(y[1]), "f"(y[2]), "f"(y[3]));
  return r;
#else
  return e4m3_satfinite_fast(y[0]) | std::uint32_t{e4m3_satfinite_fast(y[1])} << 8 |
         std::uint32_t{e4m3_satfinite_fast(y[2])} << 16 | std::uint32_t{e4m3_satfinite_fast(y[3])} << 24;
#endif
}

// Four FP32 values -> four codes of e4m3_nonsaturating_fast, y[0] in the low byte: the satfinite
// four (e4m3x4_satfinite_fast), each byte of a value past 464 or NaN replaced by its own. Only a
// value the satfinite cast gives magnitude 0x7E (448, saturated) or 0x7F (NaN) can be such a
// value, so the word is tested once for those bytes first.
KVQ_HD inline std::uint32_t e4m3x4_nonsaturating_fast(const float* y) {
  std::uint32_t word = e4m3x4_satfinite_fast(y);
  if ((((word & 0x7F7F7F7Fu) + 0x02020202u) & 0x80808080u) == 0) return word;
  KVQ_UNROLL
  for (int i = 0; i < 4; ++i)
    if (!(fabsf(y[i]) <= 464.0f))
      word = (word & ~(0xFFu << (8 * i))) | (std::uint32_t{e4m3_nonsaturating_fast(y[i])} << (8 * i));
  return word;
}

// FP64 -> FP32 rounding to odd: toward zero, then the last bit set if anything was dropped (NaN
// stays NaN). A format of at most 22 significant bits rounded from it (RNE) is the double rounded
// ONCE: FP32 keeps 24 bits, more than the target's plus a rounding and a sticky bit, so the odd
// last bit stands for every dropped bit (Boldo and Melquiond's round-to-odd theorem); below FP32's
// normal range the odd value keeps every such result's +-0 or smallest subnormal side. Always
// inlined: the E4M3 workspace's general element code calls it in the kernels.
KVQ_HD KVQ_KERNEL_INLINE float fp32_round_to_odd(double x) {
#if defined(__CUDA_ARCH__)
  float f = __double2float_rz(x);
#else
  float f = static_cast<float>(x);                                               // nearest
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);  // toward zero
#endif
  if (static_cast<double>(f) != x && x == x) f = float_from_bits(bits_of(f) | 1u);
  return f;
}

// FP64 -> E4M3FN, CUDA satfinite RNE, rounded ONCE (fp32_round_to_odd, then RNE to E4M3). Below
// FP32's normal range every E4M3 result is +-0, which the odd value keeps.
KVQ_HD inline std::uint8_t e4m3_satfinite_from_double_fast(double x) { return e4m3_satfinite_fast(fp32_round_to_odd(x)); }

// E4M3FN code -> FP32 (exact; NaN codes give a NaN, payload unspecified).
KVQ_HD inline float e4m3_value_fast(std::uint8_t code) {
#if defined(__CUDA_ARCH__)
  const __half_raw h = __nv_cvt_fp8_to_halfraw(code, __NV_E4M3);
  return __half2float(__half(h));
#else
  return decode_float(kE4M3FN, code);
#endif
}

// FP32 -> INT4 / INT8 (formats/format.hpp: value k * 2^-frac_bits, |k| <= max_k, sign-magnitude
// codes) with RNE, saturating, NaN -> +max like E2M1. |y| * 2^frac_bits is exact in FP32 (or
// rounds to 0 either way when subnormal); rintf rounds half to even.
KVQ_HD inline std::uint8_t int_satfinite_fast(float y, int frac_bits, int max_k) {
  const std::uint32_t b = bits_of(y);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint8_t>(max_k);
  const float k = rintf(float_from_bits(b & 0x7fffffffu) * static_cast<float>(1 << frac_bits));
  const auto magnitude = static_cast<std::uint32_t>(k > static_cast<float>(max_k) ? static_cast<float>(max_k) : k);
  return static_cast<std::uint8_t>(((b >> 31) ? static_cast<std::uint32_t>(max_k + 1) : 0u) | magnitude);
}
KVQ_HD inline float int_value_fast(std::uint8_t code, int frac_bits, int max_k) {
  const float v = static_cast<float>(code & max_k) / static_cast<float>(1 << frac_bits);  // exact
  return (code & (max_k + 1)) ? -v : v;
}

// FP32 -> BF16 round to nearest even, IEEE overflow; NaN keeps sign and top payload, quiet bit set.
// On the device the non-NaN values go through cvt.rn.bf16.f32 (one instruction).
KVQ_HD inline std::uint16_t bf16_rne_fast(float y) {
  const std::uint32_t b = bits_of(y);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((b >> 16) | 0x40u);
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(y));
#else
  return static_cast<std::uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
#endif
}
// FP64 -> BF16, RNE, IEEE overflow, rounded ONCE: fp32_round_to_odd, then RNE to BF16. FP32's 24
// bits cover BF16's 8 plus a rounding and a sticky bit over BF16's whole range, subnormals
// included; past FP32 max the odd FLT_MAX rounds to inf.
KVQ_HD inline std::uint16_t bf16_rne_from_double(double x) { return bf16_rne_fast(fp32_round_to_odd(x)); }

// FP16 -> FP32, exact: the device's conversion, the codec on the host.
KVQ_HD inline float fp16_value(std::uint16_t bits) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(bits));
#else
  return decode_float(kFP16, bits);
#endif
}

// FP32 -> FP16 round to nearest even (subnormals kept), IEEE overflow; NaN as bf16_rne_fast.
KVQ_HD inline std::uint16_t fp16_rne_fast(float y) {
  const std::uint32_t b = bits_of(y);
  if ((b & 0x7fffffffu) > 0x7f800000u)
    return static_cast<std::uint16_t>(((b >> 16) & 0x8000u) | 0x7e00u | ((b >> 13) & 0x3ffu));
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(y));
#else
  return static_cast<std::uint16_t>(encode_float(kFP16, Conversion{}, y));
#endif
}

}  // namespace kvq
