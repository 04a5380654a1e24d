// The qsnr study's sums for one configuration, on the CPU or on the GPU (the same per-block and
// per-chunk code, qsnr_partials.hpp, so the results are equal bit for bit). On the GPU the samples
// are drawn there too, by the host's code (samplers.hpp: the same bits), so nothing but the
// parameters crosses from the host and the study scales with GPUs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experiments/distributions.hpp"
#include "experiments/qsnr_partials.hpp"

namespace kvq::experiments {

struct QsnrTotals {
  ChunkSum sum;             // chunk sums added in chunk order
  double crest_median = 0;  // of the blocks' crest factors (all-zero blocks left out): element
                            // sum.crest_blocks / 2 in ascending order; 0 without one
};

// x: whole blocks of n values (n = the recipe's block, or 16 per tensor); g the tensor scale.
QsnrTotals qsnr_totals_cpu(const Recipe& r, int n, float g, const std::vector<float>& x);

namespace device {
// qsnr_totals_cpu of sample(d, rows, cols, seed), rotated by rotate_hadamard(x, rotation_block, seed)
// when rotation_block > 0, with g = tensor_scale(r, amax): samples, amax and sums on the GPU.
// "" or the CUDA error / "built without CUDA".
std::string qsnr_totals_sampled(const Recipe& r, int n, const Distribution& d, std::int64_t rows, int cols,
                                std::uint64_t seed, int rotation_block, QsnrTotals* out);
// Those samples drawn on the GPU and copied to the host (what the property compares with sample()).
std::string samples(const Distribution& d, std::int64_t rows, int cols, std::uint64_t seed, int rotation_block,
                    std::vector<float>* out);
// Visible GPUs (0 without CUDA), the one this host thread uses from now on, and which that is.
int gpu_count();
std::string use_gpu(int index);
int current_gpu();
// Creates the first `count` GPUs' CUDA contexts at once, a thread each (one after another they
// took about 0.25 s each); "" or the first error.
std::string open_gpus(int count);
// The kernels (qsnr_device.cu, or a stub). Samples: pairs 0..pairs-1 of `params` (its tables on the
// device) into the count elements of x_dev; rotation: rotate_block on each of `blocks` blocks.
std::string launch_samples(const SamplerParams& params, std::uint64_t seed, std::int64_t pairs, std::int64_t count,
                           float* x_dev);
std::string launch_rotation(float* x_dev, std::int64_t blocks, int block, std::uint64_t seed);
// Partials of `blocks` blocks of x_dev with g = tensor_scale(r, *amax_dev) (read on the device), chunk
// sums and crests (-1 for an all-zero block).
std::string launch_qsnr_sums(const Recipe& r, int n, const float* amax_dev, const float* x_dev, std::int64_t blocks,
                             BlockPartial* partials_dev, ChunkSum* chunks_dev, double* crest_dev);
// A radix select on the device, 8 bits a pass, with no host round trip: it leaves in *state_dev the
// element valid / 2 in ascending order of the values >= 0 among the `count` (> 0) of values_dev
// (valid: how many there are; a positive double's bits order as its value, so -0.0, whose bits would
// sort last, must not occur: the crest factors are positive or -1). hist_dev holds 256 counters.
struct SelectState {
  std::uint64_t prefix = 0, mask = 0;  // the answer's bits found so far, and which
  std::int64_t rank = 0, valid = 0;    // the rank left within the prefix, and the values >= 0
};
std::string launch_median_select(const double* values_dev, std::int64_t count, unsigned* hist_dev, SelectState* state_dev);
}  // namespace device

}  // namespace kvq::experiments
