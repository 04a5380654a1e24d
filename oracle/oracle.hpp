// The independent reference: exact values as rationals, correctly rounded
// conversion found by searching the format's enumerated values (or by exact
// arithmetic for FP32/FP64 targets), exact errors and ulp distances. Written
// without the codec's bit manipulation so the two check each other.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/multiprecision/cpp_int.hpp>

#include "formats/codec.hpp"

namespace kvq::oracle {

using Exact = boost::multiprecision::cpp_rational;
using BigInt = boost::multiprecision::cpp_int;

Exact power_of_two(int e);
// a < b, by the cross products of numerators and (positive) denominators: the same order as the
// rationals' operator<, which walks a continued fraction with a division a step (several times
// slower on the oracle's operands).
bool less(const Exact& a, const Exact& b);
int floor_log2(const Exact& positive);  // exact floor(log2 x), x > 0

// A real input: NaN, +-inf, or an exact finite value (zero carries its sign).
struct Real {
  ValueKind kind = ValueKind::zero;
  bool negative = false;
  Exact magnitude;
  Exact nan_payload;  // NaN only: the mantissa field as a fraction in [0, 1)
};

// The exact value of a code by the format's definition (nullopt for NaN and inf).
std::optional<Exact> exact_value(Format f, std::uint64_t code);
Real real_of(Format f, std::uint64_t code);
Real real_of_float(float x);
Real real_of_double(double x);

// Adjacent representable magnitudes around |x|: lo <= |x| < hi (hi may be the first
// magnitude past the largest finite one, "beyond"); found two independent ways.
struct Neighbours {
  Exact lo, hi;
  std::uint64_t lo_code = 0;  // magnitude codes; beyond_max for hi past the range
  std::uint64_t hi_code = 0;
  bool hi_beyond_max = false;
  bool below_min = false;  // |x| under the smallest value of a format with no zero
};
Neighbours neighbours_by_table(Format f, const Exact& magnitude);       // formats of <= 16 bits
Neighbours neighbours_by_arithmetic(Format f, const Exact& magnitude);  // any format

// Correctly rounded conversion of x into f under the conversion's policies.
std::uint64_t round_to_format(Format f, const Conversion& c, const Real& x, std::uint32_t random_bits = 0);

// Distance, in representable values, between two finite codes (signed: b - a).
std::int64_t ulp_distance(Format f, std::uint64_t a, std::uint64_t b);
// The exact error value(code) - x, for finite code and finite x.
Exact exact_error(Format f, std::uint64_t code, const Real& x);

std::string to_string(const Exact& v);  // "3/8", or a decimal for integers
// The exact decimal expansion of a dyadic rational (finite for every format value): "0.001953125".
std::string decimal_expansion(const Exact& v);

}  // namespace kvq::oracle
