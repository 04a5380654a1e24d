// The qsnr study on the GPU: one thread per pair of samples runs sample_pair, one per rotated block
// rotate_block (samplers.hpp, the host's code); one thread per block runs block_partial (quantize_block
// and the sums, the CPU's code), one thread per chunk of kChunkBlocks adds its blocks in order.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "experiments/qsnr_device.hpp"

namespace kvq::experiments::device {
namespace {

__global__ void samples_kernel(SamplerParams params, std::uint64_t seed, std::int64_t pairs, std::int64_t count,
                               float* x) {
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    double a = 0, b = 0;
    std::int64_t i = 0, j = 0;
    sample_pair(params, seed, p, &a, &b);
    pair_elements(params, p, &i, &j);
    x[i] = static_cast<float>(a);
    if (j < count) x[j] = static_cast<float>(b);
  }
}

__global__ void rotation_kernel(float* x, std::int64_t blocks, int block, std::uint64_t seed) {
  for (std::int64_t b = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    rotate_block(x + b * block, block, seed, b);
}

__global__ void partials_kernel(Recipe r, int n, const float* amax, const float* x, std::int64_t blocks,
                                BlockPartial* partials) {
  const float g = tensor_scale(r, *amax);
  for (std::int64_t b = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    partials[b] = block_partial(r, g, x + b * n, n);
}

__global__ void chunks_kernel(const BlockPartial* partials, std::int64_t blocks, ChunkSum* chunks, double* crest) {
  const std::int64_t count = (blocks + kChunkBlocks - 1) / kChunkBlocks;
  for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; c < count;
       c += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    ChunkSum sum;
    for (std::int64_t b = c * kChunkBlocks; b < blocks && b < (c + 1) * kChunkBlocks; ++b) {
      add_to_chunk(sum, partials[b]);
      crest[b] = partials[b].crest;
    }
    chunks[c] = sum;
  }
}

// Counts, in hist[256], digit (bits >> shift) & 255 of the values >= 0 whose bits above the digit
// equal the prefix found so far.
__global__ void digit_histogram_kernel(const double* values, std::int64_t count, const SelectState* state, int shift,
                                       unsigned* hist) {
  const std::uint64_t prefix = state->prefix, mask = state->mask;
  __shared__ unsigned local[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) local[i] = 0;
  __syncthreads();
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double v = values[i];
    const std::uint64_t bits = bits_of(v);
    if (v >= 0 && (bits & mask) == prefix) atomicAdd(&local[(bits >> shift) & 255], 1u);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += blockDim.x)
    if (local[i]) atomicAdd(&hist[i], local[i]);
}

// One thread: the digit at `shift` of the element of rank state->rank (the first pass counts the
// values and sets the rank to half of them), appended to the prefix.
__global__ void pick_digit_kernel(const unsigned* hist, int shift, SelectState* state) {
  if (shift == 56) {
    std::int64_t valid = 0;
    for (int d = 0; d < 256; ++d) valid += hist[d];
    state->valid = valid;
    state->rank = valid / 2;
  }
  std::int64_t rank = state->rank;
  int digit = 0;
  while (digit < 255 && rank >= static_cast<std::int64_t>(hist[digit])) rank -= hist[digit++];
  state->rank = rank;
  state->prefix |= static_cast<std::uint64_t>(digit) << shift;
  state->mask |= std::uint64_t{255} << shift;
}

constexpr int kThreads = 256;
unsigned grid_of(std::int64_t items) {
  return static_cast<unsigned>(std::min<std::int64_t>((items + kThreads - 1) / kThreads, 65535));
}
std::string launched(const char* what) {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string(what) + ": " + cudaGetErrorString(e);
}

}  // namespace

int gpu_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

int current_gpu() {
  int index = 0;
  return cudaGetDevice(&index) == cudaSuccess ? index : -1;
}

std::string open_gpus(int count) {
  std::vector<std::string> errors(static_cast<std::size_t>(std::max(count, 0)));
  std::vector<std::thread> threads;
  for (int g = 0; g < count; ++g)
    threads.emplace_back([g, &errors] {
      cudaError_t e = cudaSetDevice(g);
      if (e == cudaSuccess) e = cudaFree(nullptr);  // creates the context
      if (e != cudaSuccess) errors[static_cast<std::size_t>(g)] = "GPU " + std::to_string(g) + ": " + cudaGetErrorString(e);
    });
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) return e;
  return {};
}

std::string use_gpu(int index) {
  const cudaError_t e = cudaSetDevice(index);
  return e == cudaSuccess ? "" : "cudaSetDevice(" + std::to_string(index) + "): " + cudaGetErrorString(e);
}

std::string launch_samples(const SamplerParams& params, std::uint64_t seed, std::int64_t pairs, std::int64_t count,
                           float* x_dev) {
  if (pairs <= 0) return {};
  samples_kernel<<<grid_of(pairs), kThreads>>>(params, seed, pairs, count, x_dev);
  return launched("samples kernel");
}

std::string launch_rotation(float* x_dev, std::int64_t blocks, int block, std::uint64_t seed) {
  if (block <= 0 || block > kMaxRotationBlock || (block & (block - 1)))
    return "rotation block must be a power of two up to " + std::to_string(kMaxRotationBlock);
  if (blocks <= 0) return {};
  rotation_kernel<<<grid_of(blocks), kThreads>>>(x_dev, blocks, block, seed);
  return launched("rotation kernel");
}

std::string launch_qsnr_sums(const Recipe& r, int n, const float* amax_dev, const float* x_dev, std::int64_t blocks,
                             BlockPartial* partials_dev, ChunkSum* chunks_dev, double* crest_dev) {
  if (n <= 0 || n > kMaxRecipeBlock) return "block size must be in 1..128, got " + std::to_string(n);
  if (blocks <= 0) return {};
  partials_kernel<<<grid_of(blocks), kThreads>>>(r, n, amax_dev, x_dev, blocks, partials_dev);
  chunks_kernel<<<grid_of((blocks + kChunkBlocks - 1) / kChunkBlocks), kThreads>>>(partials_dev, blocks, chunks_dev, crest_dev);
  return launched("qsnr kernels");
}

std::string launch_median_select(const double* values_dev, std::int64_t count, unsigned* hist_dev, SelectState* state_dev) {
  cudaError_t e = cudaMemsetAsync(state_dev, 0, sizeof(SelectState));
  for (int shift = 56; shift >= 0 && e == cudaSuccess; shift -= 8) {
    e = cudaMemsetAsync(hist_dev, 0, 256 * sizeof(unsigned));
    if (e != cudaSuccess) break;
    digit_histogram_kernel<<<grid_of(count), kThreads>>>(values_dev, count, state_dev, shift, hist_dev);
    pick_digit_kernel<<<1, 1>>>(hist_dev, shift, state_dev);
    e = cudaGetLastError();
  }
  return e == cudaSuccess ? "" : std::string("crest median: ") + cudaGetErrorString(e);
}

}  // namespace kvq::experiments::device
