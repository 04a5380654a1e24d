#include "oracle/recipes_oracle.hpp"

#include <algorithm>
#include <cmath>

#include "formats/float_bits.hpp"
#include "formats/reciprocal.hpp"

namespace kvq::oracle {

Real finite_real(const Exact& signed_value) {
  Real r;
  r.negative = signed_value < 0;
  r.magnitude = r.negative ? Exact(-signed_value) : signed_value;
  r.kind = signed_value == 0 ? ValueKind::zero : ValueKind::finite;
  return r;
}

namespace {

std::uint32_t recipe_dequantize_raw(const Recipe& r, float g, std::uint8_t scale, std::uint8_t code);

Real nan_real() {
  Real r;
  r.kind = ValueKind::nan;
  return r;
}
Real inf_real(bool negative) {
  Real r;
  r.kind = ValueKind::infinity;
  r.negative = negative;
  return r;
}

constexpr Conversion kFp32Rne{Rounding::nearest_even, Overflow::ieee, NanRule::payload_keep_sign};

Real of(float x) { return real_of_float(x); }

// A real's magnitude as a real (|x|), NaN stays NaN.
Real magnitude(const Real& x) {
  Real r = x;
  r.negative = false;
  return r;
}

bool greater(const Real& a, const Real& b) {  // a > b, both non-negative and not NaN
  if (a.kind == ValueKind::infinity) return b.kind != ValueKind::infinity;
  if (b.kind == ValueKind::infinity) return false;
  return a.magnitude > b.magnitude;
}

int ceil_log2(const Exact& positive) {
  const int e = floor_log2(positive);
  return power_of_two(e) == positive ? e : e + 1;
}

// |x| * 2^shift (exact), converted into f.
std::uint8_t encode_scaled(Format f, const Conversion& c, const Real& x, int shift) {
  Real y = x;
  if (y.kind == ValueKind::finite) y.magnitude *= power_of_two(shift);
  return static_cast<std::uint8_t>(round_to_format(f, c, y));
}

Real recipe_divide(const Recipe& r, const Real& a, const Real& b);
Real recipe_divide_constant(const Recipe& r, const Real& a, const Real& c);

// x rounded to the recipe's scale dtype (RNE; FP32 values stay).
Real in_scale_dtype(const Recipe& r, const Real& x) {
  if (r.scale_dtype == FormatId::fp32) return x;
  const Format f = format_of(r.scale_dtype);
  const Conversion c{Rounding::nearest_even, Overflow::ieee, NanRule::payload_keep_sign};
  return real_of(f, round_to_format(f, c, x));
}

// floor or ceil of log2(x), x >= 0 finite: exact, or (exponent_by_log2) of log2 rounded to FP32 and
// then to the scale dtype. x = 2^k * m with m in [1, 2): log2 x = k + log2(m), where log2(m) (in (0, 1)
// for m > 1, transcendental, so never on a rounding boundary) is taken in FP64 and added exactly.
int log2_exponent_exact(const Recipe& r, const Real& x, bool ceil) {
  if (x.kind == ValueKind::zero) return -127;
  const int k = floor_log2(x.magnitude);
  if (!r.exponent_by_log2) return ceil ? ceil_log2(x.magnitude) : k;
  const Exact m = x.magnitude / power_of_two(k);
  if (m == 1) return k;
  const double t = std::log2(static_cast<double>(m));
  Real l = finite_real(Exact(k) + Exact(t));
  l = in_scale_dtype(r, fp32(l));
  const Exact v = l.negative ? Exact(-l.magnitude) : l.magnitude;
  using boost::multiprecision::numerator;
  using boost::multiprecision::denominator;
  const boost::multiprecision::cpp_int q = numerator(v) / denominator(v);  // toward zero
  const bool whole = Exact(q) == v;
  int e = static_cast<int>(q);
  if (!whole && v > 0 && ceil) e += 1;
  if (!whole && v < 0 && !ceil) e -= 1;
  return std::clamp(e, -127, 128);
}

int pow2_exponent_exact(const Recipe& r, const Real& bmax) {
  const Format ef = format_of(r.element);
  const Exact max = *exact_value(ef, ef.max_finite_code());
  const int emax = floor_log2(max);
  switch (r.pow2) {
    case Pow2Rule::floor: return log2_exponent_exact(r, bmax, false) - emax;
    case Pow2Rule::ceil: return log2_exponent_exact(r, bmax, true) - emax;
    case Pow2Rule::even: {
      // Round to the element's mantissa width in a format with room for any FP32 exponent.
      const Format wide{11, ef.mantissa_bits, 1023, Specials::ieee, true, true};
      const std::uint64_t code = round_to_format(wide, kFp32Rne, bmax);
      return floor_log2(*exact_value(wide, code)) - emax;
    }
    case Pow2Rule::rceil: {
      const Real floor_value = of(r.ratio_floor);
      const Real b = r.ratio_floor_on_bmax && !greater(bmax, floor_value) ? floor_value : bmax;
      const Real reciprocal = recipe_divide(r, of(1.0f), finite_real(max));
      return log2_exponent_exact(r, fp32_multiply(b, reciprocal), true);
    }
    case Pow2Rule::ceil_ratio: {
      const Real floor_value = in_scale_dtype(r, of(r.ratio_floor));
      const Real b = r.ratio_floor_on_bmax && !greater(bmax, floor_value) ? floor_value : bmax;
      Real ratio = in_scale_dtype(r, recipe_divide_constant(r, b, finite_real(max)));
      if (!r.ratio_floor_on_bmax && !greater(ratio, floor_value)) ratio = floor_value;
      return log2_exponent_exact(r, ratio, true);
    }
  }
  return 0;
}

}  // namespace

Real rcp_approx_ftz(const Real& x) {
  if (x.kind == ValueKind::nan) return nan_real();
  Real r;
  r.negative = x.negative;
  if (x.kind == ValueKind::infinity) return r;  // signed zero
  if (x.kind == ValueKind::zero || x.magnitude < power_of_two(-126)) {
    r.kind = ValueKind::infinity;
    return r;
  }
  const Exact exact = 1 / x.magnitude;
  std::uint32_t bits = fp32_bits(finite_real(exact));
  const std::uint32_t mantissa = static_cast<std::uint32_t>(round_to_format(kFP32, kFp32Rne, x)) & 0x7fffffu;
  const std::uint8_t* table = reciprocal_detail::sm90_table();
  if ((table[mantissa / 8] >> (mantissa % 8)) & 1u) bits = *exact_value(kFP32, bits) < exact ? bits + 1 : bits - 1;
  const Exact value = *exact_value(kFP32, bits);
  if (value < power_of_two(-126)) return r;  // flushed
  r = finite_real(value);
  r.negative = x.negative;
  return r;
}

namespace {

Real reciprocal_of(Reciprocal kind, const Real& x) {
  return kind == Reciprocal::approx_ftz ? rcp_approx_ftz(x) : fp32_divide(of(1.0f), x);
}

// a / b as the recipe's code divides: IEEE, or div.full.f32 = a * rcp.approx.ftz(b) rounded once
// (both scaled by 2^-2 first at |b| >= 2^126, by 2^24 where b is subnormal: formats/reciprocal.hpp
// div_full_model).
Real recipe_divide_constant(const Recipe& r, const Real& a, const Real& c) {
  if (r.division == Division::constant_reciprocal) return fp32_multiply(a, fp32_divide(of(1.0f), c));
  return recipe_divide(r, a, c);
}
Real recipe_divide(const Recipe& r, const Real& a, const Real& b) {
  if (r.division != Division::full_approx) return fp32_divide(a, b);
  if (b.kind == ValueKind::finite && !(b.magnitude < power_of_two(126)))
    return fp32_multiply(fp32_multiply(a, of(0.25f)), rcp_approx_ftz(fp32_multiply(b, of(0.25f))));
  if (b.kind == ValueKind::finite && b.magnitude < power_of_two(-126))
    return fp32_multiply(fp32_multiply(a, of(0x1p24f)), rcp_approx_ftz(fp32_multiply(b, of(0x1p24f))));
  return fp32_multiply(a, rcp_approx_ftz(b));
}

// The element code: the recipe's conversion of y, or the four-over-six package's rounding
// (ElementCast::e2m1_by_rounding: fake_value, then the code of its bits).
Real fake_value(const Real& v) {
  if (v.kind == ValueKind::nan || v.kind == ValueKind::infinity) return nan_real();  // inf * a 0 mask
  if (v.kind == ValueKind::zero) return of(0.0f);  // torch.sign(+-0) = 0: +0
  // |v| < 2: nearest multiple of 1/2; < 4: of 1; else of 2; ties to the even multiple.
  const Exact a = v.magnitude;
  const Exact step = a < 2 ? Exact(1, 2) : (a < 4 ? Exact(1) : Exact(2));
  const Exact q = a / step;
  const boost::multiprecision::cpp_int whole = boost::multiprecision::numerator(q) / boost::multiprecision::denominator(q);
  const Exact frac = q - Exact(whole);
  const bool up = frac > Exact(1, 2) || (frac == Exact(1, 2) && (whole % 2) != 0);
  Real f = finite_real(Exact(whole + (up ? 1 : 0)) * step);
  f.negative = v.negative;  // sign(v) * m: a negative v that rounds to 0 gives -0
  return f;
}
std::uint8_t code_of_fake(const Real& f) {
  const unsigned sign = f.negative ? 1u : 0u;
  if (f.kind == ValueKind::nan) return 0x3;  // canonical NaN: exponent field 255 - 126, mantissa bit set
  if (f.kind == ValueKind::infinity) return static_cast<std::uint8_t>((sign << 3) | 0x2);
  if (f.kind == ValueKind::zero) return static_cast<std::uint8_t>(sign << 3);
  const int e = floor_log2(f.magnitude);
  const unsigned field = static_cast<unsigned>(e + 1);  // 0.5 -> 0, 1 -> 1, 8 -> 4
  const unsigned m = e < 0 ? 1u : (f.magnitude / power_of_two(e) >= Exact(3, 2) ? 1u : 0u);
  return static_cast<std::uint8_t>(((sign << 3) | (field << 1) | m) & 0xFu);
}
std::uint8_t element_code(const Recipe& r, const Real& y) {
  if (r.element_cast == ElementCast::e2m1_by_rounding) return code_of_fake(fake_value(y));
  if (r.element_cast == ElementCast::bounds_count && (y.kind == ValueKind::zero || y.kind == ValueKind::nan))
    return static_cast<std::uint8_t>(round_to_format(format_of(r.element), element_conversion(r), of(0.0f)));
  if (r.element_cast == ElementCast::satfinite_unsigned_zero && y.kind == ValueKind::zero)
    return static_cast<std::uint8_t>(round_to_format(format_of(r.element), element_conversion(r), of(0.0f)));
  if (r.element_cast == ElementCast::satfinite_negative_zero && y.kind == ValueKind::zero)
    return static_cast<std::uint8_t>(round_to_format(format_of(r.element), element_conversion(r), of(-0.0f)));
  if (r.element_cast == ElementCast::torchao_e2m1 && y.kind == ValueKind::nan) return 0x4;  // the bits 0x7FFFFFFF
  if (r.element_cast == ElementCast::triton_clamp && y.kind == ValueKind::nan)  // min.xorsign.abs: NaN -> +max
    return static_cast<std::uint8_t>(round_to_format(format_of(r.element), element_conversion(r),
                                                     finite_real(Exact(max_finite(format_of(r.element))))));
  return static_cast<std::uint8_t>(round_to_format(format_of(r.element), element_conversion(r), y));
}

QuantizedBlock two_level_reference(const Recipe& r, const Real& g, const std::vector<Real>& x, const Real& bmax,
                                   const Real& divisor);
QuantizedBlock two_level(const Recipe& r, const Real& g, const std::vector<Real>& x, const Real& bmax);

}  // namespace

Real fp32(const Real& x) { return real_of(kFP32, round_to_format(kFP32, kFp32Rne, x)); }
std::uint32_t fp32_bits(const Real& x) { return static_cast<std::uint32_t>(round_to_format(kFP32, kFp32Rne, x)); }

Real fp32_multiply(const Real& a, const Real& b) {
  const bool negative = a.negative != b.negative;
  if (a.kind == ValueKind::nan || b.kind == ValueKind::nan) return nan_real();
  const bool a_inf = a.kind == ValueKind::infinity, b_inf = b.kind == ValueKind::infinity;
  const bool a_zero = a.kind == ValueKind::zero, b_zero = b.kind == ValueKind::zero;
  if ((a_inf && b_zero) || (b_inf && a_zero)) return nan_real();
  if (a_inf || b_inf) return inf_real(negative);
  Real r = finite_real(a.magnitude * b.magnitude);
  r.negative = negative;
  return fp32(r);
}

Real fp32_divide(const Real& a, const Real& b) {
  const bool negative = a.negative != b.negative;
  if (a.kind == ValueKind::nan || b.kind == ValueKind::nan) return nan_real();
  const bool a_inf = a.kind == ValueKind::infinity, b_inf = b.kind == ValueKind::infinity;
  const bool a_zero = a.kind == ValueKind::zero, b_zero = b.kind == ValueKind::zero;
  if ((a_inf && b_inf) || (a_zero && b_zero)) return nan_real();
  if (a_inf || b_zero) return inf_real(negative);
  Real r;
  if (b_inf || a_zero) {
    r.kind = ValueKind::zero;
  } else {
    r = finite_real(a.magnitude / b.magnitude);
  }
  r.negative = negative;
  return fp32(r);
}

float recipe_tensor_scale(const Recipe& r, float amax) {
  if (tensor_param_is_amax(r)) return amax;
  if (r.tensor_param == TensorParam::encode) {
    // amax clamped to the statistics dtype's smallest normal (FP32: none needed, D / 2^-126 overflows)
    const Real tiny = r.scale_dtype == FormatId::fp32 ? of(0.0f) : finite_real(Exact(min_normal(format_of(r.scale_dtype))));
    const Real a = greater(tiny, of(amax)) ? tiny : of(amax);
    const Real e = r.division == Division::constant_reciprocal || r.division == Division::number_over_tensor
                       ? in_scale_dtype(r, fp32_multiply(in_scale_dtype(r, fp32_divide(of(1.0f), a)), of(r.tensor_divisor)))
                       : in_scale_dtype(r, fp32_divide(of(r.tensor_divisor), a));
    return e.kind == ValueKind::finite || e.kind == ValueKind::zero ? float_from_bits(fp32_bits(e)) : 1.0f;
  }
  const Real g = recipe_divide_constant(r, of(amax), of(r.tensor_divisor));
  if (r.tensor_scale_min > 0.0f && !greater(g, of(r.tensor_scale_min))) return r.tensor_scale_min;
  return float_from_bits(fp32_bits(g));
}

QuantizedBlock recipe_quantize_block(const Recipe& r, float g_value, const std::vector<float>& xs) {
  const Format ef = format_of(r.element);
  const Conversion ec = element_conversion(r);
  QuantizedBlock out;
  out.codes.resize(xs.size());
  std::vector<Real> x;
  for (const float v : xs) x.push_back(of(v));
  Real bmax = of(0.0f);
  bool any_nan = false;
  for (const Real& v : x) {
    if (v.kind == ValueKind::nan) {
      any_nan = true;
      continue;
    }
    if (greater(magnitude(v), bmax)) bmax = magnitude(v);
  }
  const Real g = of(g_value);
  switch (r.scale) {
    case BlockScale::e4m3_two_level: return two_level(r, g, x, bmax);
    case BlockScale::e8m0_pow2: {
      const bool mx = r.pow2 != Pow2Rule::ceil_ratio && !r.float_exponent;
      if ((mx && any_nan) || bmax.kind == ValueKind::infinity) {
        // float_exponent: the exponent +inf, every element times 2^-inf = 0 (0 * inf = NaN)
        for (std::size_t i = 0; i < x.size(); ++i)
          out.codes[i] = r.float_exponent ? element_code(r, fp32_multiply(x[i], of(0.0f)))
                                          : element_code(r, nan_real());
        out.scale = 0xFF;
        return out;
      }
      int e = bmax.kind == ValueKind::zero && r.pow2 != Pow2Rule::ceil_ratio && !r.ratio_floor_on_bmax
                  ? -127
                  : pow2_exponent_exact(r, bmax);
      e = std::clamp(e, -127, 127);
      if (r.scale_dtype != FormatId::fp32) {  // eager 16-bit: x / exp2(e), each rounded to the dtype
        const Real p = in_scale_dtype(r, finite_real(power_of_two(e)));
        for (std::size_t i = 0; i < x.size(); ++i) out.codes[i] = element_code(r, in_scale_dtype(r, fp32_divide(x[i], p)));
        out.scale = static_cast<std::uint8_t>(e + r.e8m0_bias);
        return out;
      }
      int down = r.pow2_min_normal_divisor && e < -126 ? -126 : e;  // torchao: max(2^e, 2^-126)
      if (r.pow2_zero_byte_unscaled && e == -127) down = 0;         // torchao's RCEIL: byte 0 scales by 1
      for (std::size_t i = 0; i < x.size(); ++i)
        out.codes[i] = r.element_cast == ElementCast::satfinite ? encode_scaled(ef, ec, x[i], -down)
                                                                 : element_code(r, fp32_multiply(x[i], finite_real(power_of_two(-down))));
      out.scale = static_cast<std::uint8_t>(e + 127);
      return out;
    }
    case BlockScale::tensor_only: {
      const Real reciprocal = recipe_divide(r, of(1.0f), g);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const Real v = g.kind == ValueKind::zero && r.zero_guard != ZeroGuard::none ? fp32_multiply(x[i], of(0.0f))
                                                 : (r.apply == Apply::divide ? recipe_divide(r, x[i], g)
                                                                             : fp32_multiply(x[i], reciprocal));
        out.codes[i] = element_code(r, v);
      }
      return out;
    }
  }
  return out;
}

std::uint8_t recipe_requantize_e4m3(const Recipe& r, std::uint8_t scale, std::uint8_t code, float factor, WorkspaceRounding w) {
  Real scale_value = of(1.0f);
  if (r.scale == BlockScale::e4m3_two_level) scale_value = real_of(kE4M3FN, scale);
  if (r.scale == BlockScale::e8m0_pow2) scale_value = real_of(kE8M0FNU, scale);
  const Real v = real_of(format_of(r.element), code), f = of(factor);
  Real product;  // exact: no FP32 rounding between the factors (unless the port rounds them)
  if (w.fp32_products) {
    product = fp32_multiply(fp32_multiply(v, scale_value), f);
  } else if (v.kind == ValueKind::nan || scale_value.kind == ValueKind::nan || f.kind == ValueKind::nan) {
    product = nan_real();
  } else if (f.kind == ValueKind::infinity) {
    const bool negative = v.negative != (scale_value.negative != f.negative);
    product = v.kind == ValueKind::zero || scale_value.kind == ValueKind::zero ? nan_real() : inf_real(negative);
  } else {
    product = finite_real(v.magnitude * scale_value.magnitude * f.magnitude);
    product.negative = v.negative != (scale_value.negative != f.negative);
    if (product.magnitude == 0) product.kind = ValueKind::zero;
  }
  if (product.kind == ValueKind::nan) return 0x7F;  // the GPU's canonical +NaN, whatever the cast
  if (w.via_bf16) product = real_of(kBF16, round_to_format(kBF16, convention_rule(ConventionId::ieee, FormatId::bf16).conversion, product));
  const Conversion cast = w.saturate ? scale_conversion() : convention_rule(ConventionId::torch, FormatId::e4m3fn).conversion;
  return static_cast<std::uint8_t>(round_to_format(kE4M3FN, cast, product));
}

std::uint32_t recipe_dequantize_element(const Recipe& r, float g, std::uint8_t scale, std::uint8_t code) {
  const std::uint32_t bits = recipe_dequantize_raw(r, g, scale, code);
  if (r.dequantize_unsigned_zero && (bits & 0x7fffffffu) == 0) return 0;  // -0 written as +0
  return kFP32.is_nan(bits) ? kCanonicalNanBits : bits;  // the contract's canonical NaN
}

namespace {

QuantizedBlock encode_elements(const Recipe& r, const std::vector<Real>& x, bool zero, bool divide, const Real& by) {
  QuantizedBlock out;
  for (const Real& v : x) {
    const Real y = zero ? fp32_multiply(v, of(0.0f)) : (divide ? recipe_divide(r, v, by) : fp32_multiply(v, by));
    out.codes.push_back(element_code(r, y));
  }
  return out;
}

QuantizedBlock two_level_reference(const Recipe& r, const Real& g, const std::vector<Real>& x, const Real& bmax,
                                   const Real& divisor) {
  const bool encode = r.tensor_param == TensorParam::encode;
  const Real ratio = in_scale_dtype(r, recipe_divide_constant(r, bmax, divisor));
  Real s = r.scale_form == ScaleForm::over_product ? recipe_divide(r, bmax, fp32_multiply(divisor, g))
           : encode                                 ? fp32_multiply(ratio, g)
                                                    : recipe_divide(r, ratio, g);
  if (r.zero_scale != 0.0f && !r.zero_scale_after_cast && s.kind == ValueKind::zero) s = of(r.zero_scale);
  if (r.clamp_block_scale && s.kind != ValueKind::nan) {
    if (greater(of(r.clamp_min), s) || s.kind == ValueKind::zero) s = of(r.clamp_min);
    if (greater(s, of(448.0f))) s = of(448.0f);
  }
  const bool zero_block =
      r.zero_guard != ZeroGuard::rounded_scale && r.zero_guard != ZeroGuard::none && bmax.kind == ValueKind::zero;
  std::uint8_t sf8 = zero_block ? 0 : static_cast<std::uint8_t>(round_to_format(kE4M3FN, scale_conversion(), s));
  if (r.zero_scale != 0.0f && r.zero_scale_after_cast && (sf8 & 0x7F) == 0)
    sf8 = static_cast<std::uint8_t>(round_to_format(kE4M3FN, scale_conversion(), of(r.zero_scale)));
  const Real sf = real_of(kE4M3FN, sf8);
  const Real denominator = encode ? recipe_divide(r, sf, g) : fp32_multiply(sf, g);
  const bool zero = zero_block || (r.zero_guard == ZeroGuard::rounded_scale && sf.kind == ValueKind::zero) ||
                    (r.zero_guard == ZeroGuard::block_and_scale && denominator.kind == ValueKind::zero);
  const bool divide = r.apply == Apply::divide;
  QuantizedBlock out =
      encode_elements(r, x, zero, divide,
                      divide ? denominator : (encode ? recipe_divide(r, g, sf) : recipe_divide(r, recipe_divide(r, of(1.0f), g), sf)));
  out.scale = sf8;
  return out;
}

Real fp32_add(const Real& a, const Real& b) {  // finite or inf operands of one sign here (squares)
  if (a.kind == ValueKind::nan || b.kind == ValueKind::nan) return nan_real();
  if (a.kind == ValueKind::infinity || b.kind == ValueKind::infinity) return inf_real(false);
  return fp32(finite_real(a.magnitude + b.magnitude));
}

Real fp32_subtract(const Real& a, const Real& b) {
  if (a.kind == ValueKind::nan || b.kind == ValueKind::nan) return nan_real();
  const bool a_inf = a.kind == ValueKind::infinity, b_inf = b.kind == ValueKind::infinity;
  if (a_inf && b_inf) return a.negative == b.negative ? nan_real() : inf_real(a.negative);
  if (a_inf) return inf_real(a.negative);
  if (b_inf) return inf_real(!b.negative);
  const Exact av = a.negative ? Exact(-a.magnitude) : a.magnitude, bv = b.negative ? Exact(-b.magnitude) : b.magnitude;
  return fp32(finite_real(av - bv));
}

Real squared_error(const Recipe& r, const Real& g, const std::vector<Real>& x, const QuantizedBlock& q) {
  Real sum = of(0.0f);
  const Real sf = real_of(kE4M3FN, q.scale);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Real dq = fp32_multiply(fp32_multiply(real_of(format_of(r.element), q.codes[i]), sf), g);
    const Real d = fp32_subtract(x[i], dq);
    sum = fp32_add(sum, fp32_multiply(d, d));
  }
  return sum;
}

// One candidate of the four-over-six package's rules (formats/recipes.hpp amax_encode_candidate),
// with each element's rounded value f.
struct AmaxCandidate {
  QuantizedBlock block;
  std::vector<Real> values;
};
AmaxCandidate amax_candidate(const Recipe& r, const Real& amax, const std::vector<Real>& x, const Real& bmax,
                             bool expand) {
  AmaxCandidate c;
  const Real divisor = of(r.tensor_divisor);
  std::uint8_t sf8 = 0;
  if (amax.kind != ValueKind::zero) {
    const Real enc = fp32_divide(divisor, amax);
    Real s = fp32_multiply(fp32_divide(bmax, of(element_max(r))), enc);
    if (expand) s = fp32_multiply(s, of(1.5f));
    sf8 = static_cast<std::uint8_t>(round_to_format(kE4M3FN, convention_rule(ConventionId::torch, FormatId::e4m3fn).conversion, s));
  }
  const Real sf = real_of(kE4M3FN, sf8);
  const bool zero = sf.kind == ValueKind::zero;
  const Real by = zero ? of(0.0f) : fp32_divide(of(1.0f), fp32_multiply(fp32_divide(of(1.0f), fp32_divide(divisor, amax)), sf));
  for (const Real& v : x) {
    if (r.element_cast == ElementCast::e2m1_by_rounding) {
      const Real f = zero ? of(0.0f) : fake_value(fp32_multiply(v, by));
      c.values.push_back(f);
      c.block.codes.push_back(code_of_fake(f));
    } else {  // a cast (a variant): x * 0 keeps the sign
      const std::uint8_t code = element_code(r, fp32_multiply(v, by));
      c.values.push_back(real_of(format_of(r.element), code));
      c.block.codes.push_back(code);
    }
  }
  c.block.scale = sf8;
  return c;
}
// sum((((f * sf) * amax) / D - x)^2), summed by halves (torch's CUDA order).
Real amax_error(const Recipe& r, const Real& amax, const std::vector<Real>& x, const AmaxCandidate& c) {
  const Real sf = real_of(kE4M3FN, c.block.scale);
  std::vector<Real> terms;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Real dq = fp32_divide(fp32_multiply(fp32_multiply(c.values[i], sf), amax), of(r.tensor_divisor));
    const Real d = fp32_subtract(dq, x[i]);
    terms.push_back(fp32_multiply(d, d));
  }
  const std::size_t n = terms.size();
  if (n == 0 || (n & (n - 1))) {  // not a power of two: in order
    Real sum = of(0.0f);
    for (const Real& t : terms) sum = fp32_add(sum, t);
    return sum;
  }
  for (std::size_t half = n / 2; half >= 1; half /= 2)
    for (std::size_t i = 0; i < half; ++i) terms[i] = fp32_add(terms[i], terms[i + half]);
  return terms[0];
}

QuantizedBlock two_level(const Recipe& r, const Real& g, const std::vector<Real>& x, const Real& bmax) {
  const Real emax = of(element_max(r));
  switch (r.two_level) {
    case TwoLevel::amax_encode: return amax_candidate(r, g, x, bmax, false).block;
    case TwoLevel::four_over_six_amax: {
      const AmaxCandidate six = amax_candidate(r, g, x, bmax, false), four = amax_candidate(r, g, x, bmax, true);
      const Real e6 = amax_error(r, g, x, six), e4 = amax_error(r, g, x, four);
      const bool nan = e6.kind == ValueKind::nan || e4.kind == ValueKind::nan;
      return !nan && greater(e6, e4) ? four.block : six.block;
    }
    case TwoLevel::reference: return two_level_reference(r, g, x, bmax, emax);
    case TwoLevel::four_over_six: {
      const QuantizedBlock six = two_level_reference(r, g, x, bmax, emax);
      const QuantizedBlock four = two_level_reference(r, g, x, bmax, of(4.0f));
      const Real e6 = squared_error(r, g, x, six), e4 = squared_error(r, g, x, four);
      const bool nan = e6.kind == ValueKind::nan || e4.kind == ValueKind::nan;
      return !nan && greater(e6, e4) ? four : six;
    }
    case TwoLevel::rcp_decode:
    case TwoLevel::rcp_encode: {
      const bool decode_api = r.two_level == TwoLevel::rcp_decode;
      const Reciprocal k = r.reciprocal;
      const Real encode = decode_api ? reciprocal_of(k, g) : fp32_divide(of(1.0f), g);
      const Real s = fp32_multiply(encode, fp32_multiply(bmax, reciprocal_of(k, emax)));
      const auto sf8 = static_cast<std::uint8_t>(round_to_format(kE4M3FN, scale_conversion(), s));
      const Real sf = real_of(kE4M3FN, sf8);
      const bool guard = r.zero_guard == ZeroGuard::block_max ? bmax.kind != ValueKind::zero : sf.kind != ValueKind::zero;
      const Real out_scale =
          guard ? reciprocal_of(k, fp32_multiply(sf, decode_api ? g : reciprocal_of(k, encode))) : of(0.0f);
      QuantizedBlock out = encode_elements(r, x, false, false, out_scale);
      out.scale = sf8;
      return out;
    }
  }
  return {};
}

std::uint32_t recipe_dequantize_raw(const Recipe& r, float g, std::uint8_t scale, std::uint8_t code) {
  const Format ef = format_of(r.element);
  const Real v = real_of(ef, code);
  switch (r.scale) {
    case BlockScale::e4m3_two_level: {
      const Real vs = fp32_multiply(v, real_of(kE4M3FN, scale));
      if (r.tensor_param == TensorParam::encode) return fp32_bits(fp32_divide(vs, of(g)));
      const Real y = fp32_multiply(vs, of(g));
      return fp32_bits(tensor_param_is_amax(r) ? fp32_divide(y, of(r.tensor_divisor)) : y);
    }
    case BlockScale::e8m0_pow2: {
      if (scale == 0xFF) return kCanonicalNanBits;
      Real y = v;
      if (y.kind == ValueKind::finite) y.magnitude *= power_of_two(static_cast<int>(scale) - 127);
      return fp32_bits(y);
    }
    case BlockScale::tensor_only: return fp32_bits(fp32_multiply(v, of(g)));
  }
  return 0;
}

}  // namespace

}  // namespace kvq::oracle
