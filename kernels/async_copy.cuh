// Copies from global to shared memory that complete later (cp.async, sm_80 and later): a thread
// issues copies, closes them into a group (commit), and waits until at most N of its groups are
// still in flight (wait_groups<N>). A thread sees its own completed copies after the wait; other
// threads' copies after the wait and a barrier (__syncwarp, __syncthreads). Nvcc only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "cp.async needs sm_80 or later (the build targets sm_90)"
#endif

namespace kvq::kernels::async_copy {

__device__ inline std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes, past L1 (streamed input); shared and global 16-byte aligned.
__device__ inline void copy16(void* shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address(shared)), "l"(global) : "memory");
}
// 8 bytes through L1 (a value many threads read, such as a token's slot); both 8-byte aligned.
__device__ inline void copy8(void* shared, const void* global) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(shared_address(shared)), "l"(global) : "memory");
}
__device__ inline void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ inline void wait_groups() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace kvq::kernels::async_copy
