// The paged store kernel: one thread per 16-element chunk of one (side, token, head), running
// paged_store_chunk (kernels/paged_store.hpp), the code the CPU twin runs. Grid-stride.
// The shipped recipes are instantiated with every field the chunk code reads (element format,
// scale kind, two-level style, apply, zero guard, clamp, reciprocal, nearest-even rounding) as
// constants, 32-bit indices and a 16-bit input type: one kernel per recipe carries no register
// of another recipe's path (the plain quantize kernels' kFixed idea, docs/paged.md Performance).
// The item and slot divisions go by multiply-high with divisors computed on the host
// (kernels/fast_divide.hpp). Anything else (FP32 input, other roundings, 64-bit indices) runs the generic instantiation:
// the same code with the runtime recipe, so every instantiation writes the same bytes.
#include <cuda_runtime.h>

#include <vector>

#include "kernels/device_launch.cuh"
#include "kernels/paged_store.hpp"

namespace kvq::kernels {
namespace {

struct PagedConfig {
  FormatId element;  // e2m1: the NVFP4 layout; e4m3fn: the FP8 layout (per tensor, only apply matters)
  Apply apply;
  TwoLevel style = TwoLevel::reference;
  ZeroGuard guard = ZeroGuard::block_and_scale;
  bool clamp = false;
};
// nvfp4, nvfp4-torchao, nvfp4-flashinfer-kv, nvfp4-vllm, nvfp4-4over6, fp8-e4m3-tensor(-rcp)
// (formats/recipe_names.hpp); all with nearest-even elements and the approx_ftz reciprocal.
constexpr int kGeneric = -1;
constexpr PagedConfig kFixed[] = {
    {FormatId::e2m1, Apply::divide},
    {FormatId::e2m1, Apply::multiply_reciprocal, TwoLevel::reference, ZeroGuard::rounded_scale, true},
    {FormatId::e2m1, Apply::multiply_reciprocal, TwoLevel::rcp_decode, ZeroGuard::block_max},
    {FormatId::e2m1, Apply::multiply_reciprocal, TwoLevel::rcp_encode, ZeroGuard::rounded_scale},
    {FormatId::e2m1, Apply::multiply_reciprocal, TwoLevel::four_over_six, ZeroGuard::block_and_scale},
    {FormatId::e4m3fn, Apply::divide},
    {FormatId::e4m3fn, Apply::multiply_reciprocal},
};
constexpr int kFixedCount = sizeof(kFixed) / sizeof(kFixed[0]);

// Whether fixed configuration c computes what the runtime recipe r computes in paged_store_chunk.
bool matches(const PagedConfig& c, const Recipe& r) {
  if (c.element != r.element || c.apply != r.apply || r.element_rounding != Rounding::nearest_even) return false;
  if (c.element == FormatId::e4m3fn) return true;  // tensor_only reads apply and the rounding only
  return c.style == r.two_level && c.guard == r.zero_guard && c.clamp == r.clamp_block_scale &&
         r.reciprocal == Reciprocal::approx_ftz;
}

template <int C, PagedFormat F, DType T>
__device__ inline PagedStoreShape specialise(PagedStoreShape s) {
  s.input = T;
  s.layout.format = F;
  s.recipe.element = F == PagedFormat::fp8 ? FormatId::e4m3fn : FormatId::e2m1;
  s.recipe.scale = F == PagedFormat::fp8 ? BlockScale::tensor_only : BlockScale::e4m3_two_level;
  if constexpr (C != kGeneric) {
    s.recipe.apply = kFixed[C].apply;
    s.recipe.element_rounding = Rounding::nearest_even;
    if constexpr (F == PagedFormat::nvfp4) {
      s.recipe.two_level = kFixed[C].style;
      s.recipe.zero_guard = kFixed[C].guard;
      s.recipe.clamp_block_scale = kFixed[C].clamp;
      s.recipe.reciprocal = Reciprocal::approx_ftz;
    }
  }
  return s;
}

template <int C, PagedFormat F, DType T, typename Index>
__global__ void paged_store_kernel(PagedStoreShape shape, PagedScales scales, PagedStoreArgs args, PagedDividers d) {
  const PagedStoreShape s = specialise<C, F, T>(shape);
  const std::int64_t items = paged_store_items(s);
  for (std::int64_t item = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; item < items;
       item += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    paged_store_chunk(s, scales, args, static_cast<Index>(item), d);
}

using launch::status;
constexpr int kThreads = 128;

template <int C, PagedFormat F, typename Index>
cudaError_t launch_store(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, int grid,
                         cudaStream_t stream) {
  const PagedDividers d = paged_dividers(s);
  switch (s.input) {
    case DType::fp32:
      if constexpr (C == kGeneric) paged_store_kernel<C, F, DType::fp32, Index><<<grid, kThreads, 0, stream>>>(s, scales, a, d);
      break;
    case DType::bf16: paged_store_kernel<C, F, DType::bf16, Index><<<grid, kThreads, 0, stream>>>(s, scales, a, d); break;
    case DType::fp16: paged_store_kernel<C, F, DType::fp16, Index><<<grid, kThreads, 0, stream>>>(s, scales, a, d); break;
  }
  return cudaGetLastError();
}

template <PagedFormat F>
cudaError_t launch_store(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, int grid,
                         cudaStream_t stream) {
  if (!paged_store_narrow(s)) return launch_store<kGeneric, F, std::int64_t>(s, scales, a, grid, stream);
  if (s.input != DType::fp32) {
#define KVQ_FIXED(i)                                                                               \
  if constexpr ((kFixed[i].element == FormatId::e2m1) == (F == PagedFormat::nvfp4))                \
    if (matches(kFixed[i], s.recipe)) return launch_store<i, F, std::uint32_t>(s, scales, a, grid, stream);
    KVQ_FIXED(0) KVQ_FIXED(1) KVQ_FIXED(2) KVQ_FIXED(3) KVQ_FIXED(4) KVQ_FIXED(5) KVQ_FIXED(6)
#undef KVQ_FIXED
    static_assert(kFixedCount == 7, "one KVQ_FIXED line per fixed configuration");
  }
  return launch_store<kGeneric, F, std::uint32_t>(s, scales, a, grid, stream);
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
