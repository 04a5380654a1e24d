// Fused RoPE + FP8 quantize + paged append, and the unfused pair: one thread per work item (a head's
// chunk of <= 16 elements), grid-stride; the per-item code is kernels/rope_append.hpp, the same the
// CPU twins run. Input type and RoPE style are template constants.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/rope_append.hpp"

namespace kvq::kernels {
namespace {

constexpr int kThreads = 256;

template <DType T, RopeStyle S, bool kPaged>
__global__ void rope_kernel(RopeShape shape, RopeInputs in, QOutputs q, KvBuffers out, PageTable t) {
  RopeShape s = shape;
  s.input = T;
  s.style = S;
  const int items = items_per_token(s);
  const std::int64_t total = s.tokens * items;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t token = k / items;
    const RopeItem it = rope_item(s, static_cast<int>(k % items));
    if (it.count == kRopeChunk) {
      rope_item_work<kRopeChunk>(s, in, q, out, t, kPaged, token, it);
    } else {
      rope_item_work<0>(s, in, q, out, t, kPaged, token, it);
    }
  }
}

// K/V items only: item q_items + (k mod kv_items) of token k / kv_items.
__global__ void append_kernel(RopeShape s, KvBuffers contiguous, KvBuffers cache, PageTable t) {
  const int q_items = s.q_heads * head_chunks(s), kv_items = items_per_token(s) - q_items;
  const std::int64_t total = s.tokens * kv_items;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    append_item_work(s, contiguous, cache, t, k / kv_items, rope_item(s, q_items + static_cast<int>(k % kv_items)));
}

int grid_for(std::int64_t work) {
  return static_cast<int>(std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1, std::int64_t{1} << 20));
}

std::string launched() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

template <bool kPaged>
std::string launch_rope(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& out,
                        const PageTable& t, void* stream) {
  const std::int64_t work = s.tokens * items_per_token(s);
  if (work == 0) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  const int grid = grid_for(work);
  auto with_style = [&]<DType T>() {
    if (s.style == RopeStyle::neox) {
      rope_kernel<T, RopeStyle::neox, kPaged><<<grid, kThreads, 0, st>>>(s, in, q, out, t);
    } else {
      rope_kernel<T, RopeStyle::gptj, kPaged><<<grid, kThreads, 0, st>>>(s, in, q, out, t);
    }
  };
  switch (s.input) {
    case DType::fp32: with_style.template operator()<DType::fp32>(); break;
    case DType::bf16: with_style.template operator()<DType::bf16>(); break;
    case DType::fp16: with_style.template operator()<DType::fp16>(); break;
  }
  return launched();
}

}  // namespace

namespace device {

std::string rope_append(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& cache,
                        const PageTable& t, void* stream) {
  std::string e = validate(s, in);
  if (e.empty()) e = validate_q(s, q);
  if (e.empty()) e = validate_buffers(s, cache, s.cache_slots(), "cache");
  if (e.empty()) e = validate_table(s, t);
  return e.empty() ? launch_rope<true>(s, in, q, cache, t, stream) : e;
}

std::string rope_quantize(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& contiguous,
                          const std::int32_t* batch_indices, void* stream) {
  std::string e = validate(s, in);
  if (e.empty()) e = validate_q(s, q);
  if (e.empty()) e = validate_buffers(s, contiguous, s.tokens, "contiguous");
  PageTable t;
  t.batch_indices = batch_indices;
  return e.empty() ? launch_rope<false>(s, in, q, contiguous, t, stream) : e;
}

std::string append_paged(const RopeShape& s, const KvBuffers& contiguous, const KvBuffers& cache, const PageTable& t,
                         void* stream) {
  std::string e = validate(s);
  if (e.empty()) e = validate_buffers(s, contiguous, s.tokens, "contiguous");
  if (e.empty()) e = validate_buffers(s, cache, s.cache_slots(), "cache");
  if (e.empty()) e = validate_table(s, t);
  const std::int64_t work = s.tokens * (items_per_token(s) - s.q_heads * head_chunks(s));
  if (!e.empty() || work == 0) return e;
  append_kernel<<<grid_for(work), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(s, contiguous, cache, t);
  return launched();
}

}  // namespace device
}  // namespace kvq::kernels
