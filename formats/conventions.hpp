// Named conventions: how each real library converts FP32 into each small format
// (docs/formats.md). A convention is data: one Conversion per format.
#pragma once

#include <cstdint>

#include "formats/codec.hpp"

namespace kvq {

// Element formats take the next ids (a plug-in or file may hold one); e2m3, e3m2 and int6 are the
// OCP FP6 elements and INT6, which no engine stores but the INT-vs-FP study compares.
enum class FormatId : std::uint8_t { e2m1, e4m3fn, e5m2, e8m0fnu, bf16, fp16, fp32, fp64, int4, int8, e2m3, e3m2, int6 };
inline constexpr int kFormatCount = 13;

KVQ_HD constexpr Format format_of(FormatId id) {
  switch (id) {
    case FormatId::e2m1: return kE2M1;
    case FormatId::e4m3fn: return kE4M3FN;
    case FormatId::e5m2: return kE5M2;
    case FormatId::e8m0fnu: return kE8M0FNU;
    case FormatId::bf16: return kBF16;
    case FormatId::fp16: return kFP16;
    case FormatId::fp32: return kFP32;
    case FormatId::fp64: return kFP64;
    case FormatId::int4: return kINT4;
    case FormatId::int8: return kINT8;
    case FormatId::e2m3: return kE2M3;
    case FormatId::e3m2: return kE3M2;
    case FormatId::int6: return kINT6;
  }
  return kFP32;
}

enum class ConventionId : std::uint8_t { ieee, cuda_satfinite, cuda_nosat, ml_dtypes, torch, ocp };
inline constexpr int kConventionCount = 6;

// Rounding modes a convention accepts, as a bit set over Rounding.
KVQ_HD constexpr std::uint8_t rounding_bit(Rounding r) { return std::uint8_t(1u << static_cast<int>(r)); }
inline constexpr std::uint8_t kOnlyNearestEven = 1u << static_cast<int>(Rounding::nearest_even);
inline constexpr std::uint8_t kZeroOrUp =
    (1u << static_cast<int>(Rounding::toward_zero)) | (1u << static_cast<int>(Rounding::toward_positive));
inline constexpr std::uint8_t kNearestOrZero = kOnlyNearestEven | (1u << static_cast<int>(Rounding::toward_zero));
inline constexpr std::uint8_t kAnyRounding = 0x3F;

// One convention's rule for one format. allowed == 0: the library has no such cast.
struct ConventionRule {
  std::uint8_t allowed = 0;
  Conversion conversion{};  // its rounding is the default
};

namespace conventions_detail {
KVQ_HD constexpr ConventionRule rule(std::uint8_t allowed, Rounding r, Overflow o, NanRule n,
                                     UnsignedRule u = UnsignedRule::absolute) {
  return ConventionRule{allowed, Conversion{r, o, n, u, false}};
}
}  // namespace conventions_detail

KVQ_HD constexpr ConventionRule convention_rule(ConventionId c, FormatId f) {
  using conventions_detail::rule;
  constexpr auto rne = Rounding::nearest_even;
  constexpr auto rz = Rounding::toward_zero;
  constexpr auto sat = Overflow::saturate;
  constexpr auto ieee = Overflow::ieee;
  const bool wide = f == FormatId::bf16 || f == FormatId::fp16 || f == FormatId::fp32 || f == FormatId::fp64;
  switch (c) {
    case ConventionId::ieee:  // IEEE 754 semantics, every rounding; the default for the wide formats
      if (f == FormatId::e2m1 || f == FormatId::e2m3 || f == FormatId::e3m2)  // OCP FP4/FP6: no inf, no NaN
        return rule(kAnyRounding, rne, ieee, NanRule::max_keep_sign);
      return rule(kAnyRounding, rne, ieee, NanRule::payload_keep_sign);
    case ConventionId::cuda_satfinite:  // cuda_fp8.h / cuda_fp4.h with __NV_SATFINITE
    case ConventionId::cuda_nosat: {    // ... with __NV_NOSAT (E2M1 has no such flag: always saturates)
      const Overflow o = c == ConventionId::cuda_satfinite ? sat : ieee;
      switch (f) {
        case FormatId::e2m1: return rule(kNearestOrZero, rne, sat, NanRule::max_positive);  // cuda_fp4.hpp asserts rn|rz
        case FormatId::e4m3fn:
        case FormatId::e5m2: return rule(kOnlyNearestEven, rne, o, NanRule::all_ones_positive);
        case FormatId::e8m0fnu: return rule(kZeroOrUp, rz, o, NanRule::all_ones_positive);
        default: return {};
      }
    }
    case ConventionId::ml_dtypes:  // ml_dtypes 0.6 astype from float32
      switch (f) {
        case FormatId::e2m1: return rule(kOnlyNearestEven, rne, sat, NanRule::zero_flipped_sign);
        case FormatId::e4m3fn: return rule(kOnlyNearestEven, rne, ieee, NanRule::all_ones_keep_sign);
        case FormatId::e5m2: return rule(kOnlyNearestEven, rne, ieee, NanRule::quiet_keep_sign);
        case FormatId::e8m0fnu: {
          ConventionRule r =
              rule(kOnlyNearestEven, rne, ieee, NanRule::all_ones_keep_sign, UnsignedRule::nonpositive_is_nan);
          r.conversion.lowest_binade_rounds_away = true;  // measured: 0x00400001 -> 0x01
          return r;
        }
        default: return {};
      }
    case ConventionId::torch:  // PyTorch 2.11 eager Tensor.to(dtype) from float32, CPU and CUDA alike
      switch (f) {
        case FormatId::e4m3fn:
        case FormatId::e5m2: return rule(kOnlyNearestEven, rne, ieee, NanRule::all_ones_keep_sign);
        case FormatId::e8m0fnu: {
          ConventionRule r = rule(kOnlyNearestEven, rne, ieee, NanRule::all_ones_keep_sign);
          r.conversion.lowest_binade_rounds_away = true;  // measured on an H100: |x| 0x00400001 -> 0x01
          return r;
        }
        default: return {};  // no e2m1 cast in PyTorch
      }
    case ConventionId::ocp:  // OCP MX v1.0: RNE, saturating elements; E8M0 scale by floor
      if (wide) return {};
      if (f == FormatId::e8m0fnu) return rule(kZeroOrUp, rz, sat, NanRule::all_ones_keep_sign);
      return rule(kOnlyNearestEven, rne, sat, f == FormatId::e2m1 ? NanRule::max_keep_sign : NanRule::all_ones_keep_sign);
  }
  return {};
}

KVQ_HD constexpr bool convention_has(ConventionId c, FormatId f) { return convention_rule(c, f).allowed != 0; }

// The Conversion a convention applies with rounding r (callers check the rounding is allowed).
KVQ_HD constexpr Conversion convention_conversion(ConventionId c, FormatId f, Rounding r) {
  Conversion conv = convention_rule(c, f).conversion;
  conv.rounding = r;
  return conv;
}

}  // namespace kvq
