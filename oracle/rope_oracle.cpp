#include "oracle/rope_oracle.hpp"

#include "formats/conventions.hpp"
#include "formats/float_bits.hpp"
#include "oracle/recipes_oracle.hpp"

namespace kvq::oracle {

namespace {

constexpr Conversion kFp32Rne{Rounding::nearest_even, Overflow::ieee, NanRule::payload_keep_sign};
const Conversion kE4M3Satfinite =
    convention_conversion(ConventionId::cuda_satfinite, FormatId::e4m3fn, Rounding::nearest_even);

Real real_of_wide(const Wide& v) { return finite_real(exact_of(v)); }

Real negated(Real r) {
  r.negative = !r.negative;
  return r;
}

std::uint8_t e4m3_of(const Real& r) { return static_cast<std::uint8_t>(round_to_format(kE4M3FN, kE4M3Satfinite, r)); }

Exact signed_value(const Real& r) { return r.negative ? Exact(-r.magnitude) : r.magnitude; }

}  // namespace

Exact exact_of(const Wide& x) {
  if (x == 0) return Exact(0);
  int e = 0;
  const Wide m = boost::multiprecision::frexp(x, &e);  // |m| in [0.5, 1), at most 400 significant bits
  const BigInt whole = boost::multiprecision::ldexp(m, 400).convert_to<BigInt>();
  return Exact(whole) * power_of_two(e - 400);
}

Wide wide_of(float x) { return Wide(x); }

RopeAngle rope_angle(std::int64_t pos, int f, int rot, double base) {
  const Wide exponent = Wide(-2 * f) / Wide(rot);
  const Wide theta = Wide(pos) * boost::multiprecision::pow(Wide(base), exponent);
  return {boost::multiprecision::cos(theta), boost::multiprecision::sin(theta)};
}

RopeAngle rope_fp32_angle(std::int64_t pos, int f, int rot, double base) {
  const Wide exponent = Wide(-2 * f) / Wide(rot);
  const float inv_freq = fp32_nearest(boost::multiprecision::pow(Wide(base), exponent));
  const Wide theta = wide_of(fp32_nearest(Wide(pos) * wide_of(inv_freq)));
  return {boost::multiprecision::cos(theta), boost::multiprecision::sin(theta)};
}

float fp32_nearest(const Wide& v) {
  return float_from_bits(static_cast<std::uint32_t>(round_to_format(kFP32, kFp32Rne, real_of_wide(v))));
}

std::vector<float> rope_cos_sin_cache(std::int64_t max_pos, int rot, double base) {
  const int half = rot / 2;
  std::vector<float> cache(static_cast<std::size_t>(max_pos) * rot);
  for (std::int64_t p = 0; p < max_pos; ++p) {
    for (int f = 0; f < half; ++f) {
      const RopeAngle a = rope_angle(p, f, rot, base);
      cache[p * rot + f] = fp32_nearest(a.cos);
      cache[p * rot + half + f] = fp32_nearest(a.sin);
    }
  }
  return cache;
}

Real fp32_add_ieee(const Real& a, const Real& b) {
  Real nan;
  nan.kind = ValueKind::nan;
  if (a.kind == ValueKind::nan || b.kind == ValueKind::nan) return nan;
  const bool a_inf = a.kind == ValueKind::infinity, b_inf = b.kind == ValueKind::infinity;
  if (a_inf && b_inf) return a.negative == b.negative ? a : nan;
  if (a_inf) return a;
  if (b_inf) return b;
  if (a.kind == ValueKind::zero && b.kind == ValueKind::zero) {
    Real z = a;
    z.negative = a.negative && b.negative;  // -0 + -0 = -0, every other sum of zeros +0 (RNE)
    return z;
  }
  return fp32(finite_real(signed_value(a) + signed_value(b)));  // an exact cancellation gives +0
}

std::uint8_t rope_model_e4m3(float x, float partner, float c, float s, bool first_of_pair, float scale) {
  const Real xc = fp32_multiply(real_of_float(x), real_of_float(c));
  const Real ys = fp32_multiply(real_of_float(partner), real_of_float(s));
  const Real o = fp32_add_ieee(xc, first_of_pair ? negated(ys) : ys);
  return e4m3_of(fp32_multiply(o, real_of_float(scale)));
}

std::uint8_t scale_model_e4m3(float x, float scale) {
  return e4m3_of(fp32_multiply(real_of_float(x), real_of_float(scale)));
}

RopeBound rope_bound(float x, float partner, float c, float s, const RopeAngle& angle, bool first_of_pair, float scale) {
  using boost::multiprecision::abs;
  using boost::multiprecision::ldexp;
  const Wide wx = wide_of(x), wy = wide_of(partner), wc = wide_of(c), ws = wide_of(s), wscale = wide_of(scale);
  const Wide u = ldexp(Wide(1), -24), eta = ldexp(Wide(1), -150), slack = ldexp(Wide(1), -290);
  const Wide rotated = first_of_pair ? wx * angle.cos - wy * angle.sin : wx * angle.cos + wy * angle.sin;
  RopeBound b;
  b.z = rotated * wscale;
  const Wide a = abs(wx * wc) + abs(wy * ws);
  const Wide dc = abs(wc - angle.cos), ds = abs(ws - angle.sin);
  const Wide rotation_error = (2 * u + u * u) * a + abs(wx) * dc + abs(wy) * ds + 4 * eta;
  b.e = (1 + u) * abs(wscale) * rotation_error + u * abs(b.z) + eta + slack * (1 + abs(wscale)) * (abs(wx) + abs(wy) + 1);
  b.nearest = e4m3_of(real_of_wide(b.z));
  b.lo = e4m3_of(real_of_wide(b.z - b.e));
  b.hi = e4m3_of(real_of_wide(b.z + b.e));
  return b;
}

bool e4m3_between(std::uint8_t lo, std::uint8_t code, std::uint8_t hi) {
  const auto l = exact_value(kE4M3FN, lo), c = exact_value(kE4M3FN, code), h = exact_value(kE4M3FN, hi);
  return l && c && h && *l <= *c && *c <= *h;  // a NaN code is never between
}

}  // namespace kvq::oracle
