// Fused RoPE + FP8 quantize + paged append, and the unfused pair: one thread per work item (a head's
// chunk: 16 elements, or 16 NeoX frequency pairs), grid-stride; the per-item code is
// kernels/rope_append.hpp, the same the CPU twins run. Input type, RoPE style and the index width
// are template constants.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/rope_append.hpp"

namespace kvq::kernels {
namespace {

constexpr int kThreads = 256;

// Work index k = token * items + item: 32-bit arithmetic when the whole range (plus one grid
// stride) fits, 64-bit otherwise (Index is std::uint32_t or std::int64_t).
template <DType T, RopeStyle S, bool kPaged, typename Index>
__global__ void rope_kernel(RopeShape shape, RopeInputs in, QOutputs q, KvBuffers out, PageTable t) {
  RopeShape s = shape;
  s.input = T;
  s.style = S;
  const Index items = static_cast<Index>(items_per_token(s));
  const Index total = static_cast<Index>(s.tokens) * items;
  for (Index k = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index token = k / items;
    rope_item_work(s, in, q, out, t, kPaged, static_cast<std::int64_t>(token),
                   rope_item(s, static_cast<int>(k - token * items)));
  }
}

// K/V items only: item q_items + (k mod kv_items) of token k / kv_items.
template <RopeStyle S, typename Index>
__global__ void append_kernel(RopeShape shape, KvBuffers contiguous, KvBuffers cache, PageTable t) {
  RopeShape s = shape;
  s.style = S;
  const int q_items = s.q_heads * head_chunks(s);
  const Index kv_items = static_cast<Index>(items_per_token(s) - q_items);
  const Index total = static_cast<Index>(s.tokens) * kv_items;
  for (Index k = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index token = k / kv_items;
    append_item_work(s, contiguous, cache, t, static_cast<std::int64_t>(token),
                     rope_item(s, q_items + static_cast<int>(k - token * kv_items)));
  }
}

constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;
int grid_for(std::int64_t work) {
  return static_cast<int>(std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}
// 32-bit work indices: the range plus one grid stride stays below 2^32.
bool index32(std::int64_t work) { return work < (std::int64_t{1} << 31); }

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
  auto with_index = [&]<DType T, RopeStyle S>() {
    if (index32(work)) {
      rope_kernel<T, S, kPaged, std::uint32_t><<<grid, kThreads, 0, st>>>(s, in, q, out, t);
    } else {
      rope_kernel<T, S, kPaged, std::int64_t><<<grid, kThreads, 0, st>>>(s, in, q, out, t);
    }
  };
  auto with_style = [&]<DType T>() {
    if (s.style == RopeStyle::neox) {
      with_index.template operator()<T, RopeStyle::neox>();
    } else {
      with_index.template operator()<T, RopeStyle::gptj>();
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
  const auto st = static_cast<cudaStream_t>(stream);
  auto with_index = [&]<RopeStyle S>() {
    if (index32(work)) {
      append_kernel<S, std::uint32_t><<<grid_for(work), kThreads, 0, st>>>(s, contiguous, cache, t);
    } else {
      append_kernel<S, std::int64_t><<<grid_for(work), kThreads, 0, st>>>(s, contiguous, cache, t);
    }
  };
  if (s.style == RopeStyle::neox) {
    with_index.template operator()<RopeStyle::neox>();
  } else {
    with_index.template operator()<RopeStyle::gptj>();
  }
  return launched();
}

}  // namespace device
}  // namespace kvq::kernels
