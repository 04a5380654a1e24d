// One source for host and device: the macro and the few bit primitives the codec needs.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KVQ_HD __host__ __device__
#else
#define KVQ_HD
#endif

// Always inlined under nvcc: a kernel's per-block or per-chunk body must sit in the kernel, where
// the fixed kernels' recipe and input type are constants, when nvcc weighs inlining what it calls
// (not inlined, quantize_one_block once held every recipe's code twice over, and nvcc took
// minutes over it).
#if defined(__CUDACC__)
#define KVQ_KERNEL_INLINE __forceinline__
#else
#define KVQ_KERNEL_INLINE inline
#endif

// Out of line in device code: the engine-variant rules of formats/recipes.hpp, which only the
// generic kernels run (fixed kernels fold them away). Such a function takes the recipe by value
// or its fields, never a reference: a recipe whose address reaches an out-of-line call can no
// longer be folded, and every kernel then carries every rule (nvcc ran for hours, out of memory).
#if defined(__CUDACC__)
#define KVQ_VARIANT_NOINLINE __noinline__
#else
#define KVQ_VARIANT_NOINLINE
#endif

// Unroll the loop that follows in device code (a block's loops have compile-time trip counts
// in the fixed-shape kernels; unrolled, the block's arrays live in registers, not local memory).
#if defined(__CUDA_ARCH__)
#define KVQ_UNROLL _Pragma("unroll")
#else
#define KVQ_UNROLL
#endif

namespace kvq {

// Count of leading zero bits of a non-zero 64-bit word.
KVQ_HD constexpr int leading_zeros(std::uint64_t x) {
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(x));
#else
  return __builtin_clzll(x);
#endif
}

}  // namespace kvq
