#include "oracle/recipes_oracle.hpp"

#include <algorithm>

#include "formats/float_bits.hpp"

namespace kvq::oracle {

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
Real finite_real(const Exact& signed_value) {
  Real r;
  r.negative = signed_value < 0;
  r.magnitude = r.negative ? Exact(-signed_value) : signed_value;
  r.kind = signed_value == 0 ? ValueKind::zero : ValueKind::finite;
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
      const Real ratio = fp32_divide(bmax, of(6.0f));
      const Real floor_value = of(1e-10f);
      return ceil_log2(greater(ratio, floor_value) ? ratio.magnitude : floor_value.magnitude);
    }
  }
  return 0;
}

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
    case BlockScale::e4m3_two_level: {
      const Format sf_format = kE4M3FN;
      Real s = fp32_divide(fp32_divide(bmax, of(element_max(r))), g);
      if (r.clamp_block_scale && s.kind != ValueKind::nan) {
        if (greater(of(0x1p-6f), s) || s.kind == ValueKind::zero) s = of(0x1p-6f);
        if (greater(s, of(448.0f))) s = of(448.0f);
      }
      const bool zero_block = r.zero_guard != ZeroGuard::rounded_scale && bmax.kind == ValueKind::zero;
      out.scale = zero_block ? 0 : static_cast<std::uint8_t>(round_to_format(sf_format, scale_conversion(), s));
      const Real sf = real_of(sf_format, out.scale);
      const Real reciprocal = fp32_divide(fp32_divide(of(1.0f), g), sf);
      const Real denominator = fp32_multiply(sf, g);
      const bool zero = zero_block || (r.zero_guard == ZeroGuard::rounded_scale && sf.kind == ValueKind::zero) ||
                        (r.zero_guard == ZeroGuard::block_and_scale && denominator.kind == ValueKind::zero);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const Real v = zero ? fp32_multiply(x[i], of(0.0f))
                            : (r.apply == Apply::divide ? fp32_divide(x[i], denominator)
                                                        : fp32_multiply(x[i], reciprocal));
        out.codes[i] = static_cast<std::uint8_t>(round_to_format(ef, ec, v));
      }
      return out;
    }
    case BlockScale::e8m0_pow2: {
      const bool mx = r.pow2 != Pow2Rule::ceil_ratio;
      if ((mx && any_nan) || bmax.kind == ValueKind::infinity) {
        for (auto& c : out.codes) c = static_cast<std::uint8_t>(round_to_format(ef, ec, nan_real()));
        out.scale = 0xFF;
        return out;
      }
      int e = bmax.kind == ValueKind::zero ? -127 : pow2_exponent_exact(r, bmax);
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

std::uint32_t recipe_dequantize_element(const Recipe& r, float g, std::uint8_t scale, std::uint8_t code) {
  const std::uint32_t bits = recipe_dequantize_raw(r, g, scale, code);
  return kFP32.is_nan(bits) ? 0x7fc00000u : bits;  // the contract's canonical NaN
}

namespace {
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
