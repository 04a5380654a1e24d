// Fused RoPE + FP8 quantize + paged append, and the unfused pair: two, four or eight warps per token
// (grid-stride; rope_warps_per_token; the append alone: a warp per chunk of tokens, see append_kernel),
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

// Token group w of the grid (warps_per_token warps: 2, 4 or 8) takes tokens w, w + groups, ...: the
// token's slot and cos/sin row are found once per lane, then amortised over its groups. The
// whole-group BF16/FP16 kernels fit 48 registers with no stack (5 blocks, 40 warps an SM); the others
// keep at most 64.
constexpr int min_blocks(DType t, bool whole) { return whole && t != DType::fp32 ? 5 : 4; }

template <DType T, RopeStyle S, bool kPaged, bool kWhole>
__global__ void __launch_bounds__(kThreads, min_blocks(T, kWhole))
    rope_kernel(RopeShape shape, RopeInputs in, QOutputs q, KvBuffers out, PageTable t, int warps_per_token) {
  RopeShape s = shape;
  s.input = T;
  s.style = S;
  const RopeParts p = rope_parts(s, kPaged);
  const int warp = static_cast<int>(threadIdx.x / 32), tokens_per_block = kWarps / warps_per_token;
  const int lane = warp % warps_per_token * 32 + static_cast<int>(threadIdx.x % 32);
  const std::int64_t stride = std::int64_t{gridDim.x} * tokens_per_block;
  for (std::int64_t token = std::int64_t{blockIdx.x} * tokens_per_block + warp / warps_per_token; token < s.tokens;
       token += stride)
    rope_token_work<kWhole>(s, p, in, q, out, t, kPaged, token, lane, 32 * warps_per_token);
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
  const RopeParts p = append_parts(s);
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
                   const PageTable& t, void* stream, int forced_warps) {
  if (forced_warps != 0 && forced_warps != 2 && forced_warps != 4 && forced_warps != 8)
    return "warps_per_token must be 0 (chosen by the batch), 2, 4 or 8, got " + std::to_string(forced_warps);
  if (s.tokens == 0) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const int warps_per_token = forced_warps ? forced_warps : rope_warps_per_token(s.tokens, sms);
  const int grid = grid_for(s.tokens, kWarps / warps_per_token);
  const bool whole = rope_groups_whole(s, in, q, out);
  auto with_style = [&]<DType T>() {
    auto launch = [&]<RopeStyle S>() {
      if (whole) {
        rope_kernel<T, S, kPaged, true><<<grid, kThreads, 0, st>>>(s, in, q, out, t, warps_per_token);
      } else {
        rope_kernel<T, S, kPaged, false><<<grid, kThreads, 0, st>>>(s, in, q, out, t, warps_per_token);
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
                   const PageTable& t, void* stream, int warps_per_token) {
  Status e = validate(s, in);
  if (e.ok()) e = validate_q(s, q);
  if (e.ok()) e = validate_buffers(s, cache, s.cache_slots(), "cache");
  if (e.ok()) e = validate_table(s, t);
  return e.ok() ? launch_rope<true>(s, in, q, cache, t, stream, warps_per_token) : e;
}

Status rope_quantize(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& contiguous,
                     const std::int32_t* batch_indices, void* stream, int warps_per_token) {
  Status e = validate(s, in);
  if (e.ok()) e = validate_q(s, q);
  if (e.ok()) e = validate_buffers(s, contiguous, s.tokens, "contiguous");
  PageTable t;
  t.batch_indices = batch_indices;
  return e.ok() ? launch_rope<false>(s, in, q, contiguous, t, stream, warps_per_token) : e;
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
