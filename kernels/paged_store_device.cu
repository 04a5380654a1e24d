// The paged store kernel: one thread per 16-element chunk of one (side, token, head), running
// paged_store_chunk (kernels/paged_store.hpp), the code the CPU twin runs. The element format and
// scale kind are compile-time per layout format, as in quantize_device.cu; grid-stride.
#include <cuda_runtime.h>

#include <vector>

#include "kernels/device_launch.cuh"
#include "kernels/paged_store.hpp"

namespace kvq::kernels {
namespace {

template <PagedFormat F, DType T, typename Index>
__global__ void paged_store_kernel(PagedStoreShape shape, PagedScales scales, PagedStoreArgs args) {
  PagedStoreShape s = shape;
  s.input = T;
  s.layout.format = F;
  s.recipe.element = F == PagedFormat::fp8 ? FormatId::e4m3fn : FormatId::e2m1;
  s.recipe.scale = F == PagedFormat::fp8 ? BlockScale::tensor_only : BlockScale::e4m3_two_level;
  const std::int64_t items = paged_store_items(s);
  for (std::int64_t item = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; item < items;
       item += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    paged_store_chunk(s, scales, args, static_cast<Index>(item));
}

using launch::status;
constexpr int kThreads = 128;

template <PagedFormat F, typename Index>
cudaError_t launch_store(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, int grid,
                         cudaStream_t stream) {
  switch (s.input) {
    case DType::fp32: paged_store_kernel<F, DType::fp32, Index><<<grid, kThreads, 0, stream>>>(s, scales, a); break;
    case DType::bf16: paged_store_kernel<F, DType::bf16, Index><<<grid, kThreads, 0, stream>>>(s, scales, a); break;
    case DType::fp16: paged_store_kernel<F, DType::fp16, Index><<<grid, kThreads, 0, stream>>>(s, scales, a); break;
  }
  return cudaGetLastError();
}

template <PagedFormat F>
cudaError_t launch_store(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, int grid,
                         cudaStream_t stream) {
  return paged_store_narrow(s) ? launch_store<F, std::uint32_t>(s, scales, a, grid, stream)
                               : launch_store<F, std::int64_t>(s, scales, a, grid, stream);
}

}  // namespace

namespace device {

std::string paged_store(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, void* stream) {
  if (auto e = validate(s, scales, a); !e.empty()) return e;
  const auto st = static_cast<cudaStream_t>(stream);
  if (s.check_slots && s.tokens > 0) {
    std::vector<std::int64_t> slots(static_cast<std::size_t>(s.tokens));
    cudaError_t c = cudaMemcpyAsync(slots.data(), a.slot_mapping, slots.size() * sizeof(std::int64_t),
                                    cudaMemcpyDeviceToHost, st);
    if (c == cudaSuccess) c = cudaStreamSynchronize(st);
    if (c != cudaSuccess) return status(c);
    if (auto e = validate_slots(s.layout, slots.data(), s.tokens); !e.empty()) return e;
  }
  const std::int64_t items = paged_store_items(s);
  if (items == 0) return {};
  const int grid = launch::grid_for(items, kThreads);
  return status(s.layout.format == PagedFormat::fp8 ? launch_store<PagedFormat::fp8>(s, scales, a, grid, st)
                                                    : launch_store<PagedFormat::nvfp4>(s, scales, a, grid, st));
}

}  // namespace device
}  // namespace kvq::kernels
