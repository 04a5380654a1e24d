// Launch helpers shared by the CUDA translation units (nvcc only).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/status.hpp"

namespace kvq::kernels::launch {

// Blocks for `work` items at `threads` a block: enough for one item a thread, at most 32 blocks
// per SM (the kernels are grid-stride loops).
inline int grid_for(std::int64_t work, int threads) {
  int device = 0;
  cudaGetDevice(&device);
  thread_local int sms_of[64] = {};  // each device's SM count, asked once (a few microseconds a launch)
  int sms = device >= 0 && device < 64 ? sms_of[device] : 0;
  if (sms == 0) {
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (device >= 0 && device < 64) sms_of[device] = sms;
  }
  const std::int64_t wanted = (work + threads - 1) / threads;
  const std::int64_t cap = static_cast<std::int64_t>(sms > 0 ? sms : 1) * 32;
  return static_cast<int>(wanted < 1 ? 1 : (wanted < cap ? wanted : cap));
}

// Launches grid-stride `Kernel` on `grid` blocks of `threads`, at most as many as the device holds
// at once (its occupancy times the SMs, asked once a device): one wave, each block taking the same
// share of the items. Measured faster for the per-tensor Triton variants' quantize kernel only (each
// of its threads plans the tensor's scale by the runtime recipe once, before its items); the other
// kernels run as fast or faster on the 32 blocks an SM of grid_for (docs/performance.md "Resident
// grids").
template <auto Kernel, class... Args>
cudaError_t launch_resident(int grid, int threads, cudaStream_t stream, const Args&... args) {
  int device = 0;
  cudaGetDevice(&device);
  thread_local int resident_of[64] = {};  // per device; a kernel is launched at one block size
  int resident = device >= 0 && device < 64 ? resident_of[device] : 0;
  if (resident == 0) {
    int per_sm = 0, sms = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, threads, 0) != cudaSuccess) {
      cudaGetLastError();  // not this launch's error
      per_sm = 0;
    }
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    resident = per_sm > 0 && sms > 0 ? per_sm * sms : grid;  // unknown: the grid as asked
    if (device >= 0 && device < 64) resident_of[device] = resident;
  }
  Kernel<<<grid < resident ? grid : resident, threads, 0, stream>>>(args...);
  return cudaGetLastError();
}

inline Status status(cudaError_t e) { return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e)); }

}  // namespace kvq::kernels::launch
