// Launch helpers shared by the CUDA translation units (nvcc only).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/device_grid.hpp"
#include "kernels/status.hpp"

namespace kvq::kernels::launch {

// Blocks for `work` items at `threads` a block: enough for one item a thread, at most a cap of
// blocks an SM (the kernels are grid-stride loops), or no cap (kOnePass). Each launch passes the cap
// measured fastest for its kernel (docs/performance.md "Grids"): one item a thread where a thread
// keeps nothing between items (its blocks start in address order, so the loads and stores sweep
// the tensors as one front), several where a thread block fills a table first or a thread's loop
// loads the next item while it works on this one.
inline constexpr int kOnePass = 0;

// A launch's cap on the two kinds of device its sweeps measured (docs/performance.md "Grids"):
// `usual` where the device's DRAM bandwidth an SM is at most kFastMemoryPerSm (an H100 SXM: 3.35
// TB/s over 132 SMs, 25 GB/s an SM), `fast_memory` above it (an H200: 4.8 TB/s, 37 GB/s an SM,
// the same SMs and clocks: a kernel issues the same instructions in less time per byte, and other
// grids measured fastest there). One number: the same cap on both.
struct GridCap {
  int usual, fast_memory;
  constexpr GridCap(int both) : usual(both), fast_memory(both) {}  // implicit: a plain cap is both
  constexpr GridCap(int usual_cap, int fast_memory_cap) : usual(usual_cap), fast_memory(fast_memory_cap) {}
};
inline constexpr double kFastMemoryPerSm = 31e9;  // bytes a second an SM, between the two measured kinds

// The device's SM count and whether it has fast memory (GridCap), asked once a device.
struct DeviceGridFacts {
  int sms = 0;
  bool fast_memory = false;
};
inline DeviceGridFacts device_grid_facts(int device) {
  thread_local DeviceGridFacts facts_of[64] = {};  // a few microseconds a launch to ask
  DeviceGridFacts facts = device >= 0 && device < 64 ? facts_of[device] : DeviceGridFacts{};
  if (facts.sms == 0) {
    int clock_khz = 0, bus_bits = 0;
    cudaDeviceGetAttribute(&facts.sms, cudaDevAttrMultiProcessorCount, device);
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device);
    // Peak DRAM bandwidth: two transfers a memory clock over the bus (as CUDA's deviceQuery reports it).
    const double bytes_per_second = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0);
    facts.fast_memory = facts.sms > 0 && bytes_per_second / facts.sms > kFastMemoryPerSm;
    if (device >= 0 && device < 64) facts_of[device] = facts;
  }
  return facts;
}

inline int grid_for(std::int64_t work, int threads, GridCap caps = GridCap(32)) {
  int device = 0;
  cudaGetDevice(&device);
  const DeviceGridFacts facts = device_grid_facts(device);
  int blocks_per_sm = facts.fast_memory ? caps.fast_memory : caps.usual;
  const int sms = facts.sms;
  const std::int64_t wanted = (work + threads - 1) / threads;
  if (const int forced = device::grid_cap_override(); forced > 0) blocks_per_sm = forced;  // the properties' -large cases
  const std::int64_t cap = blocks_per_sm == kOnePass ? std::int64_t{0x7fffffff}  // a grid's most blocks
                                                     : static_cast<std::int64_t>(sms > 0 ? sms : 1) * blocks_per_sm;
  return static_cast<int>(wanted < 1 ? 1 : (wanted < cap ? wanted : cap));
}

// Launches grid-stride `Kernel` on `grid` blocks of `threads`, at most as many as the device holds
// at once (its occupancy times the SMs, asked once a device): one wave, each block taking the same
// share of the items. Measured faster for the per-tensor Triton variants' quantize kernel only (each
// of its threads plans the tensor's scale by the runtime recipe once, before its items); the other
// kernels run as fast or faster on grid_for's grids (docs/performance.md "Resident grids").
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
