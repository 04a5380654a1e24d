// Scale recipes as data, and one block quantizer that runs every recipe with the
// FP32 arithmetic a kernel does (docs/recipes.md). Host and device.
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

#include <cmath>
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
                  // (the rule as the 4-over-6 paper states it, in decode-scale form)
  // The four-over-six package's arithmetic (docs/recipes.md "nvfp4-4over6"): the tensor parameter is
  // amax itself, enc = D/amax, s = (bmax/emax) * enc, dec = 1/enc, q = x * (1/(dec*sf)); a zero block
  // scale writes +0 codes. The value of a code is ((v*sf)*amax)/D.
  amax_encode,         // one candidate (the package's static_6 rule)
  four_over_six_amax,  // amax_encode's s and s*1.5 (for bmax/4); the lower error sum((((f*sf)*amax)/D - x)^2),
                       // summed by halves as torch's CUDA sum, wins; ties keep s (the package's mse rule)
};

// The FP32 divisions the recipe's code performs (docs/recipes.md "Engine arithmetic").
enum class Division : std::uint8_t {
  ieee,                 // every `/` correctly rounded (CUDA C++ without fast math)
  full_approx,          // every `/` is Triton's default FP32 `/`, PTX div.full.f32 (formats/reciprocal.hpp)
  constant_reciprocal,  // PyTorch on CUDA: a tensor divided by a Python number c is x * RN(1/c) (ATen's
                        // div_true kernel multiplies by the reciprocal of a CPU scalar); a tensor by a
                        // tensor is IEEE. The rule's constants: bmax / m, amax / D.
  number_over_tensor,   // PyTorch whose divisors are tensors (a 0-dim CUDA tensor is no CPU scalar): IEEE,
                        // except a Python number divided by a tensor, D / amax, which Tensor.__rtruediv__
                        // computes as RN(RN(1 / amax) * D) (compressed-tensors' global scale)
};

// What the rule's tensor parameter (tensor_scale, the `g` argument of quantize_block) is.
enum class TensorParam : std::uint8_t {
  decode,  // g = amax / D; a value is (v * sf) * g (kvq's reference, torchao, FlashInfer, vLLM, ModelOpt)
  encode,  // e = D / amax, 1 where that is not finite (an all-zero tensor); a value is (v * sf) / e
           // (compressed-tensors' global scale)
  amax,    // amax itself; a value is ((v * sf) * amax) / D (the four-over-six package)
};

// How the reference two-level rule forms the block scale s from bmax, the element max m and the
// tensor parameter.
enum class ScaleForm : std::uint8_t {
  ratio_then_tensor,  // (bmax / m) / g, or (bmax / m) * e for an encode parameter
  over_product,       // bmax / (m * g): one division by the FP32 product (ModelOpt)
};

// How the scaled elements become codes.
enum class ElementCast : std::uint8_t {
  satfinite,       // CUDA cvt.rn.satfinite: overflow to +-max, NaN to 0x7F (E4M3) / +6 (E2M1)
  satfinite_unsigned_zero,  // satfinite, but a +-0 value gives +0: the sign taken from v < 0 (ModelOpt,
                            // compressed-tensors and SGLang's block-FP4 read it so)
  satfinite_negative_zero,  // satfinite, but a +-0 value gives -0 (E2M1 0x8): the sign bit taken from
                            // (2 - sign(v)) // 2, which is 1 for v = 0 (ModelOpt's MXFP4 cast)
  nonsaturating,   // PyTorch eager .to(float8_e4m3fn) (the torch convention): beyond 464 NaN, sign kept
  e2m1_by_rounding,  // the four-over-six package: |v| rounded on the E2M1 grid extended past 6 (steps of
                     // 2: 7 -> 8), sign(x) times it, the code read from its BF16 bits; +-0 inputs give 0x0
                     // and 8 gives 0x8, the code of -0 (docs/recipes.md "nvfp4-4over6")
  triton_clamp,      // Triton's tl.clamp(v, -max, max) before the satfinite cast: on sm_90 it is
                     // min.xorsign.abs.f32, which returns the other operand for a NaN, so a NaN value (the
                     // GPU's arithmetic NaN is +) becomes +max: E4M3 0x7E, not 0x7F (vLLM's and SGLang's
                     // Triton FP8 writers)
  bounds_count,      // the magnitude code counted as the number of decision bounds <= |v| and the sign from
                     // v < 0 (SGLang's block-FP4): satfinite with +-0 as +0, and a NaN (no comparison holds)
                     // gives 0x0
  torchao_e2m1,      // torchao's bit-arithmetic E2M1 cast (f32_to_f4_unpacked): satfinite RNE for numbers, but a
                     // NaN passes its normal-number path, and the GPU's NaN bits 0x7FFFFFFF come out as 0x4
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
  // How engines' code computes the rule (docs/recipes.md "Engine arithmetic"); named recipes set them
  // where the code that defines the recipe does.
  Division division = Division::ieee;
  ElementCast element_cast = ElementCast::satfinite;
  TensorParam tensor_param = TensorParam::decode;
  ScaleForm scale_form = ScaleForm::ratio_then_tensor;
  float clamp_min = 0x1p-6f;  // the lower bound of clamp_block_scale (torchao 2^-6, ModelOpt 2^-9)
  // A zero block scale replaced by this (0: none), before the E4M3 cast (ModelOpt: s == 0 -> 1.0)
  // or after it (compressed-tensors: sf == 0 -> 0.125, the E4M3 epsilon).
  float zero_scale = 0.0f;
  bool zero_scale_after_cast = false;
  // Power-of-two exponents: from floor/ceil of log2 computed in FP32 and rounded to scale_dtype (the
  // ratio and its floor rounded to scale_dtype too: eager PyTorch on a BF16/FP16 tensor), instead of
  // the exact exponent of the ratio's bits.
  bool exponent_by_log2 = false;
  FormatId scale_dtype = FormatId::fp32;
  bool ratio_floor_on_bmax = false;      // ceil_ratio, rceil: max(bmax, floor) / m instead of max(bmax / m, floor)
  float tensor_scale_min = 0.0f;         // per-tensor recipes: g = max(g, this) (vLLM's per-token-head 1e-6)
  bool pow2_min_normal_divisor = false;  // elements divided by max(2^e, 2^-126) (torchao MX)
  bool pow2_zero_byte_unscaled = false;  // scale byte 0: elements times 1, not 2^127 (torchao's RCEIL)
  // Power-of-two rules computed in floats as Triton code does (vLLM's MODEL1 and MXFP8 MLA writers):
  // tl.max ignores a NaN element (the block keeps its finite scale), and an infinite block max gives
  // the exponent ceil(log2(inf)) = inf: the stored byte min(inf + 127, 255) = 0xFF and every element
  // times 2^-inf (finite ones +-0, infinities NaN). Otherwise (OCP MX) a NaN or inf block stores
  // 0xFF and NaN codes.
  bool float_exponent = false;
  // The dequantized value of a zero is +0 whatever the code's sign (SGLang's torch.compile'd
  // block-FP4 dequantize writes +0 for E2M1 0x8; its eager body writes -0).
  bool dequantize_unsigned_zero = false;

  friend constexpr bool operator==(const Recipe&, const Recipe&) = default;  // every field
};

// r with the port and engine variant fields at their defaults: what the kernels' fixed
// reference configurations compute for quantize (kernels/quantize_kernel.cuh: an is_engine_variant
// recipe's quantize goes to a variant_recipe or variant_quantize configuration, or the generic
// kernel).
// Applied there as constants, it lets the compiler drop every variant branch from those kernels.
KVQ_HD constexpr Recipe with_reference_arithmetic(Recipe r) {
  const Recipe reference{};
  r.e8m0_bias = reference.e8m0_bias;
  r.element_input_bf16 = reference.element_input_bf16;
  r.division = reference.division;
  r.element_cast = reference.element_cast;
  r.tensor_param = reference.tensor_param;
  r.scale_form = reference.scale_form;
  r.clamp_min = reference.clamp_min;
  r.zero_scale = reference.zero_scale;
  r.zero_scale_after_cast = reference.zero_scale_after_cast;
  r.exponent_by_log2 = reference.exponent_by_log2;
  r.scale_dtype = reference.scale_dtype;
  r.ratio_floor_on_bmax = reference.ratio_floor_on_bmax;
  r.pow2_min_normal_divisor = reference.pow2_min_normal_divisor;
  r.pow2_zero_byte_unscaled = reference.pow2_zero_byte_unscaled;
  r.tensor_scale_min = reference.tensor_scale_min;
  r.float_exponent = reference.float_exponent;
  r.dequantize_unsigned_zero = reference.dequantize_unsigned_zero;
  return r;
}

// Whether the rule's tensor parameter is amax itself (the four-over-six package's recipes), not
// the decode scale g = amax / tensor_divisor.
KVQ_HD constexpr bool tensor_param_is_amax(const Recipe& r) {
  return r.scale == BlockScale::e4m3_two_level &&
         (r.tensor_param == TensorParam::amax || r.two_level == TwoLevel::amax_encode ||
          r.two_level == TwoLevel::four_over_six_amax);  // the package's styles take amax whatever the field says
}

// The tensor parameter that dequantize_scaled_element reads: decode for every scale kind but
// two-level, whose value is (v * sf) * g, (v * sf) / e or ((v * sf) * amax) / D.
KVQ_HD constexpr TensorParam dequantize_tensor_param(const Recipe& r) {
  if (r.scale != BlockScale::e4m3_two_level) return TensorParam::decode;
  return tensor_param_is_amax(r) ? TensorParam::amax : r.tensor_param;
}

// Whether a recipe departs from the arithmetic the kernels' reference configurations and fast forms
// specialise (the port and engine variant fields): such recipes quantize through quantize_block,
// but where a fast form computes the variant's own arithmetic (formats/packed_quantize.hpp
// has_packed_variant_form; the per-tensor spans) in a kernel of their own, of their shape, or the
// generic one (kernels/quantize_kernel.cuh), and on the CPU; their dequantize and workspace take the
// fixed kernels of their decode arithmetic.
KVQ_HD constexpr bool is_engine_variant(const Recipe& r) {
  return r.element_input_bf16 || r.e8m0_bias != 127 || r.division != Division::ieee ||
         r.element_cast != ElementCast::satfinite || r.tensor_param != TensorParam::decode ||
         r.scale_form != ScaleForm::ratio_then_tensor || r.clamp_min != 0x1p-6f || r.zero_scale != 0.0f ||
         r.exponent_by_log2 || r.scale_dtype != FormatId::fp32 || r.ratio_floor_on_bmax || r.pow2_min_normal_divisor ||
         r.pow2_zero_byte_unscaled ||
         r.tensor_scale_min != 0.0f || r.float_exponent || r.dequantize_unsigned_zero ||
         r.two_level == TwoLevel::amax_encode || r.two_level == TwoLevel::four_over_six_amax;
}

inline constexpr int kMaxRecipeBlock = 128;  // the largest block a recipe may use (MLA tiles)

// Largest finite element value and its binade exponent (E2M1: 6 and 2; E4M3: 448 and 8).
KVQ_HD constexpr float element_max(const Recipe& r) { return static_cast<float>(max_finite(format_of(r.element))); }
KVQ_HD constexpr int element_emax(const Recipe& r) {
  const Format f = format_of(r.element);
  return static_cast<int>(f.max_finite_code() >> f.mantissa_bits) - f.bias;
}

// Elements convert like CUDA's satfinite intrinsics (NaN -> 0x7F for E4M3, +6 for E2M1; elements
// that kvq has no CUDA convention for, INT and FP6, the same way as E2M1: saturate, NaN -> +max),
// with the recipe's rounding (nearest_away = SGLang's ">= threshold" rule).
KVQ_HD constexpr Conversion element_conversion(const Recipe& r) {
  const bool borrowed = !convention_has(ConventionId::cuda_satfinite, r.element);
  const ConventionId convention =
      r.element_cast == ElementCast::nonsaturating ? ConventionId::torch : ConventionId::cuda_satfinite;
  Conversion c = convention_rule(convention, borrowed ? FormatId::e2m1 : r.element).conversion;
  c.rounding = r.element_rounding;
  return c;
}
KVQ_HD constexpr Conversion scale_conversion() {  // E4M3 block scales: cvt.rn.satfinite
  return convention_rule(ConventionId::cuda_satfinite, FormatId::e4m3fn).conversion;
}

// The four-over-six package's E2M1 rounding (ElementCast::e2m1_by_rounding): the value f it keeps.
// A NaN stays NaN, canonical (GPU arithmetic writes 0x7FFFFFFF, whose BF16 bits give code 0x3).
// An infinite v is NaN too: the package multiplies each rounding by a 0/1 mask (inf * 0).
KVQ_HD inline float e2m1_by_rounding_value(float v) {
  if (v != v || v - v != 0.0f) return canonical_nan();
  const float a = float_from_bits(bits_of(v) & 0x7fffffffu);
  float m = 0.0f;
  if (a < 2.0f) {
    m = rintf(2.0f * a) / 2.0f;  // rintf: half to even, as torch.round
  } else if (a < 4.0f) {
    m = rintf(a);
  } else {
    m = 2.0f * rintf(a / 2.0f);
  }
  const float sign = v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f);  // torch.sign: 0 for +-0
  return sign * m;
}
// Its code: s.ee.m read from f's BF16 bits (exponent - 126, the first mantissa bit; 0.5 is 0x1),
// the exponent or-ed over the sign bit where f >= 8 (8 and 10 give 0x8). f < 128 here (|v| <= 9).
KVQ_HD inline std::uint8_t e2m1_code_of_rounded(float f) {
  const std::uint32_t b = bits_of(f);
  const std::uint32_t sign = b >> 31, field = (b >> 23) & 0xFFu;
  if ((b & 0x7fffffffu) == 0) return static_cast<std::uint8_t>(sign << 3);
  const std::uint32_t e = field - 126, m = field == 126 ? 1u : (b >> 22) & 1u;
  return static_cast<std::uint8_t>(((sign << 3) | (e << 1) | m) & 0xFu);
}

// The satfinite cast of one element (ElementCast::satfinite and the casts built on it): the codec's
// conversion (element_conversion), through a fast path where one is proven equal to it
// (formats/fast_paths.hpp).
KVQ_HD inline std::uint8_t encode_element_satfinite(const Recipe& r, float v) {
  const bool nearest = r.element_rounding == Rounding::nearest_even || r.element_rounding == Rounding::nearest_away;
  if (r.element == FormatId::e2m1 && nearest) return e2m1_satfinite_fast(v, r.element_rounding == Rounding::nearest_away);
  if (r.element == FormatId::e4m3fn && r.element_rounding == Rounding::nearest_even) return e4m3_satfinite_fast(v);
  if (r.element == FormatId::int4 && r.element_rounding == Rounding::nearest_even) return int_satfinite_fast(v, 2, 7);
  if (r.element == FormatId::int8 && r.element_rounding == Rounding::nearest_even) return int_satfinite_fast(v, 6, 127);
  return static_cast<std::uint8_t>(encode_float(format_of(r.element), element_conversion(r), v));
}

// The fields of a recipe an element cast reads: three bytes, so that the out-of-line cast below
// takes them in one register (the whole recipe by value was copied at every element's call).
struct ElementRule {
  FormatId element;
  ElementCast cast;
  Rounding rounding;
};
KVQ_HD constexpr ElementRule element_rule(const Recipe& r) { return {r.element, r.element_cast, r.element_rounding}; }

// The element casts other than satfinite (Recipe::element_cast), out of line on the device, and
// calling nothing that calls them back (a recursive device call graph leaves the kernel's stack
// size to a 1 KB default, which the generic kernels overflow). The rule by value
// (KVQ_VARIANT_NOINLINE says why).
KVQ_HD KVQ_VARIANT_NOINLINE inline std::uint8_t encode_element_variant(ElementRule e, float v) {
  Recipe r;  // the fields the casts read
  r.element = e.element;
  r.element_cast = e.cast;
  r.element_rounding = e.rounding;
  switch (r.element_cast) {
    case ElementCast::e2m1_by_rounding: return e2m1_code_of_rounded(e2m1_by_rounding_value(v));
    case ElementCast::nonsaturating:  // a NaN quotient is the GPU's canonical +NaN (0x7F)
      return static_cast<std::uint8_t>(
          encode_float(format_of(r.element), element_conversion(r), v != v ? canonical_nan() : v));
    case ElementCast::satfinite_unsigned_zero: return encode_element_satfinite(r, v == 0.0f ? 0.0f : v);
    case ElementCast::bounds_count: return encode_element_satfinite(r, v == 0.0f || v != v ? 0.0f : v);
    case ElementCast::satfinite_negative_zero: return encode_element_satfinite(r, v == 0.0f ? -0.0f : v);
    case ElementCast::torchao_e2m1:  // ((0x7FFFFFFF - (126 << 23) + 0x1FFFFF + 1) >> 22) & 0xFF = 0x4
      return v != v ? std::uint8_t{0x4} : encode_element_satfinite(r, v);
    case ElementCast::triton_clamp:  // applied in line by encode_element
    case ElementCast::satfinite: break;
  }
  return encode_element_satfinite(r, v);
}

// One element: the recipe's cast of v (BF16 first where element_input_bf16). tl.clamp's NaN -> +max
// is a select in line before the one satfinite cast, for the kernels that apply it (the MLA MODEL1
// writer, the Triton FP8 recipes: docs/performance.md), and PyTorch's E4M3 cast two selects around
// it; the other casts go out of line.
KVQ_HD inline std::uint8_t encode_element(const Recipe& r, float v) {
  if (r.element_input_bf16) v = float_from_bits(static_cast<std::uint32_t>(bf16_rne_fast(v)) << 16);
  if (r.element_cast == ElementCast::triton_clamp) {
    v = v != v ? element_max(r) : v;
  } else if (r.element_cast == ElementCast::nonsaturating && r.element == FormatId::e4m3fn &&
             r.element_rounding == Rounding::nearest_even) {
    return e4m3_nonsaturating_fast(v);
  } else if (r.element_cast != ElementCast::satfinite) {
    return encode_element_variant(element_rule(r), v);
  }
  return encode_element_satfinite(r, v);
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
// a / b as the recipe's code divides (Recipe::division).
KVQ_HD inline float divide(const Recipe& r, float a, float b) {
  return r.division == Division::full_approx ? div_full(a, b) : a / b;
}
// a / c for a constant c of the rule (bmax / m, amax / D): PyTorch multiplies by RN(1/c).
KVQ_HD inline float divide_by_constant(const Recipe& r, float a, float c) {
  return r.division == Division::constant_reciprocal ? a * (1.0f / c) : divide(r, a, c);
}
// x rounded (RNE) to a 16-bit float type (out of line on the device).
KVQ_HD KVQ_VARIANT_NOINLINE inline float round_to_dtype(FormatId dtype, float x) {
  const Format f = format_of(dtype);
  return decode_float(f, encode_float(f, convention_rule(ConventionId::ieee, dtype).conversion, x));
}
// x rounded (RNE) to the type the rule's power-of-two ratio is computed in (Recipe::scale_dtype).
KVQ_HD inline float in_scale_dtype(const Recipe& r, float x) {
  return r.scale_dtype == FormatId::fp32 ? x : round_to_dtype(r.scale_dtype, x);
}
// log2(x) for x > 0 in FP32 (out of line on the device): CUDA log2f, correctly rounded where it
// matters (experiments/probes/log2_ceil.py).
KVQ_HD KVQ_VARIANT_NOINLINE inline float log2_fp32(float x) { return static_cast<float>(log2(static_cast<double>(x))); }
// log2(x) rounded to the scale dtype: eager PyTorch's log2 of an FP32, BF16 or FP16 tensor.
KVQ_HD inline float log2_in_scale_dtype(const Recipe& r, float x) { return in_scale_dtype(r, log2_fp32(x)); }
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
// A block exponent clamped to what an E8M0 byte stores (2^-127 .. 2^127; 0xFF is NaN).
KVQ_HD constexpr int e8m0_exponent_clamp(int e) { return e < -127 ? -127 : (e > 127 ? 127 : e); }
// The value of an E8M0 scale byte: 2^(code - 127), and NaN for 0xFF (the format's only NaN).
KVQ_HD inline float e8m0_value(std::uint8_t code) {
  return code == 0xFF ? canonical_nan() : pow2_float(static_cast<int>(code) - 127);
}

// The tensor decode scale of a two-level or tensor-only recipe.
// (The four-over-six package's recipes take amax itself: tensor_param_is_amax.)
KVQ_HD inline float tensor_scale(const Recipe& r, float amax) {
  if (tensor_param_is_amax(r)) return amax;
  if (r.tensor_param == TensorParam::encode) {  // compressed-tensors: a non-finite D / amax becomes 1
    // PyTorch's `D / tensor` is tensor.reciprocal() * D: RN(RN(1 / amax) * D) (Division::number_over_tensor,
    // constant_reciprocal); each step rounded to the scale dtype where the statistics are 16-bit, amax
    // first clamped to its smallest normal (generate_gparam's clamp to finfo.tiny).
    using recipe_detail::in_scale_dtype;
    const float tiny = r.scale_dtype == FormatId::fp32 ? 0.0f : static_cast<float>(min_normal(format_of(r.scale_dtype)));
    const float a = amax < tiny ? tiny : amax;
    const float e = r.division == Division::constant_reciprocal || r.division == Division::number_over_tensor
                        ? in_scale_dtype(r, in_scale_dtype(r, 1.0f / a) * r.tensor_divisor)
                        : in_scale_dtype(r, r.tensor_divisor / a);
    return e - e == 0.0f ? e : 1.0f;
  }
  const float g = recipe_detail::divide_by_constant(r, amax, r.tensor_divisor);
  if (r.tensor_scale_min > 0.0f) return g > r.tensor_scale_min ? g : r.tensor_scale_min;  // fmaxf
  return g;
}

// floor or ceil of log2(x), x >= 0: exact from the bits, or (Recipe::exponent_by_log2) of the
// engine's rounded log2; x = 0 gives -127 (log2 0 = -inf, clamped). The rounded FP32 log2 of a normal
// x = 2^E m whose significand m lies at least 2^-10 from 1 and from 2 has floor E and ceil E + 1, read
// from the bits without the log2 (an FP64 call on the device; docs/recipes.md "Power-of-two exponents").
KVQ_HD inline int log2_exponent(const Recipe& r, float x, bool ceil) {
  using namespace recipe_detail;
  if (x == 0.0f) return -127;
  if (!r.exponent_by_log2) return ceil ? ceil_log2(x) : floor_log2(x);
  const std::uint32_t biased = bits_of(x) >> 23, top = (bits_of(x) >> 13) & 0x3FFu;  // x > 0
  if (r.scale_dtype == FormatId::fp32 && biased >= 1 && biased <= 254 && top != 0 && top != 0x3FFu)
    return static_cast<int>(biased) - 127 + (ceil ? 1 : 0);
  const float l = log2_in_scale_dtype(r, x);
  const float e = ceil ? ceilf(l) : floorf(l);
  return e < -127.0f ? -127 : (e > 128.0f ? 128 : static_cast<int>(e));
}

// Block exponent e of a power-of-two rule (scale 2^e); bmax finite and >= 0.
KVQ_HD inline int pow2_exponent(const Recipe& r, float bmax) {
  using namespace recipe_detail;
  const int emax = element_emax(r);
  switch (r.pow2) {
    case Pow2Rule::floor: return log2_exponent(r, bmax, false) - emax;
    case Pow2Rule::ceil: return log2_exponent(r, bmax, true) - emax;
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
      const float b = r.ratio_floor_on_bmax && !(bmax > r.ratio_floor) ? r.ratio_floor : bmax;
      const float ratio = b * divide(r, 1.0f, element_max(r));
      return log2_exponent(r, ratio, true);
    }
    case Pow2Rule::ceil_ratio: {  // the floor on the ratio, or on bmax (vLLM's MODEL1 writer)
      const float floor = in_scale_dtype(r, r.ratio_floor);
      const float b = r.ratio_floor_on_bmax && !(bmax > floor) ? floor : bmax;
      float ratio = in_scale_dtype(r, divide_by_constant(r, b, element_max(r)));
      if (!r.ratio_floor_on_bmax && !(ratio > floor)) ratio = floor;
      return log2_exponent(r, ratio, true);
    }
  }
  return 0;
}

// The E8M0 rules of a block with max |x| = bmax (NaN ignored), any_nan = some element is NaN, in
// one place for quantize_block, plan_block and the MLA tile writers:
// - a NaN or inf block stores the NaN scale 0xFF: any NaN element under an OCP MX rule, or an
//   infinite max (the ratio rules and Triton's float exponents ignore a NaN element, as tl.max does);
// - a zero block gets 2^-127, except under a ratio floor, which defines it (FlashMLA: 2^-13,
//   SGLang: 2^-33; vLLM's MODEL1 writer floors bmax);
// - the exponent is clamped to what the byte stores, which is e + e8m0_bias (127; a port's off-by-n).
KVQ_HD inline bool e8m0_nan_block(const Recipe& r, float bmax, bool any_nan) {
  const bool mx = r.pow2 != Pow2Rule::ceil_ratio && !r.float_exponent;
  return (mx && any_nan) || bmax > kFp32Max;
}
KVQ_HD inline int e8m0_block_exponent(const Recipe& r, float bmax) {
  const bool floored = r.pow2 == Pow2Rule::ceil_ratio || r.ratio_floor_on_bmax;
  return e8m0_exponent_clamp(bmax == 0.0f && !floored ? -127 : pow2_exponent(r, bmax));
}
KVQ_HD inline std::uint8_t e8m0_code(const Recipe& r, int e) { return static_cast<std::uint8_t>(e + r.e8m0_bias); }

// What a block's elements become before their conversion, decided by the scale rule alone:
// q = x / by, q = x * by (by = 0 zeroes a block: x * 0 keeps the sign), or NaN (a NaN scale).
enum class ElementOp : std::uint8_t { divide, multiply, nan };
struct BlockPlan {
  std::uint8_t scale_code = 0;  // E4M3 or E8M0 code; 0 for tensor_only
  ElementOp op = ElementOp::multiply;
  float by = 0.0f;
  float reciprocal = 0.0f;  // tensor_only plans that divide: RN(1 / by), for divide_for_e4m3_code; else 0
};

namespace recipe_detail {

// torchao's clamp of the block decode scale to [2^-6, 448] before its cast, where the recipe has it.
KVQ_HD inline float clamped_scale(const Recipe& r, float s) {
  return r.clamp_block_scale ? (s < r.clamp_min ? r.clamp_min : (s > 448.0f ? 448.0f : s)) : s;
}

// Elements of a two-level block: q = cvt(x / denominator) or cvt(x * factor); zero: cvt(x * 0).
KVQ_HD inline void encode_two_level(const Recipe& r, const float* x, int n, bool zero, bool divide, float by,
                                    std::uint8_t* codes) {
  KVQ_UNROLL
  for (int i = 0; i < n; ++i)
    codes[i] = encode_element(r, zero ? x[i] * 0.0f : (divide ? recipe_detail::divide(r, x[i], by) : x[i] * by));
}

// The reference rule's block scale from its decode scale s, however s was computed (IEEE division
// in two_level_reference and two_level_plan; reciprocals in formats/packed_quantize.hpp's lean
// plan): the zero-scale substitutes, the clamp, the guards and the E4M3 scale code. One rule for
// quantize_block and every plan built on it.
struct TwoLevelScale {
  std::uint8_t sf8 = 0;      // the stored E4M3 scale code
  float sf = 0.0f;           // its value
  float denominator = 0.0f;  // sf * g (a decode parameter g) or sf / g (an encode parameter)
  bool zero = false;         // the elements are x * 0 (a guarded block)
};
KVQ_HD inline TwoLevelScale two_level_scale(const Recipe& r, float g, float bmax, float s) {
  if (r.zero_scale != 0.0f && !r.zero_scale_after_cast && s == 0.0f) s = r.zero_scale;  // ModelOpt: 1.0
  s = clamped_scale(r, s);
  // The block-max guard also stores scale 0: an all-zero tensor (g = 0) would compute 0/0 and
  // store the NaN scale 0x7F, a bug seen in a shipped checkpoint.
  const bool zero_block =
      r.zero_guard != ZeroGuard::rounded_scale && r.zero_guard != ZeroGuard::none && bmax == 0.0f;
  std::uint8_t sf8 = zero_block ? std::uint8_t{0} : e4m3_satfinite_fast(s);  // scale_conversion()
  if (r.zero_scale != 0.0f && r.zero_scale_after_cast && (sf8 & 0x7Fu) == 0)
    sf8 = e4m3_satfinite_fast(r.zero_scale);  // compressed-tensors: 0.125
  const float sf = e4m3_value_fast(sf8);
  const float denominator = r.tensor_param == TensorParam::encode ? divide(r, sf, g) : sf * g;
  const bool zero = zero_block || (r.zero_guard == ZeroGuard::rounded_scale && sf == 0.0f) ||
                    (r.zero_guard == ZeroGuard::block_and_scale && denominator == 0.0f);
  return {sf8, sf, denominator, zero};
}
// The reference rule's element multiplier (Apply::multiply) from the scale's value: (1/g)/sf
// (torchao), or g/sf for an encode parameter.
KVQ_HD inline float two_level_multiplier(const Recipe& r, float g, float sf) {
  return r.tensor_param == TensorParam::encode ? divide(r, g, sf) : divide(r, divide(r, 1.0f, g), sf);
}

// The reference rule's block decode scale s of a block with max |x| = bmax, as the recipe's code
// computes it: (bmax / m) / g, bmax / (m * g), or (bmax / m) * e for an encode parameter
// (Recipe::scale_form, Recipe::division; 16-bit statistics rounded to their dtype).
KVQ_HD inline float two_level_decode_scale(const Recipe& r, float g, float bmax, float divisor) {
  const bool encode = r.tensor_param == TensorParam::encode;
  const float ratio = in_scale_dtype(r, divide_by_constant(r, bmax, divisor));
  return r.scale_form == ScaleForm::over_product ? divide(r, bmax, divisor * g) : (encode ? ratio * g : divide(r, ratio, g));
}

// The reference scale rule for the block decode scale (bmax/divisor)/g; codes filled, sf8 returned.
KVQ_HD inline std::uint8_t two_level_reference(const Recipe& r, float g, const float* x, int n, float bmax,
                                               float divisor, std::uint8_t* codes) {
  const TwoLevelScale k = two_level_scale(r, g, bmax, two_level_decode_scale(r, g, bmax, divisor));
  const bool divides = r.apply == Apply::divide;
  encode_two_level(r, x, n, k.zero, divides, divides ? k.denominator : two_level_multiplier(r, g, k.sf), codes);
  return k.sf8;
}

// The reference rule as a plan, from its block decode scale s = (bmax/divisor)/g however computed
// (two_level_decode_scale here; formats/packed_quantize.hpp: two_level_plan_lean): two_level_scale,
// and what the elements become: two_level_reference's elements, x / denominator (an IEEE division
// unless Division::full_approx, which no packed route takes), x * multiplier(sf8, sf) or x * 0. multiplier gives (1/g)/sf (g/sf for an
// encode parameter).
template <typename Multiplier>
KVQ_HD inline BlockPlan two_level_plan_from(const Recipe& r, float g, float bmax, float s, const Multiplier& multiplier) {
  const TwoLevelScale k = two_level_scale(r, g, bmax, s);
  if (k.zero) return {k.sf8, ElementOp::multiply, 0.0f};
  if (r.apply == Apply::divide) return {k.sf8, ElementOp::divide, k.denominator};
  return {k.sf8, ElementOp::multiply, multiplier(k.sf8, k.sf)};  // torchao: x * ((1/g)/sf)
}
struct RuleMultiplier {
  const Recipe& r;
  float g;
  KVQ_HD float operator()(std::uint8_t, float sf) const { return two_level_multiplier(r, g, sf); }
};
// The rule's plan as the recipe's code computes it (engine variants of the reference rule too:
// formats/packed_quantize.hpp has_packed_variant_form).
KVQ_HD inline BlockPlan two_level_plan(const Recipe& r, float g, float bmax, float divisor) {
  return two_level_plan_from(r, g, bmax, two_level_decode_scale(r, g, bmax, divisor), RuleMultiplier{r, g});
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

// One candidate's plan under the four-over-six package's arithmetic (TwoLevel::amax_encode): its
// scale code and the elements' multiplier 1 / ((1 / enc) * sf), 0 for a zero scale (whose elements
// are +0). expand: the /4 candidate, s * 1.5.
KVQ_HD inline BlockPlan amax_encode_plan(const Recipe& r, float amax, float bmax, bool expand) {
  std::uint8_t sf8 = 0;
  if (amax != 0.0f) {  // amax == 0: every scale 0 (no 0/0)
    const float enc = r.tensor_divisor / amax;
    float s = (bmax / element_max(r)) * enc;
    if (expand) s = s * 1.5f;
    // The package's .to(float8_e4m3fn), which does not saturate: s <= 384 for finite enc, but a tiny
    // amax overflows enc to inf, s to inf, and the scale to NaN (0x7F), as the package stores it.
    if (s != s) s = canonical_nan();  // the GPU's NaN (inf * 0) is +NaN: 0x7F
    sf8 = static_cast<std::uint8_t>(encode_float(kE4M3FN, convention_rule(ConventionId::torch, FormatId::e4m3fn).conversion, s));
  }
  const float sf = e4m3_value_fast(sf8);
  return {sf8, ElementOp::multiply, sf != 0.0f ? 1.0f / ((1.0f / (r.tensor_divisor / amax)) * sf) : 0.0f};
}
// One candidate of the four-over-six package's rules: its scale code (amax_encode_plan), each
// element's rounded value f (values) and code.
KVQ_HD inline std::uint8_t amax_encode_candidate(const Recipe& r, float amax, const float* x, int n, float bmax,
                                                 bool expand, float* values, std::uint8_t* codes) {
  const BlockPlan p = amax_encode_plan(r, amax, bmax, expand);
  const std::uint8_t sf8 = p.scale_code;
  const float sf = e4m3_value_fast(sf8), by = p.by;
  for (int i = 0; i < n; ++i) {  // out of line (quantize_two_level_amax): n is not a constant here
    if (r.element_cast == ElementCast::e2m1_by_rounding) {
      values[i] = sf != 0.0f ? e2m1_by_rounding_value(x[i] * by) : 0.0f;  // a zero scale writes +0
      codes[i] = e2m1_code_of_rounded(values[i]);
    } else {  // a cast (a variant): x * 0 keeps the sign
      codes[i] = encode_element(r, x[i] * by);
      values[i] = element_value(r, codes[i]);
    }
  }
  return sf8;
}

// The FP32 sum of n terms in torch's CUDA order for a contiguous row (pairwise by halves: element
// i + element i + n/2, then the halves of those), measured for n = 16 and 32 by
// experiments/probes/torch_sum_order.py (the package's blocks are 16) and assumed for the other
// powers of two; other n in order. Overwrites terms. The halvings are a template (kHalf = n/2),
// so a block of constant size keeps its terms in registers.
template <int kHalf>
KVQ_HD inline float sum_by_halves(float* terms) {
  KVQ_UNROLL
  for (int i = 0; i < kHalf; ++i) terms[i] = terms[i] + terms[i + kHalf];
  if constexpr (kHalf > 1) return sum_by_halves<kHalf / 2>(terms);
  return terms[0];
}
KVQ_HD inline float torch_row_sum(float* terms, int n) {
  static_assert(kMaxRecipeBlock == 128, "the powers of two below");
  switch (n) {
    case 1: return terms[0];
    case 2: return sum_by_halves<1>(terms);
    case 4: return sum_by_halves<2>(terms);
    case 8: return sum_by_halves<4>(terms);
    case 16: return sum_by_halves<8>(terms);
    case 32: return sum_by_halves<16>(terms);
    case 64: return sum_by_halves<32>(terms);
    case 128: return sum_by_halves<64>(terms);
    default: break;
  }
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum = sum + terms[i];
  return sum;
}

// One element's error term (((f * sf) * amax) / D - x)^2 under the four-over-six package's rules.
KVQ_HD inline float amax_error_term(const Recipe& r, float amax, float x, float sf, float f) {
  const float d = ((f * sf) * amax) / r.tensor_divisor - x;
  return d * d;
}

// sum((((f * sf) * amax) / D - x)^2) over a block, summed as torch sums a row (torch_row_sum).
KVQ_HD inline float amax_squared_error(const Recipe& r, float amax, const float* x, int n, std::uint8_t sf8,
                                       const float* values) {
  const float sf = e4m3_value_fast(sf8);
  float terms[kMaxRecipeBlock] = {};
  for (int i = 0; i < n; ++i) terms[i] = amax_error_term(r, amax, x[i], sf, values[i]);
  return torch_row_sum(terms, n);
}

// The four-over-six package's rules (TwoLevel::amax_encode, four_over_six_amax); g is amax. The
// recipe by value (KVQ_VARIANT_NOINLINE says why).
KVQ_HD KVQ_VARIANT_NOINLINE inline std::uint8_t quantize_two_level_amax(Recipe r, float g, const float* x, int n,
                                                                      float bmax, std::uint8_t* codes) {
  float six[kMaxRecipeBlock];
  const std::uint8_t sf6 = amax_encode_candidate(r, g, x, n, bmax, false, six, codes);
  if (r.two_level == TwoLevel::amax_encode) return sf6;
  float four[kMaxRecipeBlock];
  std::uint8_t four_codes[kMaxRecipeBlock];
  const std::uint8_t sf4 = amax_encode_candidate(r, g, x, n, bmax, true, four, four_codes);
  if (!(amax_squared_error(r, g, x, n, sf4, four) < amax_squared_error(r, g, x, n, sf6, six))) return sf6;
  for (int i = 0; i < n; ++i) codes[i] = four_codes[i];
  return sf4;
}

KVQ_HD inline std::uint8_t quantize_two_level(const Recipe& r, float g, const float* x, int n, float bmax,
                                              std::uint8_t* codes) {
  const float emax = element_max(r);
  switch (r.two_level) {
    case TwoLevel::amax_encode:
    case TwoLevel::four_over_six_amax: return quantize_two_level_amax(r, g, x, n, bmax, codes);
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
      const BlockPlan p = two_level_rcp_plan(r, g, bmax);
      encode_two_level(r, x, n, false, false, p.by, codes);
      return p.scale_code;
    }
  }
  return 0;
}

}  // namespace recipe_detail

namespace recipe_detail {
// A power-of-two block's element multiplier for its exponent e: 2^-e (torchao divides by
// max(2^e, 2^-126): Recipe::pow2_min_normal_divisor; its RCEIL multiplies by 1 at byte 0:
// Recipe::pow2_zero_byte_unscaled). Elements in FP32 (scale_dtype FP32).
KVQ_HD inline float pow2_element_multiplier(const Recipe& r, int e) {
  return r.pow2_zero_byte_unscaled && e == -127 ? 1.0f : pow2_float(-(r.pow2_min_normal_divisor && e < -126 ? -126 : e));
}
// The plan of a power-of-two block with max |x| = bmax, finite, no element NaN, elements in FP32:
// quantize_block's scale code and multiplier, engine variants' rules included.
KVQ_HD inline BlockPlan pow2_plan(const Recipe& r, float bmax) {
  const int e = e8m0_block_exponent(r, bmax);
  return {e8m0_code(r, e), ElementOp::multiply, pow2_element_multiplier(r, e)};
}
// A power-of-two block's elements as eager PyTorch computes them on a 16-bit tensor (Recipe::
// scale_dtype): x / exp2(e), both rounded to that dtype (FP16: 2^e below 2^-24 is 0, so x / 0).
// Out of line on the device, the recipe by value (KVQ_VARIANT_NOINLINE says why), so that
// quantize_block stays small enough to inline and fold in the fixed kernels.
KVQ_HD KVQ_VARIANT_NOINLINE inline void pow2_elements_in_scale_dtype(Recipe r, int e, const float* x, int n,
                                                                     std::uint8_t* codes) {
  const float p = in_scale_dtype(r, pow2_float(e));
  for (int i = 0; i < n; ++i) codes[i] = encode_element(r, in_scale_dtype(r, x[i] / p));
}
}  // namespace recipe_detail

// quantize_block's rule for n <= kMaxRecipeBlock values of a block whose max |x| (NaN ignored) is
// bmax and any_nan = some element of the block is NaN, where x may be a part of the block (the MLA
// writers encode a tile 16 values (the twin) or 8 (the kernel) at a time: kernels/mla_kernels.hpp).
// Every rule but the four-over-six ones, which compare the whole block's errors (x must then be the
// whole block).
KVQ_HD KVQ_KERNEL_INLINE std::uint8_t quantize_block_with_max(const Recipe& r, float g, const float* x, int n, float bmax,
                                                              bool any_nan, std::uint8_t* codes) {
  using namespace recipe_detail;
  switch (r.scale) {
    case BlockScale::e4m3_two_level: return quantize_two_level(r, g, x, n, bmax, codes);
    case BlockScale::e8m0_pow2: {
      if (e8m0_nan_block(r, bmax, any_nan)) {  // scale NaN (0xFF)
        KVQ_UNROLL
        for (int i = 0; i < n; ++i) codes[i] = encode_element(r, r.float_exponent ? x[i] * 0.0f : canonical_nan());
        return 0xFF;
      }
      const int e = e8m0_block_exponent(r, bmax);
      // x * 2^-e is exact in FP32 except for FP32-subnormal products, which every element
      // format rounds to +-0 from the exact value too: the exact scaling, rounded once.
      // (torchao divides by max(2^e, 2^-126): Recipe::pow2_min_normal_divisor.)
      if (r.scale_dtype != FormatId::fp32) {
        pow2_elements_in_scale_dtype(r, e, x, n, codes);
        return e8m0_code(r, e);
      }
      const float down = pow2_element_multiplier(r, e);
      KVQ_UNROLL
      for (int i = 0; i < n; ++i) codes[i] = encode_element(r, x[i] * down);
      return e8m0_code(r, e);
    }
    case BlockScale::tensor_only: {  // g = 0 zeroes the elements, unless unguarded (x * (1/0): 0 * inf = NaN)
      const float reciprocal = divide(r, 1.0f, g);
      const bool zero = g == 0.0f && r.zero_guard != ZeroGuard::none;
      KVQ_UNROLL
      for (int i = 0; i < n; ++i)
        codes[i] = encode_element(r, zero ? x[i] * 0.0f : (r.apply == Apply::divide ? divide(r, x[i], g) : x[i] * reciprocal));
      return 0;
    }
  }
  return 0;
}

// Quantizes one block of n <= kMaxRecipeBlock values: element codes (unpacked, one per byte) and
// the block's scale code (E4M3 or E8M0; 0 for tensor_only). g is tensor_scale(r, amax) where the
// recipe has one.
KVQ_HD KVQ_KERNEL_INLINE std::uint8_t quantize_block(const Recipe& r, float g, const float* x, int n, std::uint8_t* codes) {
  using namespace recipe_detail;
  float bmax = 0.0f;
  bool any_nan = false;
  KVQ_UNROLL
  for (int i = 0; i < n; ++i) {
    const float a = magnitude(x[i]);
    any_nan = any_nan || is_nan(a);
    bmax = a > bmax ? a : bmax;  // fmaxf: NaN never wins
  }
  return quantize_block_with_max(r, g, x, n, bmax, any_nan, codes);
}

// The plan of a block with max |x| = bmax (NaN ignored) and any_nan = some element is NaN, for
// every rule but four_over_six: the scale code quantize_block stores and what it does to the
// elements, for code that encodes elements its own way (formats/packed_quantize.hpp). Its rules
// are quantize_block's, held equal by the kernels' properties (packed/*: block by block against
// quantize_block). The scale rules are shared with quantize_block (two_level_scale,
// two_level_rcp_plan, the e8m0_* rules); quantize_block applies its elements itself rather than
// through a plan: built on plans it put the 8-bit kernels' arrays in local memory and raised the
// nvfp4-4over6 kernel from 72 to 96 registers through its fallback path (docs/performance.md).
// Not for engine variants (is_engine_variant: their fields are quantize_block's alone; every caller
// gates on it), but for per-tensor ones, whose plan is g's rule alone, divided as the recipe
// divides (the kernels' tensor spans: kernels/block_quantize.hpp quantize_tensor_span).
KVQ_HD inline BlockPlan plan_block(const Recipe& r, float g, float bmax, bool any_nan) {
  switch (r.scale) {
    case BlockScale::e4m3_two_level:
      return r.two_level == TwoLevel::reference || r.two_level == TwoLevel::four_over_six
                 ? recipe_detail::two_level_plan(r, g, bmax, element_max(r))
                 : recipe_detail::two_level_rcp_plan(r, g, bmax);
    case BlockScale::e8m0_pow2: {
      if (e8m0_nan_block(r, bmax, any_nan)) return {0xFF, ElementOp::nan, 0.0f};
      const int e = e8m0_block_exponent(r, bmax);
      // x * 2^-e is exact in FP32 except for FP32-subnormal products, which every element
      // format rounds to +-0 from the exact value too: the exact scaling, rounded once.
      return {e8m0_code(r, e), ElementOp::multiply, pow2_float(-e)};
    }
    case BlockScale::tensor_only:  // engine variants too: x / g by the recipe's division, x * (1 / g) by its reciprocal
      if (g == 0.0f && r.zero_guard != ZeroGuard::none) return {0, ElementOp::multiply, 0.0f};
      return r.apply == Apply::divide ? BlockPlan{0, ElementOp::divide, g, 1.0f / g}
                                      : BlockPlan{0, ElementOp::multiply, recipe_detail::divide(r, 1.0f, g)};
  }
  return {};
}

// The FP32 multiplier of a block's scale code: its E4M3 value, the exact 2^e (NaN for 0xFF), or
// 1 (per-tensor recipes have no block scale). A kernel decodes it once per block.
KVQ_HD inline float block_scale_value(const Recipe& r, std::uint8_t scale_code) {
  switch (r.scale) {
    case BlockScale::e4m3_two_level: return e4m3_value_fast(scale_code);
    case BlockScale::e8m0_pow2:
      return e8m0_value(scale_code);
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
    case BlockScale::e4m3_two_level:
      y = tensor_param_is_amax(r)                     ? ((v * scale) * g) / r.tensor_divisor
          : r.tensor_param == TensorParam::encode ? (v * scale) / g
                                                  : (v * scale) * g;
      break;
    case BlockScale::e8m0_pow2: y = v * scale; break;
    case BlockScale::tensor_only: y = v * g; break;
  }
  if (r.dequantize_unsigned_zero && y == 0.0f) return 0.0f;
  return y != y ? canonical_nan() : y;
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
    scale = static_cast<double>(e8m0_value(scale_code));
  const double exact = (static_cast<double>(element_value(r, code)) * scale) * static_cast<double>(factor);
  return e4m3_satfinite_from_double_fast(exact);  // == encode_double(kE4M3FN, scale_conversion(), exact)
}

// How a port rounds its workspace elements, where it departs from requantize_e4m3's single
// rounding (docs/layouts.md "3. NVFP4 paged cache -> E4M3 prefill workspace"): SGLang's
// dequantize_prev_kv computes (element * scale) * factor in FP32, rounds it to BF16 and casts it
// with PyTorch's non-saturating cast (fp32_products, via_bf16, !saturate). Each is a dimension
// `kvq identify` searches (docs/ports.md "Workspaces").
struct WorkspaceRounding {
  bool fp32_products = false;  // (element * scale) * factor, each product rounded to FP32
  bool via_bf16 = false;       // that value rounded to BF16 (RNE) before the cast
  bool saturate = true;        // cvt.rn.satfinite (NaN -> 0x7F); false: past 464 NaN (PyTorch's cast)
  KVQ_HD constexpr bool reference() const { return !fp32_products && !via_bf16 && saturate; }
};

// requantize_e4m3 under a port's rounding (the reference rounding: requantize_e4m3 itself).
KVQ_HD inline std::uint8_t requantize_e4m3_rounded(const Recipe& r, std::uint8_t scale_code, std::uint8_t code,
                                                   float factor, WorkspaceRounding w) {
  if (w.reference()) return requantize_e4m3(r, scale_code, code, factor);
  const float element = element_value(r, code), scale = block_scale_value(r, scale_code);
  double value = w.fp32_products ? static_cast<double>((element * scale) * factor)
                                 : (static_cast<double>(element) * scale) * static_cast<double>(factor);  // exact
  if (w.via_bf16 && value == value) value = float_from_bits(static_cast<std::uint32_t>(bf16_rne_from_double(value)) << 16);
  if (value != value) return 0x7F;  // NaN (a NaN scale, inf * 0): the GPU's canonical +NaN
  if (w.saturate) return e4m3_satfinite_from_double_fast(value);
  return static_cast<std::uint8_t>(encode_double(kE4M3FN, convention_rule(ConventionId::torch, FormatId::e4m3fn).conversion, value));
}

}  // namespace kvq
