#include "oracle/recipes_oracle.hpp"

#include <algorithm>

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

int pow2_exponent_exact(const Recipe& r, const Real& bmax) {
  const Format ef = format_of(r.element);
  const Exact max = *exact_value(ef, ef.max_finite_code());
  const int emax = floor_log2(max);
  switch (r.pow2) {
    case Pow2Rule::floor: return floor_log2(bmax.magnitude) - emax;
    case Pow2Rule::ceil: return ceil_log2(bmax.magnitude) - emax;
    case Pow2Rule::even: {
      // Round to the element's mantissa width in a format with room for any FP32 exponent.
      const Format wide{11, ef.mantissa_bits, 1023, Specials::ieee, true, true};
      const std::uint64_t code = round_to_format(wide, kFp32Rne, bmax);
      return floor_log2(*exact_value(wide, code)) - emax;
    }
    case Pow2Rule::rceil: {
      const Real reciprocal = fp32_divide(of(1.0f), finite_real(max));
      const Real ratio = fp32_multiply(bmax, reciprocal);
      return ratio.kind == ValueKind::zero ? -127 : ceil_log2(ratio.magnitude);
    }
    case Pow2Rule::ceil_ratio: {
      const Real ratio = fp32_divide(bmax, finite_real(max));
      const Real floor_value = of(r.ratio_floor);
      return ceil_log2(greater(ratio, floor_value) ? ratio.magnitude : floor_value.magnitude);
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
  return float_from_bits(fp32_bits(fp32_divide(of(amax), of(r.tensor_divisor))));
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
      const bool mx = r.pow2 != Pow2Rule::ceil_ratio;
      if ((mx && any_nan) || bmax.kind == ValueKind::infinity) {
        for (auto& c : out.codes) c = static_cast<std::uint8_t>(round_to_format(ef, ec, nan_real()));
        out.scale = 0xFF;
        return out;
      }
      int e = bmax.kind == ValueKind::zero && r.pow2 != Pow2Rule::ceil_ratio ? -127 : pow2_exponent_exact(r, bmax);
      e = std::clamp(e, -127, 127);
      for (std::size_t i = 0; i < x.size(); ++i) out.codes[i] = encode_scaled(ef, ec, x[i], -e);
      out.scale = static_cast<std::uint8_t>(e + 127);
      return out;
    }
    case BlockScale::tensor_only: {
      const Real reciprocal = fp32_divide(of(1.0f), g);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const Real v = g.kind == ValueKind::zero ? fp32_multiply(x[i], of(0.0f))
                                                 : (r.apply == Apply::divide ? fp32_divide(x[i], g)
                                                                             : fp32_multiply(x[i], reciprocal));
        out.codes[i] = static_cast<std::uint8_t>(round_to_format(ef, ec, v));
      }
      return out;
    }
  }
  return out;
}

std::uint8_t recipe_requantize_e4m3(const Recipe& r, std::uint8_t scale, std::uint8_t code, float factor) {
  Real scale_value = of(1.0f);
  if (r.scale == BlockScale::e4m3_two_level) scale_value = real_of(kE4M3FN, scale);
  if (r.scale == BlockScale::e8m0_pow2) scale_value = real_of(kE8M0FNU, scale);
  const Real v = real_of(format_of(r.element), code), f = of(factor);
  Real product;  // exact: no FP32 rounding between the factors
  if (v.kind == ValueKind::nan || scale_value.kind == ValueKind::nan || f.kind == ValueKind::nan) {
    product = nan_real();
  } else if (f.kind == ValueKind::infinity) {
    const bool negative = v.negative != (scale_value.negative != f.negative);
    product = v.kind == ValueKind::zero || scale_value.kind == ValueKind::zero ? nan_real() : inf_real(negative);
  } else {
    product = finite_real(v.magnitude * scale_value.magnitude * f.magnitude);
    product.negative = v.negative != (scale_value.negative != f.negative);
    if (product.magnitude == 0) product.kind = ValueKind::zero;
  }
  return static_cast<std::uint8_t>(round_to_format(kE4M3FN, scale_conversion(), product));
}

std::uint32_t recipe_dequantize_element(const Recipe& r, float g, std::uint8_t scale, std::uint8_t code) {
  const std::uint32_t bits = recipe_dequantize_raw(r, g, scale, code);
  return kFP32.is_nan(bits) ? 0x7fc00000u : bits;  // the contract's canonical NaN
}

namespace {

QuantizedBlock encode_elements(const Recipe& r, const std::vector<Real>& x, bool zero, bool divide, const Real& by) {
  QuantizedBlock out;
  for (const Real& v : x) {
    const Real y = zero ? fp32_multiply(v, of(0.0f)) : (divide ? fp32_divide(v, by) : fp32_multiply(v, by));
    out.codes.push_back(static_cast<std::uint8_t>(round_to_format(format_of(r.element), element_conversion(r), y)));
  }
  return out;
}

QuantizedBlock two_level_reference(const Recipe& r, const Real& g, const std::vector<Real>& x, const Real& bmax,
                                   const Real& divisor) {
  Real s = fp32_divide(fp32_divide(bmax, divisor), g);
  if (r.clamp_block_scale && s.kind != ValueKind::nan) {
    if (greater(of(0x1p-6f), s) || s.kind == ValueKind::zero) s = of(0x1p-6f);
    if (greater(s, of(448.0f))) s = of(448.0f);
  }
  const bool zero_block = r.zero_guard != ZeroGuard::rounded_scale && bmax.kind == ValueKind::zero;
  const std::uint8_t sf8 = zero_block ? 0 : static_cast<std::uint8_t>(round_to_format(kE4M3FN, scale_conversion(), s));
  const Real sf = real_of(kE4M3FN, sf8);
  const Real denominator = fp32_multiply(sf, g);
  const bool zero = zero_block || (r.zero_guard == ZeroGuard::rounded_scale && sf.kind == ValueKind::zero) ||
                    (r.zero_guard == ZeroGuard::block_and_scale && denominator.kind == ValueKind::zero);
  const bool divide = r.apply == Apply::divide;
  QuantizedBlock out =
      encode_elements(r, x, zero, divide, divide ? denominator : fp32_divide(fp32_divide(of(1.0f), g), sf));
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

QuantizedBlock two_level(const Recipe& r, const Real& g, const std::vector<Real>& x, const Real& bmax) {
  const Real emax = of(element_max(r));
  switch (r.two_level) {
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
    case BlockScale::e4m3_two_level:
      return fp32_bits(fp32_multiply(fp32_multiply(v, real_of(kE4M3FN, scale)), of(g)));
    case BlockScale::e8m0_pow2: {
      if (scale == 0xFF) return 0x7fc00000u;
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
