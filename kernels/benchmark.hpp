// Kernel timing on the GPU (METHOD.md): CUDA events around each launch after warm-up,
// the median of many runs, inputs far larger than L2, and a device-to-device copy of the
// same bytes timed in the same run as the yardstick.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/recipes.hpp"
#include "kernels/paged_layout.hpp"
#include "kernels/quantize.hpp"
#include "kernels/status.hpp"

namespace kvq::kernels {

struct BenchRow {
  std::string kernel;  // quantize, dequantize, amax, copy
  std::string recipe;
  std::string dtype;
  double bytes = 0;       // bytes read + bytes written
  double median_ms = 0;
  double gbps = 0;        // bytes / median time
  double copy_gbps = 0;   // copy_rate of the same bytes in this run (read + write); fastest_copy_baselines
                          // then raises it to the fastest copy of about as many bytes
  double copy_bytes = 0;  // the bytes that copy moved (read + write)
};

struct BenchCase {
  std::string recipe_name;
  Recipe recipe;
};

// Median milliseconds of `launch` over `repeats` timed runs (CUDA events) after 3 warm-ups. Each run
// is queued behind a short spin kernel, so its time is the device's, without the host's launch work.
Status time_median(const std::function<Status()>& launch, int repeats, double* median_ms);

// Every row's yardstick (docs/performance.md "Copy baseline"): `bytes` (read + written) moved by the
// fastest of two copies of bytes/2 from src to dst, cudaMemcpyAsync and a 16-byte vector copy
// kernel, each the median of `repeats` timed runs. The first call of a process first runs copies for
// about 100 ms, so that no row's baseline is timed before the GPU's clocks settle.
Status copy_rate(void* dst, const void* src, std::size_t bytes, int repeats, double* gbps);

// Sets every row's yardstick, once all rows of a run are in (docs/performance.md "Copy baseline"):
// the fastest copy measured in the run of about the bytes its own copy moved (within 5%: past L2's
// size a copy's rate changes by about 1% as its bytes double), its own included, so that a row is
// not held to one copy that ran slow (one pair of buffers can copy slower than another pair of the
// same size).
inline void fastest_copy_baselines(std::vector<BenchRow>& rows) {
  std::vector<double> best(rows.size(), 0.0);
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (const BenchRow& other : rows) {
      const double apart = other.copy_bytes - rows[i].copy_bytes;
      if ((apart < 0 ? -apart : apart) <= 0.05 * rows[i].copy_bytes && other.copy_gbps > best[i]) best[i] = other.copy_gbps;
    }
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i].copy_gbps = best[i];
}

// Runs every case on a [rows, cols] tensor of `dtype`; success or an error (kernels/status.hpp). The NVFP4 paged rows store
// with the scale swizzle `paged_swizzle`, their kernel named paged-nhd / paged-hnd, with -v (V
// only) or -kv (K and V) after it when swizzled.
Status run_benchmarks(const std::vector<BenchCase>& cases, DType dtype, std::int64_t rows, std::int64_t cols,
                      int repeats, std::vector<BenchRow>* rows_out, std::string* device_name,
                      ScaleSwizzle paged_swizzle = ScaleSwizzle::none);

// MLA layout kernels and the NVFP4 paged -> E4M3 workspace (fixed shapes, kernels/benchmark.cu).
Status run_mla_benchmarks(int repeats, std::vector<BenchRow>* rows_out);

}  // namespace kvq::kernels
