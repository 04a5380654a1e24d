// GPU format sweeps: device code only (kept small: nvcc is slow on CI's 2 cores).
#include <cuda_runtime.h>

#include <cstdio>

#include "formats/codec.hpp"
#include "proptests/cuda_intrinsics.hpp"
#include "proptests/gpu/format_sweeps.hpp"
#include "proptests/harness/mix32.hpp"

namespace kvq::gpu {
namespace {

constexpr int kKeep = 8;

struct Counters {
  unsigned long long mismatches;
  unsigned int kept;
  Mismatch first[kKeep];
};

__device__ inline float as_float(std::uint32_t b) { return __uint_as_float(b); }

template <props::CudaIntrinsic kWhich>
__global__ void intrinsic_sweep_kernel(std::uint64_t begin, std::uint64_t count, Counters* counters) {
  constexpr props::IntrinsicModel m = props::model_of(kWhich);
  constexpr Format f = format_of(m.format);
  constexpr Conversion c = convention_conversion(m.convention, m.format, m.rounding);
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < count; i += stride) {
    const auto bits = static_cast<std::uint32_t>(begin + i);
    const std::uint32_t expected = props::call_intrinsic(kWhich, as_float(bits));
    const auto actual = static_cast<std::uint32_t>(encode(f, c, unpack(kFP32, bits)));
    if (expected != actual) {
      ++local;
      const unsigned slot = atomicAdd(&counters->kept, 1u);
      if (slot < kKeep) counters->first[slot] = Mismatch{bits, expected, actual};
    }
  }
  if (local) atomicAdd(&counters->mismatches, local);
}

__global__ void codes_kernel(Format f, Conversion c, std::uint64_t begin, std::uint32_t count, std::uint16_t* out) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < count; i += stride) {
    const auto bits = static_cast<std::uint32_t>(begin + i);
    const std::uint32_t rbits = c.rounding == Rounding::stochastic ? props::mix32(bits) : 0;
    out[i] = static_cast<std::uint16_t>(encode(f, c, unpack(kFP32, bits), rbits));
  }
}

template <props::CudaIntrinsic kWhich>
cudaError_t launch_intrinsic_sweep(std::uint64_t begin, std::uint64_t count, Counters* counters, int blocks) {
  intrinsic_sweep_kernel<kWhich><<<blocks, 256>>>(begin, count, counters);
  return cudaGetLastError();
}

cudaError_t launch_by_index(int which, std::uint64_t begin, std::uint64_t count, Counters* counters, int blocks) {
  using props::CudaIntrinsic;
  switch (static_cast<CudaIntrinsic>(which)) {
#define KVQ_SWEEP_CASE(name) \
  case CudaIntrinsic::name: return launch_intrinsic_sweep<CudaIntrinsic::name>(begin, count, counters, blocks);
    KVQ_SWEEP_CASE(e4m3_satfinite)
    KVQ_SWEEP_CASE(e4m3_nosat)
    KVQ_SWEEP_CASE(e5m2_satfinite)
    KVQ_SWEEP_CASE(e5m2_nosat)
    KVQ_SWEEP_CASE(e2m1_rn)
    KVQ_SWEEP_CASE(e2m1_rz)
    KVQ_SWEEP_CASE(e8m0_rz_satfinite)
    KVQ_SWEEP_CASE(e8m0_ru_satfinite)
    KVQ_SWEEP_CASE(e8m0_rz_nosat)
    KVQ_SWEEP_CASE(e8m0_ru_nosat)
#undef KVQ_SWEEP_CASE
  }
  return cudaErrorInvalidValue;
}

int sweep_blocks() {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return (sms > 0 ? sms : 1) * 8;
}

std::string error_text(const char* what, cudaError_t e) { return std::string(what) + ": " + cudaGetErrorString(e); }

}  // namespace

DeviceInfo device_info() {
  DeviceInfo info;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    info.why = std::string("no CUDA device: ") + cudaGetErrorString(e);
    return info;
  }
  if (count == 0) {
    info.why = "no CUDA device";
    return info;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  info.available = true;
  info.name = prop.name;
  info.compute_capability = prop.major * 10 + prop.minor;
  return info;
}

SweepResult sweep_intrinsic(int intrinsic) {
  SweepResult r;
  Counters* counters = nullptr;
  cudaEvent_t start, stop;
  cudaError_t e = cudaMalloc(&counters, sizeof(Counters));
  if (e != cudaSuccess) return SweepResult{error_text("cudaMalloc", e)};
  cudaMemset(counters, 0, sizeof(Counters));
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const int blocks = sweep_blocks();
  const std::uint64_t all = std::uint64_t{1} << 32;
  e = launch_by_index(intrinsic, 0, 1u << 20, counters, blocks);  // warm-up: module load stays out of the timing
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemset(counters, 0, sizeof(Counters));
  cudaEventRecord(start);
  if (e == cudaSuccess) e = launch_by_index(intrinsic, 0, all, counters, blocks);
  cudaEventRecord(stop);
  if (e == cudaSuccess) e = cudaEventSynchronize(stop);
  Counters host{};
  if (e == cudaSuccess) e = cudaMemcpy(&host, counters, sizeof host, cudaMemcpyDeviceToHost);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(counters);
  if (e != cudaSuccess) return SweepResult{error_text("intrinsic sweep", e)};
  r.inputs = all;
  r.mismatches = host.mismatches;
  for (unsigned i = 0; i < host.kept && i < kKeep; ++i) r.first.push_back(host.first[i]);
  r.milliseconds = ms;
  return r;
}

std::string device_codes(Format f, const Conversion& c, std::uint64_t begin, std::uint32_t count,
                         std::uint16_t* codes, double* milliseconds) {
  std::uint16_t* out = nullptr;
  cudaError_t e = cudaMalloc(&out, sizeof(std::uint16_t) * count);
  if (e != cudaSuccess) return error_text("cudaMalloc", e);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  codes_kernel<<<sweep_blocks(), 256>>>(f, c, begin, count, out);
  e = cudaGetLastError();
  cudaEventRecord(stop);
  if (e == cudaSuccess) e = cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  *milliseconds = ms;
  if (e == cudaSuccess) e = cudaMemcpy(codes, out, sizeof(std::uint16_t) * count, cudaMemcpyDeviceToHost);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(out);
  return e == cudaSuccess ? std::string() : error_text("device codes", e);
}

}  // namespace kvq::gpu
