// Fused RoPE + FP8 quantize + paged append, and the unfused pair: two warps per token (grid-stride; the
// append alone: a warp per chunk of tokens, see append_kernel),
// its lanes taking the token's work groups in turn (rope: 8 pairs; nope / V: 32 elements); the
// per-token and per-group code is kernels/rope_append.hpp, the same the CPU twins run. Input type,
// RoPE style, paged or contiguous output and whole groups (rope_groups_whole) are template constants.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/rope_append.hpp"

namespace kvq::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// The rope kernel spreads a token over two warps (64 lanes): half the work a warp, so the grid's last
// partial wave is short (16384 MLA tokens are ~6 waves of 5 blocks an SM instead of ~3).
constexpr int kWarpsPerToken = 2;
constexpr int kTokensPerBlock = kWarps / kWarpsPerToken;

// Token pair w of the grid takes tokens w, w + pairs, ...: the token's slot and cos/sin row are found
// once per lane, then amortised over its groups. The whole-group BF16/FP16 kernels fit 48 registers
// with no stack (5 blocks, 40 warps an SM); the others keep at most 64.
constexpr int min_blocks(DType t, bool whole) { return whole && t != DType::fp32 ? 5 : 4; }

template <DType T, RopeStyle S, bool kPaged, bool kWhole>
__global__ void __launch_bounds__(kThreads, min_blocks(T, kWhole))
    rope_kernel(RopeShape shape, RopeInputs in, QOutputs q, KvBuffers out, PageTable t) {
  RopeShape s = shape;
  s.input = T;
  s.style = S;
  const RopeParts p = rope_parts(s, kPaged);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = warp % kWarpsPerToken * 32 + static_cast<int>(threadIdx.x % 32);
  const std::int64_t stride = std::int64_t{gridDim.x} * kTokensPerBlock;
  for (std::int64_t token = std::int64_t{blockIdx.x} * kTokensPerBlock + warp / kWarpsPerToken; token < s.tokens;
       token += stride)
    rope_token_work<kWhole>(s, p, in, q, out, t, kPaged, token, lane, 32 * kWarpsPerToken);
}

// K/V groups only: a warp takes a chunk of `chunk` (<= 32) consecutive tokens, its lanes look up the
// chunk's slots at once (token_slot's dependent index loads overlap instead of preceding every
// token's copy), then the warp's lanes take the chunk's (token, group) items in turn, so no lane
// idles on a token's last round (an MLA token is 20 groups). 5 blocks, 40 warps an SM.
template <RopeStyle S>
__global__ void __launch_bounds__(kThreads, 5)
    append_kernel(RopeShape shape, KvBuffers contiguous, KvBuffers cache, PageTable t, int chunk) {
  RopeShape s = shape;
  s.style = S;
  const RopeParts p = rope_parts(s, true);
  const int lane = static_cast<int>(threadIdx.x % 32), groups = append_groups(p), items = chunk * groups;
  const std::int64_t step = std::int64_t{gridDim.x} * kWarps * chunk;
  for (std::int64_t first = (std::int64_t{blockIdx.x} * kWarps + threadIdx.x / 32) * chunk; first < s.tokens;
       first += step) {  // uniform over the warp
    std::int64_t page = 0, entry = 0;
    const bool placed = lane < chunk && first + lane < s.tokens && token_slot(s, t, first + lane, &page, &entry);
    const unsigned placed_lanes = __ballot_sync(0xFFFFFFFFu, placed);
    for (int base = 0; base < items; base += 32) {  // uniform: every lane shuffles
      const int item = base + lane, j = item < items ? item / groups : 0;
      const std::int64_t page_j = __shfl_sync(0xFFFFFFFFu, page, j), entry_j = __shfl_sync(0xFFFFFFFFu, entry, j);
      if (item < items && ((placed_lanes >> j) & 1u))
        append_group_work(s, contiguous, cache, first + j, page_j, entry_j, append_group(p, item - j * groups));
    }
  }
}

constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;
int grid_for(std::int64_t tokens, int tokens_per_block) {
  return static_cast<int>(std::clamp<std::int64_t>((tokens + tokens_per_block - 1) / tokens_per_block, 1, kMaxBlocks));
}

Status launched() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

template <bool kPaged>
Status launch_rope(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& out,
                   const PageTable& t, void* stream) {
  if (s.tokens == 0) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  const int grid = grid_for(s.tokens, kTokensPerBlock);
  const bool whole = rope_groups_whole(s, in, q, out);
  auto with_style = [&]<DType T>() {
    auto launch = [&]<RopeStyle S>() {
      if (whole) {
        rope_kernel<T, S, kPaged, true><<<grid, kThreads, 0, st>>>(s, in, q, out, t);
      } else {
        rope_kernel<T, S, kPaged, false><<<grid, kThreads, 0, st>>>(s, in, q, out, t);
      }
    };
    if (s.style == RopeStyle::neox) {
      launch.template operator()<RopeStyle::neox>();
    } else {
      launch.template operator()<RopeStyle::gptj>();
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

Status rope_append(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& cache,
                   const PageTable& t, void* stream) {
  Status e = validate(s, in);
  if (e.ok()) e = validate_q(s, q);
  if (e.ok()) e = validate_buffers(s, cache, s.cache_slots(), "cache");
  if (e.ok()) e = validate_table(s, t);
  return e.ok() ? launch_rope<true>(s, in, q, cache, t, stream) : e;
}

Status rope_quantize(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& contiguous,
                     const std::int32_t* batch_indices, void* stream) {
  Status e = validate(s, in);
  if (e.ok()) e = validate_q(s, q);
  if (e.ok()) e = validate_buffers(s, contiguous, s.tokens, "contiguous");
  PageTable t;
  t.batch_indices = batch_indices;
  return e.ok() ? launch_rope<false>(s, in, q, contiguous, t, stream) : e;
}

Status append_paged(const RopeShape& s, const KvBuffers& contiguous, const KvBuffers& cache, const PageTable& t,
                    void* stream) {
  Status e = validate(s);
  if (e.ok()) e = validate_buffers(s, contiguous, s.tokens, "contiguous");
  if (e.ok()) e = validate_buffers(s, cache, s.cache_slots(), "cache");
  if (e.ok()) e = validate_table(s, t);
  if (!e.ok() || s.tokens == 0) return e;
  const auto st = static_cast<cudaStream_t>(stream);
  // A resident grid (5 blocks an SM) of warps taking chunks in turn; chunks of up to 32 tokens, so
  // small that each warp takes about 16 or more (the last round's imbalance stays small).
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const std::int64_t resident_blocks = std::int64_t{sms > 0 ? sms : 1} * 5;
  const int chunk = static_cast<int>(std::clamp<std::int64_t>(s.tokens / (resident_blocks * kWarps * 16), 1, 32));
  const int grid = static_cast<int>(std::min<std::int64_t>(grid_for(s.tokens, kWarps * chunk), resident_blocks));
  if (s.style == RopeStyle::neox) {
    append_kernel<RopeStyle::neox><<<grid, kThreads, 0, st>>>(s, contiguous, cache, t, chunk);
  } else {
    append_kernel<RopeStyle::gptj><<<grid, kThreads, 0, st>>>(s, contiguous, cache, t, chunk);
  }
  return launched();
}

}  // namespace device
}  // namespace kvq::kernels
