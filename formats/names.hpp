// Names of formats, conventions and rounding modes, as the command line and reports spell them.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "formats/conventions.hpp"

namespace kvq {

inline constexpr std::array<std::string_view, kFormatCount> kFormatNames{
    "e2m1", "e4m3fn", "e5m2", "e8m0fnu", "bf16", "fp16", "fp32", "fp64", "int4", "int8", "e2m3", "e3m2", "int6"};
inline constexpr std::array<std::string_view, kFormatCount> kFormatSummaries{
    "s.ee.m, bias 1, max 6, no inf, no NaN",
    "s.eeee.mmm, bias 7, max 448, no inf, NaN = S.1111.111",
    "s.eeeee.mm, bias 15, max 57344, IEEE inf and NaN",
    "eeeeeeee, bias 127, 2^-127..2^127, unsigned, no zero, NaN = 0xFF",
    "s.8e.7m, bias 127, IEEE",
    "s.5e.10m, bias 15, IEEE",
    "s.8e.23m, bias 127, IEEE",
    "s.11e.52m, bias 1023, IEEE",
    "INT4 as k/4, k in -7..7 (s.e.mm, bias 1), sign-magnitude codes",
    "INT8 as k/64, k in -127..127 (s.e.mmmmmm, bias 1; OCP MXINT8), sign-magnitude codes",
    "s.ee.mmm, bias 1, max 7.5, no inf, no NaN (OCP FP6)",
    "s.eee.mm, bias 3, max 28, no inf, no NaN (OCP FP6)",
    "INT6 as k/16, k in -31..31 (s.e.mmmm, bias 1), sign-magnitude codes"};

inline constexpr std::array<std::string_view, kConventionCount> kConventionNames{
    "ieee", "cuda-satfinite", "cuda-nosat", "ml_dtypes", "torch", "ocp"};
inline constexpr std::array<std::string_view, kConventionCount> kConventionSummaries{
    "IEEE 754: overflow to inf (NaN where no inf), NaN keeps sign and payload",
    "CUDA 13 cuda_fp8.h/cuda_fp4.h intrinsics with __NV_SATFINITE",
    "CUDA 13 intrinsics with __NV_NOSAT (E2M1 always saturates)",
    "ml_dtypes 0.6 astype from float32",
    "PyTorch 2.11 eager Tensor.to() from float32",
    "OCP MX v1.0: RNE, saturating elements, E8M0 by floor"};

inline constexpr std::array<std::string_view, 7> kRoundingNames{"rne", "rz", "ru", "rd", "rna", "rs", "rnz"};

template <typename Id, std::size_t N>
constexpr std::optional<Id> id_from_name(const std::array<std::string_view, N>& names, std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<Id>(i);
  return std::nullopt;
}

inline std::optional<FormatId> format_from_name(std::string_view n) { return id_from_name<FormatId>(kFormatNames, n); }
inline std::optional<ConventionId> convention_from_name(std::string_view n) {
  return id_from_name<ConventionId>(kConventionNames, n);
}
inline std::optional<Rounding> rounding_from_name(std::string_view n) { return id_from_name<Rounding>(kRoundingNames, n); }

inline std::string_view name_of(FormatId id) { return kFormatNames[static_cast<int>(id)]; }
inline std::string_view name_of(ConventionId id) { return kConventionNames[static_cast<int>(id)]; }
inline std::string_view name_of(Rounding r) { return kRoundingNames[static_cast<int>(r)]; }

}  // namespace kvq
