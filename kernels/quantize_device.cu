// Quantize, dequantize and amax kernels: the element code is formats/recipes.hpp, the
// same the CPU twin runs. One thread per block (quantize) or element (dequantize),
// grid-stride; correctness first, speed is measured by `kvq bench` (later).
#include <cuda_runtime.h>

#include "kernels/quantize.hpp"

namespace kvq::kernels {
namespace {

// Instantiated per (element, scale kind) so the format descriptors fold into constants.
template <FormatId kElement, BlockScale kScale>
__global__ void quantize_kernel(QuantizeShape s, DType input, const void* x, float g, std::uint8_t* codes,
                                std::uint8_t* scales) {
  s.recipe.element = kElement;
  s.recipe.scale = kScale;
  const std::int64_t blocks_per_row = s.cols / s.block();
  const std::int64_t total = s.rows * blocks_per_row;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    quantize_one_block(s, input, x, g, codes, scales, k / blocks_per_row, k % blocks_per_row);
}

template <FormatId kElement, BlockScale kScale>
__global__ void dequantize_kernel(QuantizeShape s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                                  DType output, void* y) {
  s.recipe.element = kElement;
  s.recipe.scale = kScale;
  const std::int64_t total = s.rows * s.cols;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    dequantize_one_element(s, codes, scales, g, output, y, k / s.cols, k % s.cols);
  }
}

__global__ void amax_kernel(DType input, const void* x, std::int64_t count, unsigned int* result) {
  float m = 0.0f;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < count;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float a = __uint_as_float(__float_as_uint(load_value(input, x, k)) & 0x7fffffffu);
    m = a > m ? a : m;  // NaN never wins, as fmaxf
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_down_sync(0xffffffffu, m, offset);
    m = other > m ? other : m;
  }
  // Non-negative floats order like their bit patterns (inf included).
  if ((threadIdx.x & 31) == 0) atomicMax(result, __float_as_uint(m));
}

// Calls launch.template operator()<element, scale>() for the shape's recipe.
template <typename Launch>
cudaError_t dispatch(const QuantizeShape& s, Launch&& launch) {
  const bool e2m1 = s.recipe.element == FormatId::e2m1;
  switch (s.recipe.scale) {
    case BlockScale::e4m3_two_level:
      return e2m1 ? launch.template operator()<FormatId::e2m1, BlockScale::e4m3_two_level>()
                  : launch.template operator()<FormatId::e4m3fn, BlockScale::e4m3_two_level>();
    case BlockScale::e8m0_pow2:
      return e2m1 ? launch.template operator()<FormatId::e2m1, BlockScale::e8m0_pow2>()
                  : launch.template operator()<FormatId::e4m3fn, BlockScale::e8m0_pow2>();
    case BlockScale::tensor_only:
      return e2m1 ? launch.template operator()<FormatId::e2m1, BlockScale::tensor_only>()
                  : launch.template operator()<FormatId::e4m3fn, BlockScale::tensor_only>();
  }
  return cudaErrorInvalidValue;
}

int grid_for(std::int64_t work, int threads) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const std::int64_t wanted = (work + threads - 1) / threads;
  const std::int64_t cap = static_cast<std::int64_t>(sms > 0 ? sms : 1) * 32;
  return static_cast<int>(wanted < 1 ? 1 : (wanted < cap ? wanted : cap));
}

std::string status(cudaError_t e) { return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e)); }

}  // namespace

namespace device {

bool available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    *why = std::string("no CUDA device: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return false;
  }
  return true;
}

std::string quantize(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                     std::uint8_t* scales, void* stream) {
  if (auto e = validate(s); !e.empty()) return e;
  const std::int64_t work = s.rows * (s.cols / s.block());
  if (work == 0) return {};
  const int grid = grid_for(work, 128);
  return status(dispatch(s, [&]<FormatId E, BlockScale S>() {
    quantize_kernel<E, S><<<grid, 128, 0, static_cast<cudaStream_t>(stream)>>>(s, input, x, g, codes, scales);
    return cudaGetLastError();
  }));
}

std::string dequantize(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                       DType output, void* y, void* stream) {
  if (auto e = validate(s); !e.empty()) return e;
  const std::int64_t work = s.rows * s.cols;
  if (work == 0) return {};
  const int grid = grid_for(work, 256);
  return status(dispatch(s, [&]<FormatId E, BlockScale S>() {
    dequantize_kernel<E, S><<<grid, 256, 0, static_cast<cudaStream_t>(stream)>>>(s, codes, scales, g, output, y);
    return cudaGetLastError();
  }));
}

std::string amax(DType input, const void* x, std::int64_t count, float* result, void* stream) {
  if (count < 0) return "count must be >= 0";
  const auto st = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaMemsetAsync(result, 0, sizeof(float), st);
  if (e == cudaSuccess && count > 0) {
    amax_kernel<<<grid_for(count, 256), 256, 0, st>>>(input, x, count, reinterpret_cast<unsigned int*>(result));
    e = cudaGetLastError();
  }
  return status(e);
}

std::string allocate(void** p, std::size_t bytes) { return status(cudaMalloc(p, bytes ? bytes : 1)); }
void release(void* p) { cudaFree(p); }
std::string upload(void* dst, const void* src, std::size_t bytes) {
  return status(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
std::string download(void* dst, const void* src, std::size_t bytes) {
  return status(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
std::string fill(void* dst, std::uint8_t byte, std::size_t bytes) { return status(cudaMemset(dst, byte, bytes)); }
std::string synchronize() { return status(cudaDeviceSynchronize()); }

}  // namespace device
}  // namespace kvq::kernels
