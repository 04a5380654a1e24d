// Scale recipes as data, and one block quantizer that runs every recipe with the
// FP32 arithmetic a kernel does (REFERENCE.md section 4). Host and device.
//
// Conventions, stated once:
// - Every scale is a DECODE scale: value = element * block scale (* tensor scale).
// - The tensor scale g = amax / tensor_divisor (FP32 division); amax and bmax are
//   maxima of |x| that ignore NaN (fmaxf semantics), except the MX rules, where a NaN
//   in the block makes the block scale NaN (0xFF), as the OCP spec says.
// - Power-of-two scales multiply elements by 2^-e exactly; a kernel's FP32 x / 2^e
//   equals that except for FP32-subnormal quotients, which every element format here
//   rounds to zero either way.
#pragma once

#include <cstdint>

#include "formats/codec.hpp"
#include "formats/conventions.hpp"
#include "formats/float_bits.hpp"

namespace kvq {

enum class BlockScale : std::uint8_t {
  e4m3_two_level,  // NVFP4: E4M3 block scale under an FP32 tensor scale g
  e8m0_pow2,       // MX and block-FP4: a power of two stored as E8M0
  tensor_only,     // per-tensor FP8: the FP32 tensor scale alone
};

enum class Pow2Rule : std::uint8_t {
  floor,       // OCP: e = floor(log2 bmax) - emax(element)
  ceil,        // floor, +1 when bmax is not a power of two
  even,        // bmax rounded (RNE) to the element's mantissa width, then floor
  rceil,       // e = ceil(log2(bmax * (1/max(element)))), the product and reciprocal in FP32
  ceil_ratio,  // block-FP4 as SGLang ships it: e = ceil(log2(max(bmax/6, 1e-10))), FP32 division
};

enum class Apply : std::uint8_t {
  divide,               // q = cvt(x / scale)
  multiply_reciprocal,  // q = cvt(x * (1/scale)), the reciprocal rounded to FP32 first
};

enum class ZeroGuard : std::uint8_t {
  block_and_scale,  // bmax == 0 (scale stored as 0), or the effective scale sf * g == 0 (sf rounded
                    // to 0, or g underflowed FP32): zero codes (kvq reference)
  block_max,        // bmax == 0 only (FlashInfer): a scale that rounds to 0 divides by zero
  rounded_scale,    // the rounded scale == 0 only (vLLM); an all-zero tensor stores the NaN scale 0/0
};

struct Recipe {
  FormatId element = FormatId::e2m1;
  int block = 16;  // elements per block scale (ignored by tensor_only)
  BlockScale scale = BlockScale::e4m3_two_level;
  Pow2Rule pow2 = Pow2Rule::floor;
  float tensor_divisor = 448.0f * 6.0f;  // g = amax / tensor_divisor
  Apply apply = Apply::divide;
  ZeroGuard zero_guard = ZeroGuard::block_and_scale;
  bool clamp_block_scale = false;  // torchao: the block scale clamped to [2^-6, 448] before its cast
  Rounding element_rounding = Rounding::nearest_even;
};

// Largest finite element value and its binade exponent (E2M1: 6 and 2; E4M3: 448 and 8).
KVQ_HD constexpr float element_max(const Recipe& r) { return static_cast<float>(max_finite(format_of(r.element))); }
KVQ_HD constexpr int element_emax(const Recipe& r) {
  const Format f = format_of(r.element);
  return static_cast<int>(f.max_finite_code() >> f.mantissa_bits) - f.bias;
}

// Elements convert like CUDA's satfinite intrinsics (NaN -> 0x7F for E4M3, +6 for E2M1),
// with the recipe's rounding (nearest_away = SGLang's ">= threshold" rule).
KVQ_HD constexpr Conversion element_conversion(const Recipe& r) {
  Conversion c = convention_rule(ConventionId::cuda_satfinite, r.element).conversion;
  c.rounding = r.element_rounding;
  return c;
}
KVQ_HD constexpr Conversion scale_conversion() {  // E4M3 block scales: cvt.rn.satfinite
  return convention_rule(ConventionId::cuda_satfinite, FormatId::e4m3fn).conversion;
}

namespace recipe_detail {

KVQ_HD inline bool is_nan(float x) { return x != x; }
KVQ_HD inline float magnitude(float x) { return float_from_bits(bits_of(x) & 0x7fffffffu); }

// floor(log2 |x|) of a finite non-zero float, subnormals included.
KVQ_HD inline int floor_log2(float x) { return unpack(kFP32, bits_of(x)).exponent; }
KVQ_HD inline bool is_power_of_two(float x) { return unpack(kFP32, bits_of(x)).significand == (1ull << 63); }
KVQ_HD inline int ceil_log2(float x) { return floor_log2(x) + (is_power_of_two(x) ? 0 : 1); }

// x * 2^shift exactly, then converted: the power-of-two scaling of the MX rules.
KVQ_HD inline std::uint8_t encode_scaled(Format f, const Conversion& c, float x, int shift) {
  Unpacked u = unpack(kFP32, bits_of(x));
  if (u.kind == ValueKind::finite) u.exponent += shift;
  return static_cast<std::uint8_t>(encode(f, c, u));
}

}  // namespace recipe_detail

// The tensor decode scale of a two-level or tensor-only recipe.
KVQ_HD inline float tensor_scale(const Recipe& r, float amax) { return amax / r.tensor_divisor; }

// Block exponent e of a power-of-two rule (scale 2^e); bmax finite and > 0.
KVQ_HD inline int pow2_exponent(const Recipe& r, float bmax) {
  using namespace recipe_detail;
  const int emax = element_emax(r);
  switch (r.pow2) {
    case Pow2Rule::floor: return floor_log2(bmax) - emax;
    case Pow2Rule::ceil: return ceil_log2(bmax) - emax;
    case Pow2Rule::even: {
      const Format f = format_of(r.element);
      Unpacked u = unpack(kFP32, bits_of(bmax));
      const int drop = 63 - f.mantissa_bits;  // keep the element's mantissa width, round half to even
      const std::uint64_t kept = u.significand >> drop;
      const std::uint64_t rest = u.significand << (64 - drop);
      const bool up = (rest >> 63) && ((rest << 1) != 0 || (kept & 1));
      const bool carries = up && kept + 1 == (std::uint64_t{2} << f.mantissa_bits);
      return u.exponent + (carries ? 1 : 0) - emax;
    }
    case Pow2Rule::rceil: {  // the product may underflow to 0: E8M0 round-up of 0 is 2^-127
      const float ratio = bmax * (1.0f / element_max(r));
      return ratio == 0.0f ? -127 : ceil_log2(ratio);
    }
    case Pow2Rule::ceil_ratio: {
      const float ratio = bmax / 6.0f;
      return ceil_log2(ratio > 1e-10f ? ratio : 1e-10f);
    }
  }
  return 0;
}

// Quantizes one block of n values: element codes (unpacked, one per byte) and the block's
// scale code (E4M3 or E8M0; 0 for tensor_only). g is tensor_scale(r, amax) where the recipe has one.
KVQ_HD inline std::uint8_t quantize_block(const Recipe& r, float g, const float* x, int n, std::uint8_t* codes) {
  using namespace recipe_detail;
  const Format ef = format_of(r.element);
  const Conversion ec = element_conversion(r);
  float bmax = 0.0f;
  bool any_nan = false;
  for (int i = 0; i < n; ++i) {
    const float a = magnitude(x[i]);
    any_nan = any_nan || is_nan(a);
    bmax = a > bmax ? a : bmax;  // fmaxf: NaN never wins
  }
  switch (r.scale) {
    case BlockScale::e4m3_two_level: {
      float s = (bmax / element_max(r)) / g;
      if (r.clamp_block_scale) s = s < 0x1p-6f ? 0x1p-6f : (s > 448.0f ? 448.0f : s);
      // The block-max guard also stores scale 0: an all-zero tensor (g = 0) would compute 0/0 and
      // store the NaN scale 0x7F, a bug seen in a shipped checkpoint.
      const bool zero_block = r.zero_guard != ZeroGuard::rounded_scale && bmax == 0.0f;
      const auto sf8 = zero_block ? std::uint8_t{0} : static_cast<std::uint8_t>(encode_float(kE4M3FN, scale_conversion(), s));
      const float sf = decode_float(kE4M3FN, sf8);
      const float reciprocal = (1.0f / g) / sf;  // torchao's encode factor
      const float denominator = sf * g;
      const bool zero = zero_block || (r.zero_guard == ZeroGuard::rounded_scale && sf == 0.0f) ||
                        (r.zero_guard == ZeroGuard::block_and_scale && denominator == 0.0f);
      for (int i = 0; i < n; ++i) {
        const float v = zero ? 0.0f : (r.apply == Apply::divide ? x[i] / denominator : x[i] * reciprocal);
        codes[i] = static_cast<std::uint8_t>(encode_float(ef, ec, zero ? x[i] * 0.0f : v));
      }
      return sf8;
    }
    case BlockScale::e8m0_pow2: {
      const bool mx = r.pow2 != Pow2Rule::ceil_ratio;
      const float nan = float_from_bits(0x7fc00000u);
      if ((mx && any_nan) || bmax > 3.4028235e38f) {  // NaN or inf block: scale NaN (0xFF)
        for (int i = 0; i < n; ++i) codes[i] = static_cast<std::uint8_t>(encode_float(ef, ec, nan));
        return 0xFF;
      }
      int e = bmax == 0.0f ? -127 : pow2_exponent(r, bmax);
      e = e < -127 ? -127 : (e > 127 ? 127 : e);
      for (int i = 0; i < n; ++i) codes[i] = encode_scaled(ef, ec, x[i], -e);
      return static_cast<std::uint8_t>(e + 127);
    }
    case BlockScale::tensor_only: {
      const float reciprocal = 1.0f / g;
      for (int i = 0; i < n; ++i) {
        const float v = g == 0.0f ? x[i] * 0.0f : (r.apply == Apply::divide ? x[i] / g : x[i] * reciprocal);
        codes[i] = static_cast<std::uint8_t>(encode_float(ef, ec, v));
      }
      return 0;
    }
  }
  return 0;
}

// The value of one element code, in FP32: (v * sf) * g, v * 2^e (exact, rounded once), or v * g.
// A NaN result is always the canonical 0x7FC00000 (hardware NaN payloads differ between CPU and GPU).
KVQ_HD inline float dequantize_element_raw(const Recipe& r, float g, std::uint8_t scale_code, std::uint8_t code);
KVQ_HD inline float dequantize_element(const Recipe& r, float g, std::uint8_t scale_code, std::uint8_t code) {
  const float v = dequantize_element_raw(r, g, scale_code, code);
  return v != v ? float_from_bits(0x7fc00000u) : v;
}
KVQ_HD inline float dequantize_element_raw(const Recipe& r, float g, std::uint8_t scale_code, std::uint8_t code) {
  const Format ef = format_of(r.element);
  switch (r.scale) {
    case BlockScale::e4m3_two_level:
      return (decode_float(ef, code) * decode_float(kE4M3FN, scale_code)) * g;
    case BlockScale::e8m0_pow2: {
      if (scale_code == 0xFF) return float_from_bits(0x7fc00000u);
      Unpacked u = unpack(ef, code);
      if (u.kind == ValueKind::finite) u.exponent += static_cast<int>(scale_code) - 127;
      return float_from_bits(static_cast<std::uint32_t>(encode(kFP32, Conversion{}, u)));
    }
    case BlockScale::tensor_only: return decode_float(ef, code) * g;
  }
  return 0.0f;
}

}  // namespace kvq
