// Device variants of the mutants whose bug is not a Recipe field (proptests/ports/mutant_bodies.hpp): the
// same per-element lines as their CPU twins, one thread per element, grid-stride. Built only for
// the mutant catalogue's GPU run (suite gpu, mutants/.../device).
#include <cuda_runtime.h>

#include "proptests/ports/mutant_bodies.hpp"

namespace kvq::ports::device {
namespace {

constexpr int kThreads = 256;

int blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

Status status() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string("CUDA: ") + cudaGetErrorString(e);
}

__global__ void swap_kernel(std::uint8_t* codes, std::int64_t bytes) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < bytes;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    codes[i] = swapped_nibbles(codes[i]);
}

__global__ void dequantize_kernel(kernels::QuantizeShape s, MutantBugs b, const std::uint8_t* codes,
                                  const std::uint8_t* scales, float g, kernels::DType output, void* y) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < s.rows * s.cols;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint8_t code, scale;
    code_and_scale(s, codes, scales, i, &code, &scale);
    kernels::store_value(output, y, i, mutant_value(s.recipe, b, g, scale, code));
  }
}

__global__ void requantize_kernel(kernels::QuantizeShape s, WorkspaceRounding w, const std::uint8_t* codes,
                                  const std::uint8_t* scales, float factor, std::uint8_t* out) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < s.rows * s.cols;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint8_t code, scale;
    code_and_scale(s, codes, scales, i, &code, &scale);
    out[i] = requantize_e4m3_rounded(s.recipe, scale, code, factor, w);
  }
}

}  // namespace

Status swap_nibbles(std::uint8_t* codes, std::int64_t bytes, void* stream) {
  swap_kernel<<<blocks_for(bytes), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(codes, bytes);
  return status();
}

Status dequantize(const kernels::QuantizeShape& s, const MutantBugs& b, const std::uint8_t* codes,
                  const std::uint8_t* scales, float g, kernels::DType output, void* y, void* stream) {
  if (auto e = kernels::validate(s); !e.ok()) return e;
  dequantize_kernel<<<blocks_for(s.rows * s.cols), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(s, b, codes, scales,
                                                                                                       g, output, y);
  return status();
}

Status requantize_e4m3(const kernels::QuantizeShape& s, WorkspaceRounding w, const std::uint8_t* codes,
                       const std::uint8_t* scales, float factor, std::uint8_t* out, void* stream) {
  if (auto e = kernels::validate(s); !e.ok()) return e;
  requantize_kernel<<<blocks_for(s.rows * s.cols), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(s, w, codes, scales,
                                                                                                       factor, out);
  return status();
}

}  // namespace kvq::ports::device
