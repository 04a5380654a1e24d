// The qsnr study on the GPU: one thread per block runs block_partial (quantize_block and the sums,
// the CPU's code), one thread per chunk of kChunkBlocks adds its blocks in order.
#include <cuda_runtime.h>

#include <algorithm>

#include "experiments/qsnr_device.hpp"

namespace kvq::experiments::device {
namespace {

__global__ void partials_kernel(Recipe r, int n, float g, const float* x, std::int64_t blocks, BlockPartial* partials) {
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

}  // namespace

int gpu_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

std::string use_gpu(int index) {
  const cudaError_t e = cudaSetDevice(index);
  return e == cudaSuccess ? "" : "cudaSetDevice(" + std::to_string(index) + "): " + cudaGetErrorString(e);
}

std::string launch_qsnr_sums(const Recipe& r, int n, float g, const float* x_dev, std::int64_t blocks,
                             BlockPartial* partials_dev, ChunkSum* chunks_dev, double* crest_dev) {
  if (n <= 0 || n > kMaxRecipeBlock) return "block size must be in 1..128, got " + std::to_string(n);
  if (blocks <= 0) return {};
  constexpr int kThreads = 256;
  const auto grid = [](std::int64_t items) { return static_cast<unsigned>(std::min<std::int64_t>((items + kThreads - 1) / kThreads, 65535)); };
  partials_kernel<<<grid(blocks), kThreads>>>(r, n, g, x_dev, blocks, partials_dev);
  chunks_kernel<<<grid((blocks + kChunkBlocks - 1) / kChunkBlocks), kThreads>>>(partials_dev, blocks, chunks_dev, crest_dev);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("qsnr kernels: ") + cudaGetErrorString(e);
}

}  // namespace kvq::experiments::device
