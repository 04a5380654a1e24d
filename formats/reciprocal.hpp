// 1/x as kernels compute it: IEEE (correctly rounded), or PTX rcp.approx.ftz.f32, which the
// FlashInfer and vLLM NVFP4 quantizers use (docs/recipes.md).
//
// rcp.approx.ftz.f32 is not correctly rounded: on sm_90, 1,108,522 of the 2^23 mantissas of
// [1, 2) (13.2%) give the other neighbour of the exact reciprocal (never further than that).
// The result depends on the mantissa alone, scaled by the exponent; subnormal inputs read as
// +-0 (result +-inf) and subnormal results are flushed to +-0. The host model below is that
// rule plus the measured one-bit-per-mantissa table (formats/data/); on the device the
// instruction itself runs. The gpu suite holds the two equal over all 2^32 inputs.
// All E4M3 mantissas, 1.5 (6.0) and 1.75 are correctly rounded, so a recipe whose global
// scale is a power of two sees IEEE reciprocals only.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "formats/float_bits.hpp"

namespace kvq {

enum class Reciprocal : std::uint8_t {
  ieee,        // 1.0f / x, correctly rounded
  approx_ftz,  // rcp.approx.ftz.f32 (sm_90)
};

namespace reciprocal_detail {
const std::uint8_t* sm90_table();  // formats/data/rcp_approx_table.cpp: 2^20 bytes, bit m = mantissa m
std::size_t sm90_table_bytes();
}  // namespace reciprocal_detail

// The model of rcp.approx.ftz.f32 given its one-binade table (bit m set: 1/1.m is the other
// neighbour of the exact reciprocal, not the nearest). Host and device (the gpu sweep runs it
// against the instruction).
KVQ_HD inline float rcp_approx_ftz_with(const std::uint8_t* table, float x) {
  const std::uint32_t b = bits_of(x), sign = b & 0x80000000u, mag = b & 0x7fffffffu;
  if (mag > 0x7f800000u) return float_from_bits(0x7fffffffu);  // NaN: the GPU's canonical NaN
  if (mag == 0x7f800000u) return float_from_bits(sign);        // 1/inf = 0
  const int field = static_cast<int>(mag >> 23);
  if (field == 0) return float_from_bits(sign | 0x7f800000u);  // zero or flushed subnormal: inf
  const std::uint32_t mantissa = mag & 0x7fffffu;
  const float m = float_from_bits(0x3f800000u | mantissa);
  std::uint32_t r = bits_of(1.0f / m);  // IEEE division (no fast math, -prec-div=true)
  if ((table[mantissa >> 3] >> (mantissa & 7)) & 1u) {
    // The other neighbour of the exact 1/m: m * r - 1 is exact in double (24 x 24 bits).
    const double residual = static_cast<double>(m) * static_cast<double>(float_from_bits(r)) - 1.0;
    r = residual < 0 ? r + 1 : r - 1;
  }
  const int result_field = static_cast<int>(r >> 23) - (field - 127);
  if (result_field <= 0) return float_from_bits(sign);  // subnormal result flushed
  return float_from_bits(sign | (static_cast<std::uint32_t>(result_field) << 23) | (r & 0x7fffffu));
}

// Host model of rcp.approx.ftz.f32 on sm_90, with the measured table.
inline float rcp_approx_ftz_model(float x) { return rcp_approx_ftz_with(reciprocal_detail::sm90_table(), x); }

KVQ_HD inline float rcp_approx_ftz(float x) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return rcp_approx_ftz_model(x);
#endif
}

// x / d correctly rounded, given y = 1/d correctly rounded (IEEE): q0 = x * y is within two ulps
// of x / d, one FMA correction q1 = q0 + (x - q0 * d) * y makes it faithful, and a second gives
// the correctly rounded quotient (Markstein's theorem: y within half an ulp of 1/d, q1 within an
// ulp of x / d; each residual x - q * d is then exact in one FMA). Holds while nothing over- or
// underflows: the caller keeps d in [2^-64, 2^64]. Quotients that overflow give inf or NaN, which
// every 4-bit code saturates the same way as the IEEE quotient. The gpu suite compares the codes
// of the two over all 2^32 x for a set of d (fast-paths/...). The sign of a zero quotient may
// differ (+0 for -0 / d): callers that keep it divide magnitudes (formats/fast_decode.hpp).
KVQ_HD inline float divide_by_reciprocal(float x, float d, float y) {
  const float q0 = x * y;
  const float q1 = fmaf(fmaf(-q0, d, x), y, q0);
  return fmaf(fmaf(-q1, d, x), y, q1);
}
inline constexpr float kDivideByReciprocalMin = 0x1p-64f, kDivideByReciprocalMax = 0x1p64f;

// x / d correctly rounded with IEEE's sign, given y = RN(1/d), where divide_by_reciprocal holds
// for |x| and |d|: the magnitudes divided, the sign of x xor d or-ed in (a zero quotient then keeps
// the sign IEEE gives it).
KVQ_HD inline float divide_signed_by_reciprocal(float x, float d, float y) {
  const float q = divide_by_reciprocal(fabsf(x), fabsf(d), fabsf(y));
  return float_from_bits(bits_of(q) | ((bits_of(x) ^ bits_of(d)) & 0x80000000u));
}

// x / g for its E4M3 code, given y = RN(1/g) with g in [2^-64, 2^64] (the per-tensor recipes' IEEE
// division; kernels/block_quantize.hpp tensor_code_words): divide_by_reciprocal with x's sign
// (g > 0, so IEEE's quotient has it too; divide_by_reciprocal makes -0 / g +0). It is the IEEE
// quotient wherever that is a normal FP32 and |x| >= 2^-100 (the FMA residuals then exact). Below,
// |x / g| < 2^-36 and both quotients round to an E4M3 zero with x's sign (the code's smallest step is
// 2^-9). For |x| < g * kE4m3QuotientLimit (x finite, x / g below 2^126: nothing overflows); the
// caller divides (IEEE) other x. Held equal in codes (satfinite and non-saturating) to the IEEE
// quotient's over all 2^32 x for 16 values of g (fast-paths/e4m3-tensor-quotient-set-a/b).
KVQ_HD inline float divide_for_e4m3_code(float x, float g, float y) { return copysignf(divide_by_reciprocal(x, g, y), x); }
KVQ_HD inline bool divides_for_e4m3_codes(float g) { return g >= kDivideByReciprocalMin && g <= kDivideByReciprocalMax; }
inline constexpr float kE4m3QuotientLimit = 0x1p126f;

KVQ_HD inline float reciprocal(Reciprocal kind, float x) {
  return kind == Reciprocal::approx_ftz ? rcp_approx_ftz(x) : 1.0f / x;
}

// PTX div.full.f32, what Triton's default FP32 `/` compiles to (docs/recipes.md "Engine arithmetic"):
// on sm_90 it equals x * rcp.approx.ftz(y) rounded once (mul.rn, subnormal products kept) for every
// normal |y| below 2^126. At the ends of the range the instruction scales both operands first: by
// 2^-2 where |y| >= 2^126 (whose reciprocal rcp.approx would flush), by 2^24 where y is subnormal
// (which rcp.approx.ftz would read as zero). Each case measured bit for bit over 2^22 random pairs
// (experiments/probes/div_full.py).
// The model given rcp.approx.ftz's table (host and device: the gpu suite runs it against the instruction).
KVQ_HD inline float div_full_with(const std::uint8_t* table, float x, float y) {
  const std::uint32_t field = (bits_of(y) >> 23) & 0xFFu;
  if (field >= 253 && field != 255) return (x * 0.25f) * rcp_approx_ftz_with(table, y * 0.25f);
  if (field == 0) return (x * 0x1p24f) * rcp_approx_ftz_with(table, y * 0x1p24f);
  return x * rcp_approx_ftz_with(table, y);
}
inline float div_full_model(float x, float y) { return div_full_with(reciprocal_detail::sm90_table(), x, y); }
KVQ_HD inline float div_full(float x, float y) {
#if defined(__CUDA_ARCH__)
  float q;
  asm("div.full.f32 %0, %1, %2;" : "=f"(q) : "f"(x), "f"(y));
  return q;
#else
  return div_full_model(x, y);
#endif
}

}  // namespace kvq
