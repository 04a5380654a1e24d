#include "oracle/oracle.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <cstring>
#include <stdexcept>

namespace kvq::oracle {

namespace {

Exact power_of_two_built(int e) {
  BigInt one = 1;
  return e >= 0 ? Exact(one << e) : Exact(BigInt(1), one << -e);
}

}  // namespace

Exact power_of_two(int e) {
  // Built once for every exponent of the formats' values and their steps (FP64's 2^-1074 to 2^1024,
  // with room); each call copies one (normalising a fresh 1 / 2^k costs a gcd a call).
  constexpr int kLowest = -1200, kHighest = 1200;
  static const std::vector<Exact> built = [] {
    std::vector<Exact> t;
    for (int k = kLowest; k <= kHighest; ++k) t.push_back(power_of_two_built(k));
    return t;
  }();
  return e >= kLowest && e <= kHighest ? built[static_cast<std::size_t>(e - kLowest)] : power_of_two_built(e);
}

bool less(const Exact& a, const Exact& b) {
  return boost::multiprecision::numerator(a) * boost::multiprecision::denominator(b) <
         boost::multiprecision::numerator(b) * boost::multiprecision::denominator(a);
}

namespace {

// Field values of a code, read by division and remainder rather than masks.
struct Fields {
  bool negative;
  std::uint64_t exponent_field;
  std::uint64_t mantissa_field;
};

Fields fields_of(Format f, std::uint64_t code) {
  const std::uint64_t mantissa_span = std::uint64_t{1} << f.mantissa_bits;
  const std::uint64_t exponent_span = std::uint64_t{1} << f.exponent_bits;
  Fields r;
  r.mantissa_field = code % mantissa_span;
  r.exponent_field = (code / mantissa_span) % exponent_span;
  r.negative = f.is_signed && (code / mantissa_span / exponent_span) % 2 == 1;
  return r;
}

bool code_is_nan(Format f, const Fields& x) {
  const std::uint64_t top = (std::uint64_t{1} << f.exponent_bits) - 1;
  const std::uint64_t mtop = (std::uint64_t{1} << f.mantissa_bits) - 1;
  switch (f.specials) {
    case Specials::ieee: return x.exponent_field == top && x.mantissa_field != 0;
    case Specials::nan_all_ones: return x.exponent_field == top && x.mantissa_field == mtop;
    case Specials::none: return false;
  }
  return false;
}

bool code_is_inf(Format f, const Fields& x) {
  return f.specials == Specials::ieee && x.exponent_field == (std::uint64_t{1} << f.exponent_bits) - 1 &&
         x.mantissa_field == 0;
}

std::uint64_t sign_code(Format f) { return f.is_signed ? std::uint64_t{1} << (f.bits() - 1) : 0; }

// Magnitude code of a value n * 2^(q) expressed as (binade exponent, integral significand).
std::uint64_t code_from_parts(Format f, int binade, const BigInt& n) {
  // n counts quanta of the binade: for a normal value n = 2^m + mantissa; subnormal n = mantissa.
  const std::uint64_t mantissa_span = std::uint64_t{1} << f.mantissa_bits;
  const auto count = static_cast<std::uint64_t>(n);
  const int lowest = f.has_zero ? 1 - f.bias : -f.bias;
  if (f.has_zero && binade == lowest && count < mantissa_span) return count;  // subnormal or zero
  const auto field = static_cast<std::uint64_t>(binade + f.bias);
  return field * mantissa_span + (count - mantissa_span);
}

}  // namespace

int floor_log2(const Exact& a) {
  const BigInt& num = boost::multiprecision::numerator(a);
  const BigInt& den = boost::multiprecision::denominator(a);
  int e = static_cast<int>(boost::multiprecision::msb(num)) - static_cast<int>(boost::multiprecision::msb(den));
  while (less(a, power_of_two(e))) --e;
  while (!less(a, power_of_two(e + 1))) ++e;
  return e;
}

namespace {

struct Table {
  std::vector<Exact> values;  // ascending non-negative finite magnitudes
  std::vector<std::uint64_t> codes;
  Exact beyond;  // the magnitude one step past the largest finite value
};

Exact step_past_max(Format f, const Exact& max) {
  return max + power_of_two(floor_log2(max) - f.mantissa_bits);
}

const Table& table_for(Format f) {
  static std::mutex mutex;
  static std::map<Format, Table> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(f);
  if (it != cache.end()) return it->second;
  if (f.bits() > 16) throw std::invalid_argument("oracle table: format wider than 16 bits");
  std::vector<std::pair<Exact, std::uint64_t>> entries;
  const std::uint64_t codes = std::uint64_t{1} << (f.bits() - (f.is_signed ? 1 : 0));
  for (std::uint64_t code = 0; code < codes; ++code)
    if (auto v = exact_value(f, code)) entries.emplace_back(*v, code);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return less(a.first, b.first); });
  Table t;
  for (auto& [v, c] : entries) {
    t.values.push_back(v);
    t.codes.push_back(c);
  }
  t.beyond = step_past_max(f, t.values.back());
  return cache.emplace(f, std::move(t)).first->second;
}

bool toward_zero_in_magnitude(Rounding r, bool negative) {
  return r == Rounding::toward_zero || (r == Rounding::toward_positive && negative) ||
         (r == Rounding::toward_negative && !negative);
}

std::uint64_t nan_result(Format f, NanRule rule, bool negative, const Real* source) {
  const std::uint64_t sign = negative ? sign_code(f) : 0;
  const std::uint64_t all = (std::uint64_t{1} << (f.bits() - (f.is_signed ? 1 : 0))) - 1;  // every magnitude bit
  if (f.specials == Specials::none) {
    const std::uint64_t max = table_for(f).codes.back();
    if (rule == NanRule::max_keep_sign) return sign | max;
    if (rule == NanRule::zero_flipped_sign) return negative ? 0 : sign_code(f);
    return max;
  }
  if (rule == NanRule::all_ones_positive) return all;
  if (f.specials == Specials::ieee && f.mantissa_bits > 0 &&
      (rule == NanRule::quiet_keep_sign || rule == NanRule::payload_keep_sign)) {
    const std::uint64_t quiet = ((std::uint64_t{1} << f.exponent_bits) - 1) << f.mantissa_bits |
                                std::uint64_t{1} << (f.mantissa_bits - 1);
    std::uint64_t payload = 0;
    if (rule == NanRule::payload_keep_sign && source != nullptr) {
      const Exact scaled = source->nan_payload * power_of_two(f.mantissa_bits);
      payload = static_cast<std::uint64_t>(boost::multiprecision::numerator(scaled) /
                                           boost::multiprecision::denominator(scaled));
    }
    return sign | quiet | payload;
  }
  return sign | all;
}

std::uint64_t overflow_result(Format f, const Conversion& c, bool negative, bool from_infinity,
                              std::uint64_t max_code) {
  const std::uint64_t sign = negative ? sign_code(f) : 0;
  const std::uint64_t all_ones = (std::uint64_t{1} << (f.bits() - (f.is_signed ? 1 : 0))) - 1;
  if (c.overflow == Overflow::saturate) return sign | max_code;
  if (c.overflow == Overflow::nan && f.specials != Specials::none) return sign | all_ones;
  if (toward_zero_in_magnitude(c.rounding, negative) && !from_infinity) return sign | max_code;
  if (f.specials == Specials::ieee) return sign | (((std::uint64_t{1} << f.exponent_bits) - 1) << f.mantissa_bits);
  if (f.specials == Specials::nan_all_ones) return sign | all_ones;
  return sign | max_code;
}

}  // namespace

std::optional<Exact> exact_value(Format f, std::uint64_t code) {
  const Fields x = fields_of(f, code);
  if (code_is_nan(f, x) || code_is_inf(f, x)) return std::nullopt;
  // The integer significand (mantissa field, plus 2^mantissa_bits for a normal value) times 2^(the
  // binade's exponent - mantissa_bits); its factors of two moved into the exponent, so that the
  // rational is built in lowest terms.
  const bool subnormal = f.has_zero && x.exponent_field == 0;
  std::uint64_t significand = x.mantissa_field + (subnormal ? 0 : std::uint64_t{1} << f.mantissa_bits);
  int exponent = (subnormal ? 1 - f.bias : static_cast<int>(x.exponent_field) - f.bias) - f.mantissa_bits;
  while (significand != 0 && significand % 2 == 0) {
    significand /= 2;
    ++exponent;
  }
  const Exact v = Exact(BigInt(significand)) * power_of_two(exponent);
  return x.negative ? Exact(-v) : v;
}

Real real_of(Format f, std::uint64_t code) {
  const Fields x = fields_of(f, code);
  Real r;
  r.negative = x.negative;
  if (code_is_nan(f, x)) {
    r.kind = ValueKind::nan;
    r.nan_payload = Exact(BigInt(x.mantissa_field)) / power_of_two(f.mantissa_bits);
  } else if (code_is_inf(f, x)) {
    r.kind = ValueKind::infinity;
  } else {
    r.magnitude = abs(*exact_value(f, code));
    r.kind = r.magnitude == 0 ? ValueKind::zero : ValueKind::finite;
  }
  return r;
}

Real real_of_float(float x) {
  std::uint32_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  return real_of(kFP32, b);
}
Real real_of_double(double x) {
  std::uint64_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  return real_of(kFP64, b);
}

Neighbours neighbours_by_table(Format f, const Exact& a) {
  const Table& t = table_for(f);
  Neighbours n;
  if (!less(a, t.values.back())) {
    n.lo = t.values.back();
    n.lo_code = t.codes.back();
    n.hi = t.beyond;
    n.hi_beyond_max = true;
    return n;
  }
  if (less(a, t.values.front())) {  // only for formats with no zero
    n.below_min = true;
    n.lo = n.hi = t.values.front();
    n.lo_code = n.hi_code = t.codes.front();
    return n;
  }
  const auto it = std::upper_bound(t.values.begin(), t.values.end(), a, less);
  const auto i = static_cast<std::size_t>(it - t.values.begin());
  n.lo = t.values[i - 1];
  n.lo_code = t.codes[i - 1];
  n.hi = t.values[i];
  n.hi_code = t.codes[i];
  return n;
}

Neighbours neighbours_by_arithmetic(Format f, const Exact& a) {
  const int lowest = f.has_zero ? 1 - f.bias : -f.bias;
  const std::uint64_t max_code = f.max_finite_code();
  const Exact max = *exact_value(f, max_code);
  Neighbours n;
  if (!less(a, max)) {
    n.lo = max;
    n.lo_code = max_code;
    n.hi = step_past_max(f, max);
    n.hi_beyond_max = true;
    return n;
  }
  if (!f.has_zero && less(a, power_of_two(lowest))) {
    n.below_min = true;
    n.lo = n.hi = power_of_two(lowest);
    return n;
  }
  const int binade = a == 0 ? lowest : std::max(floor_log2(a), lowest);
  const Exact quantum = power_of_two(binade - f.mantissa_bits);
  const Exact ratio = a / quantum;
  const BigInt count = boost::multiprecision::numerator(ratio) / boost::multiprecision::denominator(ratio);
  n.lo = Exact(count) * quantum;
  n.hi = Exact(count + 1) * quantum;
  n.lo_code = code_from_parts(f, binade, count);
  // count + 1 may start the next binade: its code is the next one up either way.
  n.hi_code = n.lo_code + 1;
  return n;
}

std::uint64_t round_to_format(Format f, const Conversion& c, const Real& x_in, std::uint32_t random_bits) {
  Real x = x_in;
  const std::uint64_t max_code = f.max_finite_code();
  if (x.kind == ValueKind::nan) return nan_result(f, c.nan, x.negative, &x);
  if (!f.is_signed) {
    const bool nonpositive = x.negative || x.kind == ValueKind::zero;
    if (c.unsigned_rule == UnsignedRule::nonpositive_is_nan && nonpositive) return nan_result(f, c.nan, false, &x);
    x.negative = false;
  }
  const std::uint64_t sign = x.negative ? sign_code(f) : 0;
  if (x.kind == ValueKind::infinity) return overflow_result(f, c, x.negative, true, max_code);
  if (x.kind == ValueKind::zero && f.has_zero) return sign;

  const Neighbours n = f.bits() <= 16 ? neighbours_by_table(f, x.magnitude) : neighbours_by_arithmetic(f, x.magnitude);
  if (n.below_min) return n.lo_code;
  if (x.magnitude == n.lo) return sign | n.lo_code;
  if (!less(x.magnitude, n.hi)) return overflow_result(f, c, x.negative, false, max_code);  // past the step beyond max

  // lo < |x| < hi: decide by the definition of each rounding mode.
  const Exact gap = n.hi - n.lo;
  const Exact fraction = (x.magnitude - n.lo) / gap;  // in (0, 1)
  bool up = false;
  Rounding rounding = c.rounding;
  const int lowest = f.has_zero ? 1 - f.bias : -f.bias;
  if (c.lowest_binade_rounds_away && less(power_of_two(lowest), x.magnitude) && less(x.magnitude, power_of_two(lowest + 1)))
    rounding = x.negative ? Rounding::toward_negative : Rounding::toward_positive;
  switch (rounding) {
    case Rounding::nearest_even: {
      if (fraction != Exact(1, 2)) {
        up = less(Exact(1, 2), fraction);
      } else {  // tie: the neighbour that is an even multiple of the gap
        const Exact lo_in_gaps = n.lo / gap;
        const BigInt whole = boost::multiprecision::numerator(lo_in_gaps);
        up = boost::multiprecision::denominator(lo_in_gaps) == 1 && whole % 2 != 0;
      }
      break;
    }
    case Rounding::nearest_away: up = !less(fraction, Exact(1, 2)); break;
    case Rounding::nearest_toward_zero: up = less(Exact(1, 2), fraction); break;
    case Rounding::toward_zero: up = false; break;
    case Rounding::toward_positive: up = !x.negative; break;
    case Rounding::toward_negative: up = x.negative; break;
    case Rounding::stochastic: {
      const Exact scaled = fraction * power_of_two(32);
      const BigInt top = boost::multiprecision::numerator(scaled) / boost::multiprecision::denominator(scaled);
      up = top + random_bits >= (BigInt(1) << 32);
      break;
    }
  }
  if (!up) return sign | n.lo_code;
  if (n.hi_beyond_max) return overflow_result(f, c, x.negative, false, max_code);
  return sign | n.hi_code;
}

std::int64_t ulp_distance(Format f, std::uint64_t a, std::uint64_t b) {
  // Position of a code on the number line of all finite values (-0 and +0 share position 0).
  auto position = [f](std::uint64_t code) -> std::int64_t {
    const Real r = real_of(f, code);
    if (r.kind == ValueKind::nan || r.kind == ValueKind::infinity)
      throw std::invalid_argument("ulp_distance: code is not finite");
    const Table& t = table_for(f);
    const auto it = std::lower_bound(t.values.begin(), t.values.end(), r.magnitude, less);
    const auto index = static_cast<std::int64_t>(it - t.values.begin());
    return r.negative ? -index : index;
  };
  return position(b) - position(a);
}

Exact exact_error(Format f, std::uint64_t code, const Real& x) {
  const auto v = exact_value(f, code);
  if (!v || x.kind == ValueKind::nan || x.kind == ValueKind::infinity)
    throw std::invalid_argument("exact_error: needs a finite code and a finite input");
  return *v - (x.negative ? Exact(-x.magnitude) : x.magnitude);
}

std::string to_string(const Exact& v) { return v.str(); }

std::string decimal_expansion(const Exact& v) {
  const bool negative = v < 0;
  BigInt num = boost::multiprecision::numerator(negative ? Exact(-v) : v);
  BigInt den = boost::multiprecision::denominator(v);
  if ((den & (den - 1)) != 0) throw std::invalid_argument("decimal_expansion: not a dyadic rational");
  // n / 2^k = n * 5^k / 10^k
  const auto k = static_cast<std::size_t>(boost::multiprecision::msb(den));
  for (std::size_t i = 0; i < k; ++i) num *= 5;
  std::string digits = num.str();
  if (k > 0) {
    if (digits.size() <= k) digits.insert(0, k + 1 - digits.size(), '0');
    digits.insert(digits.size() - k, ".");
    while (digits.back() == '0') digits.pop_back();
    if (digits.back() == '.') digits.pop_back();
  }
  return (negative ? "-" : "") + digits;
}

}  // namespace kvq::oracle
