// GPU format sweeps: device code only (kept small: nvcc is slow on CI's 2 cores).
#include <cuda_runtime.h>

#include <cstdio>

#include "formats/codec.hpp"
#include "formats/reciprocal.hpp"
#include "proptests/codec_runs.hpp"
#include "proptests/fast_path_cases.hpp"
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

// A sweep's mismatch: counted by the thread (local, added to the total once a thread), the first
// kKeep kept.
__device__ inline void record_mismatch(Counters* counters, std::uint32_t input, std::uint32_t expected,
                                       std::uint32_t actual, unsigned long long* local) {
  ++*local;
  const unsigned slot = atomicAdd(&counters->kept, 1u);
  if (slot < kKeep) counters->first[slot] = Mismatch{input, expected, actual};
}
// FP32 results equal bit for bit, or both NaN (payloads differ between model and instruction).
__device__ inline bool same_fp32(std::uint32_t a, std::uint32_t b) {
  return a == b || ((a & 0x7fffffffu) > 0x7f800000u && (b & 0x7fffffffu) > 0x7f800000u);
}

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
    if (expected != actual) record_mismatch(counters, bits, expected, actual, &local);
  }
  if (local) atomicAdd(&counters->mismatches, local);
}

template <props::FastPath kPath>
__global__ void fast_path_sweep_kernel(Counters* counters) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < (1ull << 32);
       i += stride) {
    const auto bits = static_cast<std::uint32_t>(i);
    const std::uint32_t expected = props::fast_path_reference(kPath, bits);
    const std::uint32_t actual = props::fast_path_result(kPath, bits);
    if (!props::fast_path_agrees(kPath, actual, expected)) record_mismatch(counters, bits, expected, actual, &local);
  }
  if (local) atomicAdd(&counters->mismatches, local);
}

cudaError_t launch_fast_path(int which, Counters* counters, int blocks) {
  using props::FastPath;
  switch (static_cast<FastPath>(which)) {
#define KVQ_FAST_CASE(name) \
  case FastPath::name: fast_path_sweep_kernel<FastPath::name><<<blocks, 256>>>(counters); return cudaGetLastError();
    KVQ_FAST_CASE(e2m1_rne)
    KVQ_FAST_CASE(e2m1_rna)
    KVQ_FAST_CASE(e4m3_satfinite)
    KVQ_FAST_CASE(bf16_rne)
    KVQ_FAST_CASE(fp16_rne)
    KVQ_FAST_CASE(e2m1_value)
    KVQ_FAST_CASE(e4m3_value)
    KVQ_FAST_CASE(int4_rne)
    KVQ_FAST_CASE(int8_rne)
    KVQ_FAST_CASE(int4_value)
    KVQ_FAST_CASE(int8_value)
    KVQ_FAST_CASE(e4m3_from_fp64)
    KVQ_FAST_CASE(e4m3_from_fp64_sticky)
    KVQ_FAST_CASE(e2m1_magic)
    KVQ_FAST_CASE(int4_magic)
    KVQ_FAST_CASE(e2m1_divide_a)
    KVQ_FAST_CASE(e2m1_divide_b)
    KVQ_FAST_CASE(bf16x2_rne_finite)
    KVQ_FAST_CASE(fp16x2_rne_finite)
    KVQ_FAST_CASE(e4m3x2_of_products)
    KVQ_FAST_CASE(e4m3x4_satfinite)
    KVQ_FAST_CASE(e2m1_magic_away)
    KVQ_FAST_CASE(e2m1_magic_below_7)
    KVQ_FAST_CASE(e2m1_magic_to_4_5)
    KVQ_FAST_CASE(scale_quotient_a)
    KVQ_FAST_CASE(scale_quotient_b)
    KVQ_FAST_CASE(code_terms)
    KVQ_FAST_CASE(e2m1_round_below_7)
    KVQ_FAST_CASE(bf16x2_max_magnitude)
    KVQ_FAST_CASE(pair_sign_nibbles)
    KVQ_FAST_CASE(fp16x2_max_magnitude)
    KVQ_FAST_CASE(e4m3_nonsaturating)
    KVQ_FAST_CASE(e2m1_magic_toward_zero)
    KVQ_FAST_CASE(e4m3_tensor_quotient_a)
    KVQ_FAST_CASE(e4m3_tensor_quotient_b)
#undef KVQ_FAST_CASE
    static_assert(props::kFastPathCount == 35, "one KVQ_FAST_CASE line per fast path");
  }
  return cudaErrorInvalidValue;
}

__global__ void rcp_sweep_kernel(const std::uint8_t* table, Counters* counters) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < (1ull << 32);
       i += stride) {
    const auto bits = static_cast<std::uint32_t>(i);
    const std::uint32_t expected = __float_as_uint(rcp_approx_ftz(as_float(bits)));  // the instruction
    const std::uint32_t actual = __float_as_uint(rcp_approx_ftz_with(table, as_float(bits)));
    if (!same_fp32(expected, actual)) record_mismatch(counters, bits, expected, actual, &local);
  }
  if (local) atomicAdd(&counters->mismatches, local);
}

// div.full.f32 (the instruction) against kvq's model, one pair per divisor bit pattern y: the
// dividend's bits are mix32(y), so every exponent pairing occurs (docs/recipes.md "Engine arithmetic").
__global__ void div_full_sweep_kernel(const std::uint8_t* table, Counters* counters) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < (1ull << 32);
       i += stride) {
    const auto bits = static_cast<std::uint32_t>(i);
    const float x = as_float(props::mix32(bits)), y = as_float(bits);
    const std::uint32_t expected = __float_as_uint(div_full(x, y));  // the instruction
    const std::uint32_t actual = __float_as_uint(div_full_with(table, x, y));
    if (!same_fp32(expected, actual)) record_mismatch(counters, bits, expected, actual, &local);
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

// The device codec against the host's expected runs (proptests/codec_runs.hpp): a thread takes 16
// consecutive inputs, finds their first run among its tile's, and walks the runs forward; stochastic
// rounding draws the tile's random bits (`tile_random_bits`), as the host's runs did.
constexpr int kRunSpan = 16;
__global__ void runs_sweep_kernel(Format f, Conversion c, const std::uint32_t* starts, const std::uint16_t* codes,
                                  std::uint32_t runs, const std::uint32_t* tile_first, int tile_bits, Counters* counters) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::uint64_t q = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; q < (1ull << 32) / kRunSpan;
       q += stride) {
    const auto first = static_cast<std::uint32_t>(q * kRunSpan);
    std::uint32_t lo = tile_first[first >> tile_bits], hi = tile_first[(first >> tile_bits) + 1];
    while (lo < hi) {  // the last run starting at or before `first`
      const std::uint32_t mid = lo + (hi - lo + 1) / 2;
      if (starts[mid] <= first) lo = mid; else hi = mid - 1;
    }
    std::uint32_t run = lo;
    for (int i = 0; i < kRunSpan; ++i) {
      const std::uint32_t bits = first + i;
      while (run + 1 < runs && starts[run + 1] <= bits) ++run;
      const std::uint32_t expected = codes[run];
      const std::uint32_t random_bits = c.rounding == Rounding::stochastic ? props::tile_random_bits(bits) : 0;
      const auto actual = static_cast<std::uint32_t>(encode(f, c, unpack(kFP32, bits), random_bits));
      if (expected != actual) record_mismatch(counters, bits, expected, actual, &local);
    }
  }
  if (local) atomicAdd(&counters->mismatches, local);
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

namespace {

// Runs launch(counters) once over all 2^32 inputs, timed with events; collects the counters.
template <typename Launch>
SweepResult counted_sweep(const char* what, Launch&& launch) {
  Counters* counters = nullptr;
  cudaError_t e = cudaMalloc(&counters, sizeof(Counters));
  if (e == cudaSuccess) e = cudaMemset(counters, 0, sizeof(Counters));
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  if (e == cudaSuccess) e = launch(counters);
  cudaEventRecord(stop);
  if (e == cudaSuccess) e = cudaEventSynchronize(stop);
  Counters host{};
  if (e == cudaSuccess) e = cudaMemcpy(&host, counters, sizeof host, cudaMemcpyDeviceToHost);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(counters);
  if (e != cudaSuccess) return SweepResult{error_text(what, e)};
  SweepResult r;
  r.inputs = std::uint64_t{1} << 32;
  r.mismatches = host.mismatches;
  for (unsigned i = 0; i < host.kept && i < kKeep; ++i) r.first.push_back(host.first[i]);
  r.milliseconds = ms;
  return r;
}

}  // namespace

SweepResult sweep_intrinsic(int intrinsic) {
  // Warm-up on a slice first: module load stays out of the timing.
  SweepResult warm = counted_sweep("intrinsic sweep", [&](Counters* c) {
    return launch_by_index(intrinsic, 0, 1u << 20, c, sweep_blocks());
  });
  if (!warm.error.empty()) return warm;
  return counted_sweep("intrinsic sweep", [&](Counters* c) {
    return launch_by_index(intrinsic, 0, std::uint64_t{1} << 32, c, sweep_blocks());
  });
}

SweepResult sweep_runs(Format f, const Conversion& c, const std::uint32_t* starts, const std::uint16_t* codes,
                       std::uint32_t runs, const std::uint32_t* tile_first, int tile_bits) {
  if (runs == 0 || starts[0] != 0) return SweepResult{"runs must start at input 0"};
  const std::size_t tiles = (std::size_t{1} << (32 - tile_bits)) + 1;
  std::uint32_t* d_starts = nullptr;
  std::uint16_t* d_codes = nullptr;
  std::uint32_t* d_tiles = nullptr;
  cudaError_t e = cudaMalloc(&d_starts, sizeof(std::uint32_t) * runs);
  if (e == cudaSuccess) e = cudaMalloc(&d_codes, sizeof(std::uint16_t) * runs);
  if (e == cudaSuccess) e = cudaMalloc(&d_tiles, sizeof(std::uint32_t) * tiles);
  if (e == cudaSuccess) e = cudaMemcpy(d_starts, starts, sizeof(std::uint32_t) * runs, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(d_codes, codes, sizeof(std::uint16_t) * runs, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(d_tiles, tile_first, sizeof(std::uint32_t) * tiles, cudaMemcpyHostToDevice);
  SweepResult r = e != cudaSuccess ? SweepResult{error_text("expected runs", e)}
                                   : counted_sweep("runs sweep", [&](Counters* counters) {
                                       runs_sweep_kernel<<<sweep_blocks(), 256>>>(f, c, d_starts, d_codes, runs, d_tiles,
                                                                                   tile_bits, counters);
                                       return cudaGetLastError();
                                     });
  cudaFree(d_starts);
  cudaFree(d_codes);
  cudaFree(d_tiles);
  return r;
}

SweepResult sweep_fast_path(int which) {
  return counted_sweep("fast-path sweep", [&](Counters* c) { return launch_fast_path(which, c, sweep_blocks()); });
}

// A sweep kernel that reads rcp.approx's table (2^20 bytes), run with a device copy of it.
template <typename Kernel>
SweepResult sweep_with_table(const char* what, const std::uint8_t* table, std::size_t table_bytes, Kernel kernel) {
  if (table_bytes != (std::size_t{1} << 20)) return SweepResult{"the reciprocal table must hold 2^20 bytes"};
  std::uint8_t* device_table = nullptr;
  cudaError_t e = cudaMalloc(&device_table, table_bytes);
  if (e == cudaSuccess) e = cudaMemcpy(device_table, table, table_bytes, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    cudaFree(device_table);
    return SweepResult{error_text("rcp.approx table", e)};
  }
  SweepResult r = counted_sweep(what, [&](Counters* c) {
    kernel<<<sweep_blocks(), 256>>>(device_table, c);
    return cudaGetLastError();
  });
  cudaFree(device_table);
  return r;
}

SweepResult sweep_rcp_approx(const std::uint8_t* table, std::size_t table_bytes) {
  return sweep_with_table("rcp.approx sweep", table, table_bytes, rcp_sweep_kernel);
}

SweepResult sweep_div_full(const std::uint8_t* table, std::size_t table_bytes) {
  return sweep_with_table("div.full sweep", table, table_bytes, div_full_sweep_kernel);
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
