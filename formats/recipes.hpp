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
#include "formats/fast_paths.hpp"
#include "formats/float_bits.hpp"
#include "formats/reciprocal.hpp"

namespace kvq {

enum class BlockScale : std::uint8_t {
  e4m3_two_level,  // NVFP4: E4M3 block scale under an FP32 tensor scale g
  e8m0_pow2,       // MX and block-FP4: a power of two stored as E8M0
  tensor_only,     // per-tensor FP8: the FP32 tensor scale alone
};

// How a two-level (E4M3 block scale) recipe computes its scales; g is always the DECODE scale.
enum class TwoLevel : std::uint8_t {
  reference,      // sf8 = e4m3((bmax/emax)/g); q = cvt(x / (sf*g)), or x * ((1/g)/sf) (Apply)
  rcp_decode,     // FlashInfer KV: takes the decode scale g. sf = rcp(g) * (bmax * rcp(emax));
                  // outS = guard ? rcp(sf8 * g) : 0; q = cvt(x * outS)
  rcp_encode,     // vLLM: takes k_scale = g and passes enc = 1/g (IEEE, host). sf = enc * (bmax * rcp(emax));
                  // outS = guard ? rcp(sf8 * rcp(enc)) : 0; q = cvt(x * outS)
  four_over_six,  // reference, with a per-block choice of bmax/6 or bmax/4: the lower FP32 squared error wins
};

enum class Pow2Rule : std::uint8_t {
  floor,       // OCP: e = floor(log2 bmax) - emax(element)
  ceil,        // floor, +1 when bmax is not a power of two
  even,        // bmax rounded (RNE) to the element's mantissa width, then floor
  rceil,       // e = ceil(log2(bmax * (1/max(element)))), the product and reciprocal in FP32
  ceil_ratio,  // e = ceil(log2(max(bmax/max(element), ratio_floor))), FP32 division: block-FP4 as SGLang
               // ships it (6, 1e-10) and the FlashMLA tile scale (448, 1e-4)
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
  none,             // no guard (a port bug, for kvq identify and the mutants): a zero block divides 0 by 0
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
  TwoLevel two_level = TwoLevel::reference;
  Reciprocal reciprocal = Reciprocal::approx_ftz;  // the rcp of the rcp_* styles
  float ratio_floor = 1e-10f;                      // Pow2Rule::ceil_ratio's floor
  // Variants that no engine's recipe has but ports do (kvq identify, the mutant catalogue); the
  // named recipes keep the defaults, which the oracle models.
  int e8m0_bias = 127;              // the stored E8M0 byte = e + bias (125: an off-by-two port); decode reads 127
  bool element_input_bf16 = false;  // the scaled element input rounded to BF16 first (double rounding)
};

inline constexpr int kMaxRecipeBlock = 128;  // the largest block a recipe may use (MLA tiles)

// Largest finite element value and its binade exponent (E2M1: 6 and 2; E4M3: 448 and 8).
KVQ_HD constexpr float element_max(const Recipe& r) { return static_cast<float>(max_finite(format_of(r.element))); }
KVQ_HD constexpr int element_emax(const Recipe& r) {
  const Format f = format_of(r.element);
  return static_cast<int>(f.max_finite_code() >> f.mantissa_bits) - f.bias;
}

// Elements convert like CUDA's satfinite intrinsics (NaN -> 0x7F for E4M3, +6 for E2M1; INT
// elements, which no intrinsic has, the same way as E2M1: saturate, NaN -> +max), with the
// recipe's rounding (nearest_away = SGLang's ">= threshold" rule).
KVQ_HD constexpr Conversion element_conversion(const Recipe& r) {
  const bool integer = r.element == FormatId::int4 || r.element == FormatId::int8;
  Conversion c = convention_rule(ConventionId::cuda_satfinite, integer ? FormatId::e2m1 : r.element).conversion;
  c.rounding = r.element_rounding;
  return c;
}
KVQ_HD constexpr Conversion scale_conversion() {  // E4M3 block scales: cvt.rn.satfinite
  return convention_rule(ConventionId::cuda_satfinite, FormatId::e4m3fn).conversion;
}

// One element: the codec's conversion (element_conversion), through a fast path where one is
// proven equal to it (formats/fast_paths.hpp).
KVQ_HD inline std::uint8_t encode_element(const Recipe& r, float v) {
  if (r.element_input_bf16) v = float_from_bits(static_cast<std::uint32_t>(bf16_rne_fast(v)) << 16);
  const bool nearest = r.element_rounding == Rounding::nearest_even || r.element_rounding == Rounding::nearest_away;
  if (r.element == FormatId::e2m1 && nearest) return e2m1_satfinite_fast(v, r.element_rounding == Rounding::nearest_away);
  if (r.element == FormatId::e4m3fn && r.element_rounding == Rounding::nearest_even) return e4m3_satfinite_fast(v);
  if (r.element == FormatId::int4 && r.element_rounding == Rounding::nearest_even) return int_satfinite_fast(v, 2, 7);
  if (r.element == FormatId::int8 && r.element_rounding == Rounding::nearest_even) return int_satfinite_fast(v, 6, 127);
  return static_cast<std::uint8_t>(encode_float(format_of(r.element), element_conversion(r), v));
}
KVQ_HD inline float element_value(const Recipe& r, std::uint8_t code) {
  if (r.element == FormatId::e2m1) return e2m1_value_fast(code);
  if (r.element == FormatId::e4m3fn) return e4m3_value_fast(code);
  if (r.element == FormatId::int4) return int_value_fast(code, 2, 7);
  if (r.element == FormatId::int8) return int_value_fast(code, 6, 127);
  return decode_float(format_of(r.element), code);
}

namespace recipe_detail {

KVQ_HD inline bool is_nan(float x) { return x != x; }
KVQ_HD inline float magnitude(float x) { return float_from_bits(bits_of(x) & 0x7fffffffu); }

// floor(log2 |x|) of a finite non-zero float, subnormals included.
KVQ_HD inline int floor_log2(float x) { return unpack(kFP32, bits_of(x)).exponent; }
KVQ_HD inline bool is_power_of_two(float x) { return unpack(kFP32, bits_of(x)).significand == (1ull << 63); }
KVQ_HD inline int ceil_log2(float x) { return floor_log2(x) + (is_power_of_two(x) ? 0 : 1); }

}  // namespace recipe_detail

// 2^k as an FP32, k in [-127, 127] (2^-127 is the subnormal 0x00400000).
KVQ_HD inline float pow2_float(int k) {
  return float_from_bits(k >= -126 ? static_cast<std::uint32_t>(k + 127) << 23 : 0x00400000u);
}

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
      const float ratio = bmax / element_max(r);
      return ceil_log2(ratio > r.ratio_floor ? ratio : r.ratio_floor);
    }
  }
  return 0;
}

namespace recipe_detail {

// torchao's clamp of the block decode scale to [2^-6, 448] before its cast, where the recipe has it.
KVQ_HD inline float clamped_scale(const Recipe& r, float s) {
  return r.clamp_block_scale ? (s < 0x1p-6f ? 0x1p-6f : (s > 448.0f ? 448.0f : s)) : s;
}

// Elements of a two-level block: q = cvt(x / denominator) or cvt(x * factor); zero: cvt(x * 0).
KVQ_HD inline void encode_two_level(const Recipe& r, const float* x, int n, bool zero, bool divide, float by,
                                    std::uint8_t* codes) {
  KVQ_UNROLL
  for (int i = 0; i < n; ++i) codes[i] = encode_element(r, zero ? x[i] * 0.0f : (divide ? x[i] / by : x[i] * by));
}

// The reference scale rule for the block decode scale (bmax/divisor)/g; codes filled, sf8 returned.
KVQ_HD inline std::uint8_t two_level_reference(const Recipe& r, float g, const float* x, int n, float bmax,
                                               float divisor, std::uint8_t* codes) {
  const float s = clamped_scale(r, (bmax / divisor) / g);
  // The block-max guard also stores scale 0: an all-zero tensor (g = 0) would compute 0/0 and
  // store the NaN scale 0x7F, a bug seen in a shipped checkpoint.
  const bool zero_block =
      r.zero_guard != ZeroGuard::rounded_scale && r.zero_guard != ZeroGuard::none && bmax == 0.0f;
  const std::uint8_t sf8 = zero_block ? std::uint8_t{0} : e4m3_satfinite_fast(s);  // scale_conversion()
  const float sf = e4m3_value_fast(sf8);
  const float denominator = sf * g;
  const bool zero = zero_block || (r.zero_guard == ZeroGuard::rounded_scale && sf == 0.0f) ||
                    (r.zero_guard == ZeroGuard::block_and_scale && denominator == 0.0f);
  const bool divide = r.apply == Apply::divide;
  encode_two_level(r, x, n, zero, divide, divide ? denominator : (1.0f / g) / sf, codes);  // torchao: (1/g)/sf
  return sf8;
}

// The FP32 squared error sum((x - (v * sf) * g)^2) of a block's codes, in element order.
KVQ_HD inline float two_level_squared_error(const Recipe& r, float g, const float* x, int n, std::uint8_t sf8,
                                            const std::uint8_t* codes) {
  const float sf = e4m3_value_fast(sf8);
  float sum = 0.0f;
  KVQ_UNROLL
  for (int i = 0; i < n; ++i) {
    const float d = x[i] - (element_value(r, codes[i]) * sf) * g;
    const float square = d * d;
    sum = sum + square;
  }
  return sum;
}

KVQ_HD inline std::uint8_t quantize_two_level(const Recipe& r, float g, const float* x, int n, float bmax,
                                              std::uint8_t* codes) {
  const float emax = element_max(r);
  switch (r.two_level) {
    case TwoLevel::reference: return two_level_reference(r, g, x, n, bmax, emax, codes);
    case TwoLevel::four_over_six: {
      const std::uint8_t sf6 = two_level_reference(r, g, x, n, bmax, emax, codes);
      std::uint8_t four[kMaxRecipeBlock];
      const std::uint8_t sf4 = two_level_reference(r, g, x, n, bmax, 4.0f, four);  // E2M1
      if (!(two_level_squared_error(r, g, x, n, sf4, four) < two_level_squared_error(r, g, x, n, sf6, codes)))
        return sf6;
      KVQ_UNROLL
      for (int i = 0; i < n; ++i) codes[i] = four[i];
      return sf4;
    }
    case TwoLevel::rcp_decode:
    case TwoLevel::rcp_encode: {
      const Reciprocal k = r.reciprocal;
      const bool decode_api = r.two_level == TwoLevel::rcp_decode;
      const float encode = decode_api ? reciprocal(k, g) : 1.0f / g;  // vLLM: 1/k_scale on the host
      const float s = encode * (bmax * reciprocal(k, emax));
      const std::uint8_t sf8 = e4m3_satfinite_fast(s);  // scale_conversion()
      const float sf = e4m3_value_fast(sf8);
      const bool guard = r.zero_guard == ZeroGuard::none || (r.zero_guard == ZeroGuard::block_max ? bmax != 0.0f : sf != 0.0f);
      const float out_scale = guard ? reciprocal(k, sf * (decode_api ? g : reciprocal(k, encode))) : 0.0f;
      encode_two_level(r, x, n, false, false, out_scale, codes);
      return sf8;
    }
  }
  return 0;
}

}  // namespace recipe_detail

// Quantizes one block of n <= kMaxRecipeBlock values: element codes (unpacked, one per byte) and
// the block's scale code (E4M3 or E8M0; 0 for tensor_only). g is tensor_scale(r, amax) where the
// recipe has one.
KVQ_HD inline std::uint8_t quantize_block(const Recipe& r, float g, const float* x, int n, std::uint8_t* codes) {
  using namespace recipe_detail;
  float bmax = 0.0f;
  bool any_nan = false;
  KVQ_UNROLL
  for (int i = 0; i < n; ++i) {
    const float a = magnitude(x[i]);
    any_nan = any_nan || is_nan(a);
    bmax = a > bmax ? a : bmax;  // fmaxf: NaN never wins
  }
  switch (r.scale) {
    case BlockScale::e4m3_two_level: return quantize_two_level(r, g, x, n, bmax, codes);
    case BlockScale::e8m0_pow2: {
      const bool mx = r.pow2 != Pow2Rule::ceil_ratio;
      if ((mx && any_nan) || bmax > 3.4028235e38f) {  // NaN or inf block: scale NaN (0xFF)
        KVQ_UNROLL
        for (int i = 0; i < n; ++i) codes[i] = encode_element(r, float_from_bits(0x7fc00000u));
        return 0xFF;
      }
      // A zero block: 2^-127, except under a ratio floor, which defines it (FlashMLA: 2^-13, SGLang: 2^-33).
      int e = bmax == 0.0f && r.pow2 != Pow2Rule::ceil_ratio ? -127 : pow2_exponent(r, bmax);
      e = e < -127 ? -127 : (e > 127 ? 127 : e);
      // x * 2^-e is exact in FP32 except for FP32-subnormal products, which every element
      // format rounds to +-0 from the exact value too: the exact scaling, rounded once.
      const float down = pow2_float(-e);
      KVQ_UNROLL
      for (int i = 0; i < n; ++i) codes[i] = encode_element(r, x[i] * down);
      return static_cast<std::uint8_t>(e + r.e8m0_bias);
    }
    case BlockScale::tensor_only: {
      const float reciprocal = 1.0f / g;
      KVQ_UNROLL
      for (int i = 0; i < n; ++i)
        codes[i] = encode_element(r, g == 0.0f ? x[i] * 0.0f : (r.apply == Apply::divide ? x[i] / g : x[i] * reciprocal));
      return 0;
    }
  }
  return 0;
}

// What a block's elements become before their conversion, decided by the scale rule alone:
// q = x / by, q = x * by (by = 0 zeroes a block: x * 0 keeps the sign), or NaN (a NaN scale).
enum class ElementOp : std::uint8_t { divide, multiply, nan };
struct BlockPlan {
  std::uint8_t scale_code = 0;  // E4M3 or E8M0 code; 0 for tensor_only
  ElementOp op = ElementOp::multiply;
  float by = 0.0f;
};

namespace recipe_detail {

// The reference scale rule from its block decode scale s = (bmax/divisor)/g, however computed (IEEE
// here; formats/packed_quantize.hpp: two_level_plan_lean): the clamp, the guards, the scale code and
// what the elements become. multiplier(sf8, sf) gives (1/g)/sf.
template <typename Multiplier>
KVQ_HD inline BlockPlan two_level_plan_from(const Recipe& r, float g, float bmax, float s, const Multiplier& multiplier) {
  s = clamped_scale(r, s);
  // The block-max guard also stores scale 0: an all-zero tensor (g = 0) would compute 0/0 and
  // store the NaN scale 0x7F, a bug seen in a shipped checkpoint.
  const bool zero_block =
      r.zero_guard != ZeroGuard::rounded_scale && r.zero_guard != ZeroGuard::none && bmax == 0.0f;
  const std::uint8_t sf8 = zero_block ? std::uint8_t{0} : e4m3_satfinite_fast(s);  // scale_conversion()
  const float sf = e4m3_value_fast(sf8);
  const float denominator = sf * g;
  const bool zero = zero_block || (r.zero_guard == ZeroGuard::rounded_scale && sf == 0.0f) ||
                    (r.zero_guard == ZeroGuard::block_and_scale && denominator == 0.0f);
  if (zero) return {sf8, ElementOp::multiply, 0.0f};
  if (r.apply == Apply::divide) return {sf8, ElementOp::divide, denominator};
  return {sf8, ElementOp::multiply, multiplier(sf8, sf)};  // torchao: x * ((1/g)/sf)
}
struct IeeeMultiplier {
  float g;
  KVQ_HD float operator()(std::uint8_t, float sf) const { return (1.0f / g) / sf; }
};
KVQ_HD inline BlockPlan two_level_plan(const Recipe& r, float g, float bmax, float divisor) {
  return two_level_plan_from(r, g, bmax, (bmax / divisor) / g, IeeeMultiplier{g});
}

// FlashInfer (decode scale g) and vLLM (k_scale = g, encode scale 1/g): reciprocal arithmetic.
KVQ_HD inline BlockPlan two_level_rcp_plan(const Recipe& r, float g, float bmax) {
  const Reciprocal k = r.reciprocal;
  const bool decode_api = r.two_level == TwoLevel::rcp_decode;
  const float encode = decode_api ? reciprocal(k, g) : 1.0f / g;  // vLLM: 1/k_scale on the host
  const float s = encode * (bmax * reciprocal(k, element_max(r)));
  const std::uint8_t sf8 = e4m3_satfinite_fast(s);  // scale_conversion()
  const float sf = e4m3_value_fast(sf8);
  const bool guard = r.zero_guard == ZeroGuard::none || (r.zero_guard == ZeroGuard::block_max ? bmax != 0.0f : sf != 0.0f);
  return {sf8, ElementOp::multiply, guard ? reciprocal(k, sf * (decode_api ? g : reciprocal(k, encode))) : 0.0f};
}

}  // namespace recipe_detail

// The plan of a block with max |x| = bmax (NaN ignored) and any_nan = some element is NaN, for
// every rule but four_over_six: the scale code quantize_block stores and what it does to the
// elements, for code that encodes elements its own way (formats/packed_quantize.hpp). Its rules
// are quantize_block's, held equal by the kernels' properties (packed/*: block by block against
// quantize_block). The two-level rules are written twice on purpose: quantize_block built on these
// plans (tried in sessions 4 and 5) put the 8-bit kernels' arrays in local memory, and raised the
// nvfp4-4over6 kernel from 72 to 96 registers through its fallback path.
KVQ_HD inline BlockPlan plan_block(const Recipe& r, float g, float bmax, bool any_nan) {
  switch (r.scale) {
    case BlockScale::e4m3_two_level:
      return r.two_level == TwoLevel::reference || r.two_level == TwoLevel::four_over_six
                 ? recipe_detail::two_level_plan(r, g, bmax, element_max(r))
                 : recipe_detail::two_level_rcp_plan(r, g, bmax);
    case BlockScale::e8m0_pow2: {
      const bool mx = r.pow2 != Pow2Rule::ceil_ratio;
      if ((mx && any_nan) || bmax > 3.4028235e38f) return {0xFF, ElementOp::nan, 0.0f};  // NaN or inf block
      // A zero block: 2^-127, except under a ratio floor, which defines it (FlashMLA: 2^-13, SGLang: 2^-33).
      int e = bmax == 0.0f && r.pow2 != Pow2Rule::ceil_ratio ? -127 : pow2_exponent(r, bmax);
      e = e < -127 ? -127 : (e > 127 ? 127 : e);
      // x * 2^-e is exact in FP32 except for FP32-subnormal products, which every element
      // format rounds to +-0 from the exact value too: the exact scaling, rounded once.
      return {static_cast<std::uint8_t>(e + r.e8m0_bias), ElementOp::multiply, pow2_float(-e)};
    }
    case BlockScale::tensor_only:
      if (g == 0.0f) return {0, ElementOp::multiply, 0.0f};
      return r.apply == Apply::divide ? BlockPlan{0, ElementOp::divide, g} : BlockPlan{0, ElementOp::multiply, 1.0f / g};
  }
  return {};
}

// The FP32 multiplier of a block's scale code: its E4M3 value, the exact 2^e (NaN for 0xFF), or
// 1 (per-tensor recipes have no block scale). A kernel decodes it once per block.
KVQ_HD inline float block_scale_value(const Recipe& r, std::uint8_t scale_code) {
  switch (r.scale) {
    case BlockScale::e4m3_two_level: return e4m3_value_fast(scale_code);
    case BlockScale::e8m0_pow2:
      return scale_code == 0xFF ? float_from_bits(0x7fc00000u) : pow2_float(static_cast<int>(scale_code) - 127);
    case BlockScale::tensor_only: return 1.0f;
  }
  return 0.0f;
}

// The value of one element code, in FP32, given block_scale_value: (v * sf) * g, v * 2^e (one
// FP32 multiply by the exact 2^e: the exact product rounded once), or v * g. A NaN result is
// always the canonical 0x7FC00000 (hardware NaN payloads differ between CPU and GPU).
KVQ_HD inline float dequantize_scaled_element(const Recipe& r, float g, float scale, std::uint8_t code) {
  const float v = element_value(r, code);
  float y = 0.0f;
  switch (r.scale) {
    case BlockScale::e4m3_two_level: y = (v * scale) * g; break;
    case BlockScale::e8m0_pow2: y = v * scale; break;
    case BlockScale::tensor_only: y = v * g; break;
  }
  return y != y ? float_from_bits(0x7fc00000u) : y;
}
KVQ_HD inline float dequantize_element(const Recipe& r, float g, std::uint8_t scale_code, std::uint8_t code) {
  return dequantize_scaled_element(r, g, block_scale_value(r, scale_code), code);
}

// The prefill workspace: an element requantized to E4M3 (cvt.rn.satfinite) from its value
// element * scale * factor, the exact product rounded ONCE. factor is the caller's FP32
// (tensor decode scale, or 1 for power-of-two recipes) / (workspace decode scale); the product
// of a 4- or 8-bit element, a 4-bit or power-of-two scale and a 24-bit factor is exact in FP64.
KVQ_HD inline std::uint8_t requantize_e4m3(const Recipe& r, std::uint8_t scale_code, std::uint8_t code, float factor) {
  double scale = 1.0;
  if (r.scale == BlockScale::e4m3_two_level) scale = e4m3_value_fast(scale_code);
  if (r.scale == BlockScale::e8m0_pow2)
    scale = scale_code == 0xFF ? static_cast<double>(float_from_bits(0x7fc00000u))
                               : static_cast<double>(pow2_float(static_cast<int>(scale_code) - 127));
  const double exact = (static_cast<double>(element_value(r, code)) * scale) * static_cast<double>(factor);
  return e4m3_satfinite_from_double_fast(exact);  // == encode_double(kE4M3FN, scale_conversion(), exact)
}

}  // namespace kvq
