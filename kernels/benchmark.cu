#include <cuda_runtime.h>

#include <algorithm>
#include <functional>

#include "kernels/benchmark.hpp"

namespace kvq::kernels {
namespace {

// Random-looking data with a per-row scale, generated on the device (no zeros-only timing).
__global__ void fill_kernel(DType t, void* x, std::int64_t count, std::int64_t cols) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t h = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    const float unit = static_cast<float>(static_cast<std::int32_t>(h >> 32)) * 0x1p-31f;
    const float v = unit * static_cast<float>(1 + (i / cols) % 7);
    store_value(t, x, i, v);
  }
}

std::string status(cudaError_t e) { return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e)); }

}  // namespace

std::string time_median(const std::function<std::string()>& launch, int repeats, double* median_ms) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> times;
  std::string e;
  for (int i = 0; i < 3 + repeats && e.empty(); ++i) {
    cudaEventRecord(start);
    e = launch();
    cudaEventRecord(stop);
    if (e.empty()) e = status(cudaEventSynchronize(stop));
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= 3) times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!e.empty()) return e;
  std::sort(times.begin(), times.end());
  *median_ms = times[times.size() / 2];
  return {};
}

std::string run_benchmarks(const std::vector<BenchCase>& cases, DType dtype, std::int64_t rows, std::int64_t cols,
                           int repeats, std::vector<BenchRow>* out, std::string* device_name) {
  cudaDeviceProp prop{};
  if (auto e = status(cudaGetDeviceProperties(&prop, 0)); !e.empty()) return e;
  *device_name = prop.name;
  const std::int64_t count = rows * cols;
  const std::size_t in_bytes = static_cast<std::size_t>(count) * bytes_of(dtype);
  void *x = nullptr, *codes = nullptr, *scales = nullptr, *y = nullptr, *copy = nullptr, *m = nullptr;
  std::string e = status(cudaMalloc(&x, in_bytes));
  if (e.empty()) e = status(cudaMalloc(&codes, static_cast<std::size_t>(count)));
  if (e.empty()) e = status(cudaMalloc(&scales, static_cast<std::size_t>(count / 16 + 1)));
  if (e.empty()) e = status(cudaMalloc(&y, in_bytes));
  if (e.empty()) e = status(cudaMalloc(&copy, in_bytes));
  if (e.empty()) e = status(cudaMalloc(&m, sizeof(float)));
  if (e.empty()) {
    fill_kernel<<<prop.multiProcessorCount * 8, 256>>>(dtype, x, count, cols);
    e = status(cudaDeviceSynchronize());
  }
  auto copy_gbps = [&](double bytes, double* gbps) {  // D2D copy of bytes/2 read + bytes/2 written
    double ms = 0;
    const auto half = static_cast<std::size_t>(bytes / 2);
    const std::string err = time_median([&] { return status(cudaMemcpyAsync(copy, x, std::min(half, in_bytes), cudaMemcpyDeviceToDevice)); },
                                        repeats, &ms);
    *gbps = 2.0 * static_cast<double>(std::min(half, in_bytes)) / (ms * 1e6);
    return err;
  };
  if (e.empty()) {
    double ms = 0, copy_rate = 0;
    e = time_median([&] { return device::amax(dtype, x, count, static_cast<float*>(m), nullptr); }, repeats, &ms);
    if (e.empty()) e = copy_gbps(2.0 * static_cast<double>(in_bytes), &copy_rate);
    out->push_back({"amax", "-", name_of(dtype), static_cast<double>(in_bytes), ms, in_bytes / (ms * 1e6), copy_rate});
  }
  for (const BenchCase& c : cases) {
    if (!e.empty()) break;
    QuantizeShape s{c.recipe, rows, cols};
    const double q_bytes = static_cast<double>(in_bytes + s.code_bytes() + s.scale_bytes());
    const float g = 1.0f;
    double ms = 0, copy_rate = 0;
    e = time_median([&] {
          return device::quantize(s, dtype, x, g, static_cast<std::uint8_t*>(codes), static_cast<std::uint8_t*>(scales), nullptr);
        }, repeats, &ms);
    if (e.empty()) e = copy_gbps(q_bytes, &copy_rate);
    out->push_back({"quantize", c.recipe_name, name_of(dtype), q_bytes, ms, q_bytes / (ms * 1e6), copy_rate});
    if (!e.empty()) break;
    e = time_median([&] {
          return device::dequantize(s, static_cast<std::uint8_t*>(codes), static_cast<std::uint8_t*>(scales), g, dtype, y, nullptr);
        }, repeats, &ms);
    if (e.empty()) e = copy_gbps(q_bytes, &copy_rate);
    out->push_back({"dequantize", c.recipe_name, name_of(dtype), q_bytes, ms, q_bytes / (ms * 1e6), copy_rate});
    if (!e.empty() || dtype != DType::bf16) continue;  // the workspace has no input type: one row per recipe
    const double w_bytes = static_cast<double>(s.code_bytes() + s.scale_bytes() + count);
    e = time_median([&] {
          return device::requantize_e4m3(s, static_cast<std::uint8_t*>(codes), static_cast<std::uint8_t*>(scales),
                                         1.0f / 6.0f, static_cast<std::uint8_t*>(y), nullptr);
        }, repeats, &ms);
    if (e.empty()) e = copy_gbps(w_bytes, &copy_rate);
    out->push_back({"workspace", c.recipe_name, "e4m3", w_bytes, ms, w_bytes / (ms * 1e6), copy_rate});
  }
  for (void* p : {x, codes, scales, y, copy, m}) cudaFree(p);
  return e;
}

}  // namespace kvq::kernels
