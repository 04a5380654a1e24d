// The CUDA conversion intrinsics that the cuda-* conventions model, as data: which
// format, convention and rounding each one is. No CUDA include, so host-only code can use it.
#pragma once

#include <cstdint>

#include "formats/conventions.hpp"

namespace kvq::props {

enum class CudaIntrinsic : std::uint8_t {
  e4m3_satfinite, e4m3_nosat, e5m2_satfinite, e5m2_nosat,
  e2m1_rn, e2m1_rz,  // cuda_fp4.hpp accepts only cudaRoundNearest and cudaRoundZero
  e8m0_rz_satfinite, e8m0_ru_satfinite, e8m0_rz_nosat, e8m0_ru_nosat,
};
inline constexpr int kCudaIntrinsicCount = 10;

struct IntrinsicModel {
  const char* name;       // as in reports: "__nv_cvt_float_to_fp8(E4M3, SATFINITE)"
  FormatId format;
  ConventionId convention;
  Rounding rounding;
};

KVQ_HD constexpr IntrinsicModel model_of(CudaIntrinsic i) {
  constexpr auto sat = ConventionId::cuda_satfinite;
  constexpr auto nosat = ConventionId::cuda_nosat;
  switch (i) {
    case CudaIntrinsic::e4m3_satfinite: return {"fp8-e4m3-satfinite", FormatId::e4m3fn, sat, Rounding::nearest_even};
    case CudaIntrinsic::e4m3_nosat: return {"fp8-e4m3-nosat", FormatId::e4m3fn, nosat, Rounding::nearest_even};
    case CudaIntrinsic::e5m2_satfinite: return {"fp8-e5m2-satfinite", FormatId::e5m2, sat, Rounding::nearest_even};
    case CudaIntrinsic::e5m2_nosat: return {"fp8-e5m2-nosat", FormatId::e5m2, nosat, Rounding::nearest_even};
    case CudaIntrinsic::e2m1_rn: return {"fp4-e2m1-rn", FormatId::e2m1, sat, Rounding::nearest_even};
    case CudaIntrinsic::e2m1_rz: return {"fp4-e2m1-rz", FormatId::e2m1, sat, Rounding::toward_zero};
    case CudaIntrinsic::e8m0_rz_satfinite: return {"e8m0-rz-satfinite", FormatId::e8m0fnu, sat, Rounding::toward_zero};
    case CudaIntrinsic::e8m0_ru_satfinite: return {"e8m0-ru-satfinite", FormatId::e8m0fnu, sat, Rounding::toward_positive};
    case CudaIntrinsic::e8m0_rz_nosat: return {"e8m0-rz-nosat", FormatId::e8m0fnu, nosat, Rounding::toward_zero};
    case CudaIntrinsic::e8m0_ru_nosat: return {"e8m0-ru-nosat", FormatId::e8m0fnu, nosat, Rounding::toward_positive};
  }
  return {"?", FormatId::fp32, ConventionId::ieee, Rounding::nearest_even};
}

}  // namespace kvq::props
