// The one codec: any format to any format, as numbered steps on an unpacked
// value (sign, exponent of the leading bit, 64-bit significand). Pure integer
// code, so FTZ and the float rounding mode cannot touch it.
#pragma once

#include <cstdint>

#include "formats/format.hpp"
#include "formats/host_device.hpp"

namespace kvq {

enum class Rounding : std::uint8_t {
  nearest_even,     // rne: ties to the even integral significand (with m = 0, E8M0: ties go up)
  toward_zero,      // rz
  toward_positive,  // ru
  toward_negative,  // rd
  nearest_away,     // rna: ties away from zero (microxcaling's floor(|x| + 0.5))
  stochastic,       // rs: up iff top 32 bits of the discarded fraction + random_bits >= 2^32
  nearest_toward_zero,  // rnz: ties toward zero (ModelOpt's MXFP4 cast counts |v| > bound: docs/recipes.md)
};

enum class Overflow : std::uint8_t {
  saturate,  // +-max finite, infinities too (CUDA __NV_SATFINITE, OCP saturating mode)
  ieee,      // inf, or NaN where the format has no inf; toward-zero roundings give max (IEEE 754 7.4)
  nan,       // NaN (S.1..1) whenever the format has one, inf inputs too; else as ieee
};

// The code a NaN input becomes. (A NaN made by overflow is always S.1..1: see overflow_code.)
enum class NanRule : std::uint8_t {
  all_ones_keep_sign,  // S.1..1.1..1 (E4M3FN in ml_dtypes and PyTorch: 0x7F / 0xFF)
  all_ones_positive,   // 0.1..1.1..1 (CUDA cvt: 0x7F whatever the sign)
  quiet_keep_sign,     // S.1..1.10..0 (ml_dtypes E5M2: 0x7E / 0xFE)
  payload_keep_sign,   // IEEE narrowing: payload truncated, quiet bit set
  max_positive,        // no NaN in the format: +max (CUDA E2M1: 0x7)
  max_keep_sign,       // no NaN in the format: +-max
  zero_flipped_sign,   // no NaN in the format: +NaN -> -0, -NaN -> +0 (ml_dtypes 0.6 E2M1)
};

// How an unsigned format (E8M0FNU) treats negative inputs and zero.
enum class UnsignedRule : std::uint8_t {
  absolute,            // convert |x| (CUDA, PyTorch): -1 -> 0x7F, 0 -> 0x00
  nonpositive_is_nan,  // x <= 0 is NaN (ml_dtypes)
};

struct Conversion {
  Rounding rounding = Rounding::nearest_even;
  Overflow overflow = Overflow::ieee;
  NanRule nan = NanRule::payload_keep_sign;
  UnsignedRule unsigned_rule = UnsignedRule::absolute;
  // E8M0 quirk of ml_dtypes 0.6 and PyTorch 2.11: inputs inside the lowest binade (2^-127, 2^-126),
  // all FP32 subnormals, round away from zero whatever the rounding mode says.
  bool lowest_binade_rounds_away = false;
};

enum class ValueKind : std::uint8_t { zero, finite, infinity, nan };

// value = (-1)^negative * significand * 2^(exponent - 63), significand's bit 63 set (finite).
// For NaN, significand holds the mantissa field left-aligned (the payload).
struct Unpacked {
  ValueKind kind = ValueKind::zero;
  bool negative = false;
  int exponent = 0;
  std::uint64_t significand = 0;
};

// Step 0: a code as sign, class, exponent and normalised significand.
KVQ_HD constexpr Unpacked unpack(Format f, std::uint64_t code) {
  Unpacked u;
  u.negative = (code & f.sign_bit()) != 0;
  const std::uint64_t mag = code & f.magnitude_mask();
  const std::uint64_t field = mag >> f.mantissa_bits;
  const std::uint64_t mantissa = mag & f.mantissa_mask();
  if (f.is_nan(code)) {
    u.kind = ValueKind::nan;
    u.significand = f.mantissa_bits ? mantissa << (64 - f.mantissa_bits) : 0;
    return u;
  }
  if (f.is_inf(code)) {
    u.kind = ValueKind::infinity;
    return u;
  }
  if (f.has_zero && mag == 0) return u;
  u.kind = ValueKind::finite;
  if (f.has_zero && field == 0) {  // subnormal: normalise
    const int lead = 63 - leading_zeros(mantissa);
    u.significand = mantissa << (63 - lead);
    u.exponent = f.min_exponent() - f.mantissa_bits + lead;
  } else {
    u.significand = (mantissa | (std::uint64_t{1} << f.mantissa_bits)) << (63 - f.mantissa_bits);
    u.exponent = static_cast<int>(field) - f.bias;
  }
  return u;
}

namespace codec_detail {

KVQ_HD constexpr std::uint64_t nan_code(Format f, NanRule rule, bool negative, std::uint64_t payload) {
  const std::uint64_t sign = negative ? f.sign_bit() : 0;
  const std::uint64_t all_ones = f.magnitude_mask();
  if (!f.has_nan()) {
    switch (rule) {
      case NanRule::max_keep_sign: return sign | f.max_finite_code();
      case NanRule::zero_flipped_sign: return negative ? 0 : f.sign_bit();
      default: return f.max_finite_code();
    }
  }
  if (f.specials != Specials::ieee || f.mantissa_bits == 0) {  // one NaN magnitude only
    return rule == NanRule::all_ones_positive ? all_ones : sign | all_ones;
  }
  const std::uint64_t quiet = f.inf_code() | (std::uint64_t{1} << (f.mantissa_bits - 1));
  switch (rule) {
    case NanRule::all_ones_positive: return all_ones;
    case NanRule::quiet_keep_sign: return sign | quiet;
    case NanRule::payload_keep_sign: return sign | quiet | (payload >> (64 - f.mantissa_bits));
    default: return sign | all_ones;
  }
}

KVQ_HD constexpr std::uint64_t overflow_code(Format f, const Conversion& c, bool negative, bool from_infinity) {
  const std::uint64_t sign = negative ? f.sign_bit() : 0;
  if (c.overflow == Overflow::saturate) return sign | f.max_finite_code();
  if (c.overflow == Overflow::nan && f.has_nan()) return sign | f.magnitude_mask();
  const bool toward_zero = c.rounding == Rounding::toward_zero ||
                           (c.rounding == Rounding::toward_positive && negative) ||
                           (c.rounding == Rounding::toward_negative && !negative);
  if ((toward_zero && !from_infinity) || !f.has_nan()) return sign | f.max_finite_code();
  if (f.has_inf()) return sign | f.inf_code();
  return sign | f.magnitude_mask();  // an overflow NaN keeps its sign in every library (CUDA nosat -500 -> 0xFF)
}

KVQ_HD constexpr bool rounds_up(Rounding r, bool negative, bool odd, std::uint64_t rest, bool lost,
                                std::uint32_t random_bits) {
  const bool half = (rest >> 63) != 0;
  const bool inexact = rest != 0 || lost;
  switch (r) {
    case Rounding::nearest_even: return half && (odd || (rest << 1) != 0 || lost);
    case Rounding::nearest_away: return half;
    case Rounding::nearest_toward_zero: return half && ((rest << 1) != 0 || lost);
    case Rounding::toward_zero: return false;
    case Rounding::toward_positive: return !negative && inexact;
    case Rounding::toward_negative: return negative && inexact;
    case Rounding::stochastic: return (rest >> 32) + random_bits >= (std::uint64_t{1} << 32);
  }
  return false;
}

}  // namespace codec_detail

// The conversion of an unpacked value into format f. random_bits feed stochastic rounding only.
KVQ_HD constexpr std::uint64_t encode(Format f, const Conversion& c, Unpacked u, std::uint32_t random_bits = 0) {
  using namespace codec_detail;
  // 1. NaN.
  if (u.kind == ValueKind::nan) return nan_code(f, c.nan, u.negative, u.significand);
  // 2. Sign of an unsigned format.
  if (!f.is_signed) {
    if (c.unsigned_rule == UnsignedRule::nonpositive_is_nan && (u.negative || u.kind == ValueKind::zero))
      return nan_code(f, c.nan, false, 0);
    u.negative = false;
  }
  const std::uint64_t sign = u.negative ? f.sign_bit() : 0;
  // 3. Infinity behaves as the largest overflow.
  if (u.kind == ValueKind::infinity) return overflow_code(f, c, u.negative, true);
  // 4. Zero; below the lowest binade of a format with no zero, the smallest value (E8M0 0x00).
  if (u.kind == ValueKind::zero) return f.has_zero ? sign : 0;
  if (!f.has_zero && u.exponent < f.min_exponent()) return 0;
  // 5. Target binade (subnormals share the lowest) and how many significand bits fall off.
  const int exponent = u.exponent > f.min_exponent() ? u.exponent : f.min_exponent();
  const int shift = 63 - f.mantissa_bits + (exponent - u.exponent);
  // 6. Keep the top bits; the rest, left-aligned, decides the rounding.
  std::uint64_t kept = 0, rest = 0;
  bool lost = false;
  if (shift < 64) {
    kept = u.significand >> shift;
    rest = shift == 0 ? 0 : u.significand << (64 - shift);
  } else if (shift < 128) {
    rest = shift == 64 ? u.significand : u.significand >> (shift - 64);
    lost = shift > 64 && (u.significand << (128 - shift)) != 0;
  } else {
    lost = true;
  }
  // 7. Round; a carry out of the mantissa rolls into the exponent because they are added, not or-ed.
  const bool away = c.lowest_binade_rounds_away && u.exponent == f.min_exponent();
  const Rounding rounding = away ? (u.negative ? Rounding::toward_negative : Rounding::toward_positive) : c.rounding;
  kept += rounds_up(rounding, u.negative, (kept & 1) != 0, rest, lost, random_bits) ? 1 : 0;
  const std::int64_t field = exponent + f.bias;
  const auto magnitude = static_cast<std::uint64_t>((field - 1) * (std::int64_t{1} << f.mantissa_bits) +
                                                    static_cast<std::int64_t>(kept));
  // 8. Overflow, then pack with the sign.
  if (magnitude > f.max_finite_code()) return overflow_code(f, c, u.negative, false);
  return sign | magnitude;
}

KVQ_HD constexpr std::uint64_t convert(Format from, std::uint64_t code, Format to, const Conversion& c,
                                       std::uint32_t random_bits = 0) {
  return encode(to, c, unpack(from, code), random_bits);
}

// Widening into FP32/FP64 is exact for every format kvq models; NaN keeps sign and payload.
KVQ_HD constexpr std::uint64_t widen(Format from, std::uint64_t code, Format to) {
  return convert(from, code, to, Conversion{});
}

}  // namespace kvq
