// The qsnr study's sums for one configuration, on the CPU or on the GPU (the same per-block and
// per-chunk code, qsnr_partials.hpp, so the results are equal bit for bit). The samples come from
// the host generator (distributions.hpp) and are uploaded: every platform draws the same data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experiments/qsnr_partials.hpp"

namespace kvq::experiments {

struct QsnrTotals {
  ChunkSum sum;               // chunk sums added in chunk order
  std::vector<double> crest;  // per block, -1 for all-zero blocks
};

// x: whole blocks of n values (n = the recipe's block, or 16 per tensor); g the tensor scale.
QsnrTotals qsnr_totals_cpu(const Recipe& r, int n, float g, const std::vector<float>& x);

namespace device {
// The same on the GPU: "" or the CUDA error / "built without CUDA".
std::string qsnr_totals(const Recipe& r, int n, float g, const std::vector<float>& x, QsnrTotals* out);
// Visible GPUs (0 without CUDA), and the one this host thread uses from now on.
int gpu_count();
std::string use_gpu(int index);
// The kernels (qsnr_device.cu, or a stub): partials of `blocks` blocks of x_dev, chunk sums and crests.
std::string launch_qsnr_sums(const Recipe& r, int n, float g, const float* x_dev, std::int64_t blocks,
                             BlockPartial* partials_dev, ChunkSum* chunks_dev, double* crest_dev);
}  // namespace device

}  // namespace kvq::experiments
