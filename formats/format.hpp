// Format descriptors: every limit of a binary floating-point format derived from
// one description, the way CUTLASS and ml_dtypes describe theirs.
#pragma once

#include <compare>
#include <cstdint>

#include "formats/host_device.hpp"

namespace kvq {

// What a format does with its top codes.
enum class Specials : std::uint8_t {
  ieee,          // exponent field all ones: mantissa 0 is inf, else NaN
  nan_all_ones,  // no inf; only the all-ones magnitude is NaN (E4M3FN 0x7F, E8M0FNU 0xFF)
  none,          // every code is a finite number (E2M1)
};

// A binary floating-point format. Codes are the raw bits, right-aligned.
// Structural (all public, no pointers), so it can be a template argument.
struct Format {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  Specials specials;
  bool is_signed;
  bool has_zero;  // false: exponent field 0 is the lowest normal binade, no zero, no subnormals (E8M0FNU)

  KVQ_HD constexpr int bits() const { return (is_signed ? 1 : 0) + exponent_bits + mantissa_bits; }
  KVQ_HD constexpr std::uint64_t sign_bit() const {
    return is_signed ? std::uint64_t{1} << (exponent_bits + mantissa_bits) : 0;
  }
  KVQ_HD constexpr std::uint64_t magnitude_mask() const {
    return (std::uint64_t{1} << (exponent_bits + mantissa_bits)) - 1;
  }
  KVQ_HD constexpr std::uint64_t mantissa_mask() const { return (std::uint64_t{1} << mantissa_bits) - 1; }
  KVQ_HD constexpr std::uint64_t exponent_field_max() const { return (std::uint64_t{1} << exponent_bits) - 1; }

  // Unbiased exponent of the lowest normal binade (subnormals share it).
  KVQ_HD constexpr int min_exponent() const { return (has_zero ? 1 : 0) - bias; }

  // Magnitude code of the largest finite value.
  KVQ_HD constexpr std::uint64_t max_finite_code() const {
    switch (specials) {
      case Specials::ieee: return ((exponent_field_max() - 1) << mantissa_bits) | mantissa_mask();
      case Specials::nan_all_ones: return magnitude_mask() - 1;
      case Specials::none: return magnitude_mask();
    }
    return 0;
  }
  KVQ_HD constexpr bool has_nan() const { return specials != Specials::none; }
  KVQ_HD constexpr bool has_inf() const { return specials == Specials::ieee; }
  KVQ_HD constexpr std::uint64_t inf_code() const { return exponent_field_max() << mantissa_bits; }

  KVQ_HD constexpr bool is_nan(std::uint64_t code) const {
    const std::uint64_t mag = code & magnitude_mask();
    switch (specials) {
      case Specials::ieee: return (mag >> mantissa_bits) == exponent_field_max() && (mag & mantissa_mask()) != 0;
      case Specials::nan_all_ones: return mag == magnitude_mask();
      case Specials::none: return false;
    }
    return false;
  }
  KVQ_HD constexpr bool is_inf(std::uint64_t code) const {
    return has_inf() && (code & magnitude_mask()) == inf_code();
  }
  KVQ_HD constexpr std::uint64_t code_count() const {  // formats of at most 32 bits (FP64: 2^64 does not fit)
    return bits() < 64 ? std::uint64_t{1} << bits() : 0;
  }

  friend constexpr auto operator<=>(const Format&, const Format&) = default;  // a map key for per-format caches
};

//                                       e   m  bias  specials                signed has_zero
inline constexpr Format kE2M1{           2,  1,    1, Specials::none,         true,  true};   // s.ee.m, max 6, no inf/NaN
inline constexpr Format kE4M3FN{         4,  3,    7, Specials::nan_all_ones, true,  true};   // s.eeee.mmm, max 448, NaN 0x7F/0xFF
inline constexpr Format kE5M2{           5,  2,   15, Specials::ieee,         true,  true};   // s.eeeee.mm, max 57344, IEEE inf/NaN
inline constexpr Format kE8M0FNU{        8,  0,  127, Specials::nan_all_ones, false, false};  // eeeeeeee, 2^-127..2^127, NaN 0xFF
inline constexpr Format kBF16{           8,  7,  127, Specials::ieee,         true,  true};
inline constexpr Format kFP16{           5, 10,   15, Specials::ieee,         true,  true};
inline constexpr Format kFP32{           8, 23,  127, Specials::ieee,         true,  true};
inline constexpr Format kFP64{          11, 52, 1023, Specials::ieee,         true,  true};
// INT elements of the MX/NV INT recipes as the float formats with exactly their values: INTb with
// value k * 2^-(b-2), |k| <= 2^(b-1) - 1, is E1M(b-2) bias 1 (field 0 holds k < 2^(b-2), field 1 the
// rest). Codes are sign-magnitude (two's complement: packing.hpp); RNE on this grid is ties-to-even k.
inline constexpr Format kINT4{           1,  2,    1, Specials::none,         true,  true};   // k/4, |k| <= 7
inline constexpr Format kINT8{           1,  6,    1, Specials::none,         true,  true};   // k/64, |k| <= 127 (OCP MXINT8)
inline constexpr Format kE2M3{           2,  3,    1, Specials::none,         true,  true};   // s.ee.mmm, max 7.5 (OCP FP6)
inline constexpr Format kE3M2{           3,  2,    3, Specials::none,         true,  true};   // s.eee.mm, max 28 (OCP FP6)
inline constexpr Format kINT6{           1,  4,    1, Specials::none,         true,  true};   // k/16, |k| <= 31 (INT6 as E1M4)

// The exact value of a finite code, by the textbook formula (constexpr, so the
// limits below are pinned at compile time). NaN and inf are not finite codes.
KVQ_HD constexpr double finite_value(Format f, std::uint64_t code) {
  const std::uint64_t mag = code & f.magnitude_mask();
  const auto field = static_cast<int>(mag >> f.mantissa_bits);
  const std::uint64_t mantissa = mag & f.mantissa_mask();
  const bool subnormal = f.has_zero && field == 0;
  double significand = static_cast<double>(subnormal ? mantissa : (mantissa | (std::uint64_t{1} << f.mantissa_bits)));
  int exponent = (subnormal ? 1 : field) - f.bias - f.mantissa_bits;
  for (; exponent > 0; --exponent) significand *= 2.0;
  for (; exponent < 0; ++exponent) significand *= 0.5;
  return (code & f.sign_bit()) ? -significand : significand;
}

KVQ_HD constexpr double max_finite(Format f) { return finite_value(f, f.max_finite_code()); }
KVQ_HD constexpr double min_normal(Format f) {
  return finite_value(f, f.has_zero ? std::uint64_t{1} << f.mantissa_bits : 0);
}
KVQ_HD constexpr double min_subnormal(Format f) { return finite_value(f, f.has_zero ? 1 : 0); }

static_assert(kE2M1.bits() == 4 && kE4M3FN.bits() == 8 && kE5M2.bits() == 8 && kE8M0FNU.bits() == 8);
static_assert(kBF16.bits() == 16 && kFP16.bits() == 16 && kFP32.bits() == 32 && kFP64.bits() == 64);
static_assert(max_finite(kE2M1) == 6.0 && kE2M1.max_finite_code() == 0b0'11'1);
static_assert(min_normal(kE2M1) == 1.0 && min_subnormal(kE2M1) == 0.5);
static_assert(max_finite(kE4M3FN) == 448.0 && kE4M3FN.max_finite_code() == 0b0'1111'110);
static_assert(min_normal(kE4M3FN) == 0x1p-6 && min_subnormal(kE4M3FN) == 0x1p-9);
static_assert(max_finite(kE5M2) == 57344.0 && min_normal(kE5M2) == 0x1p-14 && min_subnormal(kE5M2) == 0x1p-16);
static_assert(max_finite(kE8M0FNU) == 0x1p127 && kE8M0FNU.max_finite_code() == 0xFE);
static_assert(min_normal(kE8M0FNU) == 0x1p-127 && kE8M0FNU.is_nan(0xFF));
static_assert(max_finite(kBF16) == 0x1.FEp127 && max_finite(kFP16) == 65504.0);
static_assert(min_subnormal(kFP32) == 0x1p-149 && max_finite(kFP32) == 0x1.FFFFFEp127);
static_assert(kE4M3FN.is_nan(0x7F) && kE4M3FN.is_nan(0xFF) && !kE4M3FN.is_nan(0x7E));
static_assert(max_finite(kINT4) == 1.75 && min_subnormal(kINT4) == 0.25 && min_normal(kINT4) == 1.0);
static_assert(max_finite(kE2M3) == 7.5 && max_finite(kE3M2) == 28.0 && max_finite(kINT6) == 31.0 / 16);
static_assert(min_subnormal(kE2M3) == 0.125 && min_subnormal(kE3M2) == 0.0625 && min_subnormal(kINT6) == 1.0 / 16);
static_assert(max_finite(kINT8) == 127.0 / 64 && min_subnormal(kINT8) == 1.0 / 64 && kINT8.max_finite_code() == 0x7F);
static_assert(kE5M2.is_inf(0x7C) && kE5M2.is_nan(0x7D) && kE5M2.is_inf(0xFC));

}  // namespace kvq
