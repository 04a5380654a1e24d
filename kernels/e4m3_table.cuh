// The E4M3 scale table of the lean two-level plans (formats/packed_quantize.hpp: e4m3_table) for
// the kernels (nvcc only): a compile-time __constant__ copy, which each thread block copies into
// shared memory once (a plan reads it at a per-thread index; constant memory serialises those).
#pragma once

#include "formats/packed_quantize.hpp"

namespace kvq::kernels {

__constant__ constexpr E4m3Table kDeviceE4m3Table = e4m3_table();

// Every thread of the block takes part, which has kE4m3Codes threads or more (the kernels'
// kThreads, static_assert there): one entry a thread. Returns the shared copy, after a barrier.
__device__ inline const float* shared_e4m3_table(float* shared) {
  if (threadIdx.x < kE4m3Codes) shared[threadIdx.x] = kDeviceE4m3Table.reciprocal[threadIdx.x];
  __syncthreads();
  return shared;
}

}  // namespace kvq::kernels
