// The paged store kernel template and its fixed configurations (nvcc only), shared by
// kernels/paged_store_device.cu (the launcher, the FP8 and generic kernels) and the fixed NVFP4
// translation units generated from kernels/paged_store_fixed.cu.in, one kernel each.
//
// Why the NVFP4 kernels are built this way (nvcc 12, -O2; measured with -ptx and -Xptxas -v):
// nvcc inlined quantize_block_packed (formats/packed_quantize.hpp) into a kernel only when both
// (1) the recipe is a compile-time constant it can read through the reference (kFixedRecipe, in
// __constant__ memory; a recipe in a local struct is not folded when inlining is weighed) and
// (2) the call is the only call of that function in the unit. Otherwise the function stays out
// of line, compiled for every recipe: 106 registers, a 192-byte stack frame, and ptxas took
// over 5 minutes on a unit holding the ten fixed NVFP4 kernels. One kernel a unit, inlined:
// 40 registers, no stack, under 4 seconds.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/code_table.cuh"
#include "kernels/paged_store.hpp"

namespace kvq::kernels::paged_kernel {

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

// Whether fixed configuration c computes what the runtime recipe r computes in paged_store_item.
inline bool matches(const PagedConfig& c, const Recipe& r) {
  if (c.element != r.element || c.apply != r.apply || r.element_rounding != Rounding::nearest_even ||
      r.element_input_bf16)
    return false;
  if (c.element == FormatId::e4m3fn) return true;  // tensor_only reads apply, the rounding, the BF16 input flag
  return c.style == r.two_level && c.guard == r.zero_guard && c.clamp == r.clamp_block_scale &&
         r.reciprocal == Reciprocal::approx_ftz;
}

// Fixed configuration C as a whole recipe: the fields kFixed gives, the others (block 16, no BF16
// element input) at the values matches() demands.
template <int C>
constexpr Recipe fixed_recipe() {
  Recipe r;
  r.element = kFixed[C].element;
  r.scale = kFixed[C].element == FormatId::e2m1 ? BlockScale::e4m3_two_level : BlockScale::tensor_only;
  r.block = kPagedChunk;
  r.apply = kFixed[C].apply;
  r.element_rounding = Rounding::nearest_even;
  r.element_input_bf16 = false;
  r.two_level = kFixed[C].style;
  r.zero_guard = kFixed[C].guard;
  r.clamp_block_scale = kFixed[C].clamp;
  r.reciprocal = Reciprocal::approx_ftz;
  return r;
}
// In constant memory, read through a reference nvcc folds: every recipe branch is decided at
// compile time (condition (1) above).
template <int C>
__constant__ constexpr Recipe kFixedRecipe = fixed_recipe<C>();

template <PagedFormat F, DType T>
__device__ inline PagedStoreShape specialise(PagedStoreShape s) {
  s.input = T;
  s.layout.format = F;
  s.recipe.element = F == PagedFormat::fp8 ? FormatId::e4m3fn : FormatId::e2m1;
  s.recipe.scale = F == PagedFormat::fp8 ? BlockScale::tensor_only : BlockScale::e4m3_two_level;
  return s;
}

// Items blockIdx.x * blockDim.x + threadIdx.x, then a grid's stride on (paged_store_item).
template <int C, PagedFormat F, typename Index>
__device__ __forceinline__ void paged_store_items_loop(const PagedStoreShape& s, const PagedScales& scales,
                                                       const PagedStoreArgs& args, const PagedDividers& d,
                                                       const PagedTerms& terms, std::int64_t items) {
  for (std::int64_t item = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; item < items;
       item += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (C == kGeneric) {
      paged_store_item<Index, false>(s, s.recipe, scales, args, static_cast<Index>(item), d, terms);
    } else {
      paged_store_item<Index, F == PagedFormat::nvfp4>(s, kFixedRecipe<C>, scales, args, static_cast<Index>(item), d,
                                                          terms);
    }
  }
}

// The fixed NVFP4 kernels run quantize_block_packed; the generic ones quantize_block (the same
// bytes; with a runtime recipe the packed path would carry every recipe's code).
template <int C, PagedFormat F, DType T, typename Index>
__device__ __forceinline__ void paged_store_body(const PagedStoreShape& shape, const PagedScales& scales,
                                                 const PagedStoreArgs& args, const PagedDividers& d) {
  const PagedStoreShape s = specialise<F, T>(shape);
  const std::int64_t items = paged_store_items(s);
  // NVFP4: the per-tensor scales' terms and code tables once a thread block. The terms go through
  // shared memory: computed in registers, nvcc recomputed 1/g for every chunk (the chunk's own
  // 1/g is the same number where the scales are per tensor).
  PagedTerms terms{};
  if constexpr (F == PagedFormat::nvfp4) {
    __shared__ CodeTerms shared_codes[2 * kE4m3Codes];  // K's table, then V's
    __shared__ PagedTerms shared_terms;
    if (threadIdx.x == 0) shared_terms = paged_terms(scales, shared_codes);
    __syncthreads();
    fill_code_table(scales.k[0], shared_terms.k_reciprocal, shared_codes);
    fill_code_table(scales.v[0], shared_terms.v_reciprocal, shared_codes + kE4m3Codes);
    __syncthreads();
    terms = shared_terms;
    terms.codes = shared_codes;  // the same address, known to be shared memory
  }
  if constexpr (F == PagedFormat::nvfp4 && C != kGeneric) {
    if (terms.lean && !s.per_head_scales) {  // the usual scales: the loop sees them as constants
      PagedStoreShape lean_shape = s;
      lean_shape.per_head_scales = false;
      terms.lean = true;
      paged_store_items_loop<C, F, Index>(lean_shape, scales, args, d, terms, items);
      return;
    }
  }
  paged_store_items_loop<C, F, Index>(s, scales, args, d, terms, items);
}

constexpr int kThreads = 128;
static_assert(kThreads >= kE4m3Codes, "a thread a table entry (kernels/code_table.cuh)");

template <int C, PagedFormat F, DType T, typename Index>
__global__ void paged_store_kernel(PagedStoreShape shape, PagedScales scales, PagedStoreArgs args, PagedDividers d) {
  paged_store_body<C, F, T, Index>(shape, scales, args, d);
}
// 4over6 with 8 thread blocks an SM: 64 registers (80 free) and faster (run 39: paged 4over6 56 ->
// 60%); with K+V pairs it spills 88 bytes, and (128, 7) (72 registers, 24 bytes) runs no faster,
// (128, 6) and (128, 5) slower (runs 46, 50). The same bounds on every kernel raised the others'
// registers (nvfp4 40 -> 64) and slowed them. Session 8 (runs 54-58): V prefetched into L1 with K's
// load, 72 -> 75-76%; holding V, or the next item's chunks, in registers spills and runs slower
// (60-70%) at (128, 8), (128, 7) and (128, 6); so do one rolled copy of the chunk code for K and V, and
// one resident wave of thread blocks.
template <int C, PagedFormat F, DType T, typename Index>
__global__ void __launch_bounds__(kThreads, 8)
    paged_store_kernel_occupied(PagedStoreShape shape, PagedScales scales, PagedStoreArgs args, PagedDividers d) {
  paged_store_body<C, F, T, Index>(shape, scales, args, d);
}
template <int C>
constexpr bool kOccupiedOf = C != kGeneric && kFixed[C].style == TwoLevel::four_over_six;

// Launches configuration C (kGeneric: the runtime recipe) of layout F for input T with index
// type Index. The fixed NVFP4 instantiations are explicit instantiations in their own units.
template <int C, PagedFormat F, DType T, typename Index>
cudaError_t launch_kernel(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, const PagedDividers& d,
                   int grid, cudaStream_t stream) {
  if constexpr (kOccupiedOf<C>) {
    paged_store_kernel_occupied<C, F, T, Index><<<grid, kThreads, 0, stream>>>(s, scales, a, d);
  } else {
    paged_store_kernel<C, F, T, Index><<<grid, kThreads, 0, stream>>>(s, scales, a, d);
  }
  return cudaGetLastError();
}

// Configurations 0 .. kFixedNvfp4 - 1 are the NVFP4 ones, each compiled in its own units (the
// list in kernels/CMakeLists.txt and KVQ_OWN_UNITS in paged_store_device.cu).
inline constexpr int kFixedNvfp4 = 5;
constexpr bool nvfp4_first() {
  for (int i = 0; i < kFixedCount; ++i)
    if ((kFixed[i].element == FormatId::e2m1) != (i < kFixedNvfp4)) return false;
  return true;
}
static_assert(nvfp4_first(), "the NVFP4 configurations come first, kFixedNvfp4 of them");

}  // namespace kvq::kernels::paged_kernel
