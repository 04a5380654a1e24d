// RoPE computed two ways, independently of kernels/ and of the codec's bit code:
// - exact: angle = pos * base^(-2f/rot) and its cos/sin at 100 decimal digits, the rotation and
//   the quantize scale applied in that precision, rounded once to E4M3 by the oracle's search;
// - the FP32 engine model: the kernels' documented operations (docs/rope.md), each done exactly on
//   rationals and rounded once to FP32, then the E4M3 satfinite conversion.
// And the derived bound that ties the two (docs/rope.md, "Error bound").
#pragma once

#include <cstdint>
#include <vector>

#include <boost/multiprecision/cpp_bin_float.hpp>

#include "oracle/oracle.hpp"

namespace kvq::oracle {

using Wide = boost::multiprecision::cpp_bin_float_100;

Exact exact_of(const Wide& x);  // exact: a binary float is a dyadic rational
Wide wide_of(float x);          // exact

struct RopeAngle {
  Wide cos, sin;
};
// cos and sin of pos * base^(-2f/rot), f < rot/2.
RopeAngle rope_angle(std::int64_t pos, int f, int rot, double base);
// cos and sin of the FP32 angle RN(pos * RN(base^(-2f/rot))): what a port computes from an FP32
// inverse frequency and an FP32 angle, its cos and sin then rounded once (fp32_nearest).
RopeAngle rope_fp32_angle(std::int64_t pos, int f, int rot, double base);
// The FP32 value nearest (RNE) to v.
float fp32_nearest(const Wide& v);
// cos_sin_cache[max_pos, rot]: row p holds cos of frequencies 0..rot/2-1 then their sin, each the
// FP32 value nearest (RNE) to the 100-digit value.
std::vector<float> rope_cos_sin_cache(std::int64_t max_pos, int rot, double base);

// IEEE binary32 a + b rounded once (signed zeros and specials as IEEE 754).
Real fp32_add_ieee(const Real& a, const Real& b);
// The FP32 engine model of one rotated element: o = RN(RN(x*c) - RN(partner*s)) (first of a pair)
// or RN(RN(x*c) + RN(partner*s)), then code = E4M3 cuda-satfinite RNE of RN(o * scale).
std::uint8_t rope_model_e4m3(float x, float partner, float c, float s, bool first_of_pair, float scale);
// A nope or V element: E4M3 of RN(x * scale).
std::uint8_t scale_model_e4m3(float x, float scale);

// The exact rotated and scaled value z and the derived bound E on |RN(o * scale) - z| for finite
// x, partner, c, s, scale whose model values stay finite (docs/rope.md):
// E = (1+u)|scale|((2u+u^2)(|x c| + |y s|) + |x| dc + |y| ds + 4 eta) + u|z| + eta + slack,
// u = 2^-24, eta = 2^-150, dc = |c - cos|, ds = |s - sin| (the cache's own error, measured here).
struct RopeBound {
  Wide z, e;
  std::uint8_t nearest = 0;  // E4M3 satfinite RNE of z
  std::uint8_t lo = 0, hi = 0;  // of z - E and z + E: every code the model may give lies in [lo, hi]
};
RopeBound rope_bound(float x, float partner, float c, float s, const RopeAngle& angle, bool first_of_pair, float scale);
// value(lo) <= value(code) <= value(hi), compared as exact E4M3 values.
bool e4m3_between(std::uint8_t lo, std::uint8_t code, std::uint8_t hi);

}  // namespace kvq::oracle
