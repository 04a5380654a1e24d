// The paged store launcher and its generic kernels: one thread per 16-element chunk of
// one (token, head) of K and then of V, running paged_store_item (kernels/paged_store.hpp), the code the CPU
// twin runs, or (the fixed NVFP4 kernels but 4over6, where staged_loads allows) its store_item on
// values a warp staged in shared memory. Grid-stride. The shipped recipes run fixed instantiations (kernels/
// paged_store_kernel.cuh: every recipe field the chunk code reads a constant, 32-bit indices, a
// 16-bit input type; NVFP4 through quantize_block_packed), each in its own generated unit.
// The item and slot divisions go by multiply-high with divisors computed on the host
// (kernels/fast_divide.hpp). Anything else (FP32 input, other roundings, 64-bit indices) runs the
// generic instantiation: the runtime recipe through quantize_block, the same bytes.
#include <cuda_runtime.h>

#include <vector>

#include "kernels/device_launch.cuh"
#include "kernels/paged_store.hpp"
#include "kernels/paged_store_kernel.cuh"

namespace kvq::kernels {
namespace paged_kernel {
// Compiled in their own units (kernels/paged_store_fixed.cu.in).
#define KVQ_OWN_UNIT(i, T)                                                                            \
  extern template cudaError_t launch_kernel<i, kFixedFormat<i>, DType::T, std::uint32_t>(            \
      const PagedStoreShape&, const PagedScales&, const PagedStoreArgs&, const PagedDividers&, int, cudaStream_t);
#define KVQ_OWN_UNITS(i, name) KVQ_OWN_UNIT(i, bf16) KVQ_OWN_UNIT(i, fp16)
KVQ_PAGED_FIXED(KVQ_OWN_UNITS)
#undef KVQ_OWN_UNITS
#undef KVQ_OWN_UNIT
}  // namespace paged_kernel

namespace {

using namespace paged_kernel;
using launch::status;

template <int C, PagedFormat F, typename Index>
cudaError_t launch_store(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, int grid,
                         cudaStream_t stream) {
  const PagedDividers d = paged_dividers(s);
  switch (s.input) {
    case DType::fp32:
      if constexpr (C == kGeneric) return launch_kernel<C, F, DType::fp32, Index>(s, scales, a, d, grid, stream);
      break;
    case DType::bf16: return launch_kernel<C, F, DType::bf16, Index>(s, scales, a, d, grid, stream);
    case DType::fp16: return launch_kernel<C, F, DType::fp16, Index>(s, scales, a, d, grid, stream);
  }
  return cudaErrorInvalidValue;
}
// The first fixed configuration from C on of layout F that matches the recipe, else the generic one.
template <int C, PagedFormat F>
cudaError_t launch_fixed(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, int grid,
                         cudaStream_t stream) {
  if constexpr (C == kFixedCount) {
    return launch_store<kGeneric, F, std::uint32_t>(s, scales, a, grid, stream);
  } else {
    if constexpr (kFixedFormat<C> == F)
      if (matches<C>(s.recipe)) return launch_store<C, F, std::uint32_t>(s, scales, a, grid, stream);
    return launch_fixed<C + 1, F>(s, scales, a, grid, stream);
  }
}
template <PagedFormat F>
cudaError_t launch_store(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, int grid,
                         cudaStream_t stream) {
  if (!paged_store_narrow(s)) return launch_store<kGeneric, F, std::int64_t>(s, scales, a, grid, stream);
  if (s.input != DType::fp32) return launch_fixed<0, F>(s, scales, a, grid, stream);
  return launch_store<kGeneric, F, std::uint32_t>(s, scales, a, grid, stream);
}

}  // namespace

namespace device {

Status paged_store(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, void* stream) {
  if (auto e = validate(s, scales, a); !e.ok()) return e;
  const auto st = static_cast<cudaStream_t>(stream);
  if (s.check_slots && s.tokens > 0) {
    std::vector<std::int64_t> slots(static_cast<std::size_t>(s.tokens));
    cudaError_t c = cudaMemcpyAsync(slots.data(), a.slot_mapping, slots.size() * sizeof(std::int64_t),
                                    cudaMemcpyDeviceToHost, st);
    if (c == cudaSuccess) c = cudaStreamSynchronize(st);
    if (c != cudaSuccess) return status(c);
    if (auto e = validate_slots(s.layout, slots.data(), s.tokens); !e.ok()) return e;
  }
  const std::int64_t items = paged_store_items(s);
  if (items == 0) return {};
  // FP8 one item a thread would be as fast on an H100; 256 blocks an SM keep the 32-bit strides
  // (kernels/paged_store_kernel.cuh). With fast memory the FP8 chunks that divide (IEEE x / g:
  // divide_for_e4m3_code) and FP32 input run fastest on 128. The NVFP4 kernels' loops stage the
  // next item: 32 (docs/performance.md "Grids", "Grids on an H200").
  const bool divides = s.recipe.apply == Apply::divide && s.recipe.division != Division::full_approx;
  const launch::GridCap cap = s.layout.format == PagedFormat::nvfp4      ? launch::GridCap(32)
                              : divides || s.input == DType::fp32 ? launch::GridCap(256, 128)
                                                                  : launch::GridCap(256);
  const int grid = launch::grid_for(items, kThreads, cap);
  return status(s.layout.format == PagedFormat::fp8 ? launch_store<PagedFormat::fp8>(s, scales, a, grid, st)
                                                    : launch_store<PagedFormat::nvfp4>(s, scales, a, grid, st));
}

}  // namespace device
}  // namespace kvq::kernels
