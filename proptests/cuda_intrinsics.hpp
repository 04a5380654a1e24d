// The CUDA 13 conversion intrinsics (cuda_fp8.h, cuda_fp4.h) themselves,
// callable from host code (the headers' software path) and device code
// (hardware cvt where sm_90 has it). Compiled only where the CUDA headers exist.
#pragma once

#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "proptests/cuda_intrinsic_models.hpp"

namespace kvq::props {

// The intrinsic itself.
KVQ_HD inline std::uint8_t call_intrinsic(CudaIntrinsic i, float x) {
  switch (i) {
    case CudaIntrinsic::e4m3_satfinite: return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    case CudaIntrinsic::e4m3_nosat: return __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3);
    case CudaIntrinsic::e5m2_satfinite: return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
    case CudaIntrinsic::e5m2_nosat: return __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
    case CudaIntrinsic::e2m1_rn: return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest);
    case CudaIntrinsic::e2m1_rz: return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundZero);
    case CudaIntrinsic::e8m0_rz_satfinite: return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero);
    case CudaIntrinsic::e8m0_ru_satfinite: return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);
    case CudaIntrinsic::e8m0_rz_nosat: return __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundZero);
    case CudaIntrinsic::e8m0_ru_nosat: return __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf);
  }
  return 0;
}

}  // namespace kvq::props
