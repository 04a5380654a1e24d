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

inline Status status(cudaError_t e) { return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e)); }

}  // namespace kvq::kernels::launch
