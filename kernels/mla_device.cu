// MLA and prefill-workspace kernels (kernels/mla_kernels.hpp, the same per-chunk code the CPU
// twins run), grid-stride: a thread per 16-byte output chunk (requantize), a warp per slot
// (dequantize) or token (quantize), a CTA per page side (workspace); each on the grid measured
// fastest for it (launch::grid_for; docs/performance.md "Grids").
#include <cuda_runtime.h>

#include "kernels/async_copy.cuh"
#include "kernels/device_launch.cuh"
#include "kernels/mla_kernels.hpp"

namespace kvq::kernels {
namespace {

constexpr int kThreads = 128;

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

Status launched() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

__device__ inline std::int64_t first_item() { return blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; }
__device__ inline std::int64_t item_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// Items [begin, end) strided from `first` by `stride`, kBatch a thread an iteration: load(k) of each
// before the first store(k, loaded); one item at a time (8-16 bytes) leaves too few bytes in flight
// to keep the memory system busy (docs/performance.md "MLA layouts and the NVFP4 paged workspace").
constexpr int kBatch = 4;
template <class Load, class Store>
__device__ inline void batched_range(std::int64_t first, std::int64_t total, std::int64_t stride, const Load& load,
                                     const Store& store) {
  using Loaded = decltype(load(std::int64_t{}));
  for (; first < total; first += kBatch * stride) {
    Loaded loaded[kBatch];
    KVQ_UNROLL
    for (int i = 0; i < kBatch; ++i)
      if (first + i * stride < total) loaded[i] = load(first + i * stride);
    KVQ_UNROLL
    for (int i = 0; i < kBatch; ++i)
      if (first + i * stride < total) store(first + i * stride, loaded[i]);
  }
}
// Grid-strided items [0, total).
template <class Load, class Store>
__device__ inline void batched_items(std::int64_t total, const Load& load, const Store& store) {
  batched_range(first_item(), total, item_stride(), load, store);
}

// Item k of kPerSlot items a slot: its slot k / kPerSlot and index k % kPerSlot: a shift and a mask
// for a power of two, else in 32 bits where k fits (a 64-bit division by a constant is a longer
// multiply-high sequence; docs/performance.md "MLA layouts and the NVFP4 paged workspace").
struct SlotItem {
  std::int64_t slot = 0;
  int index = 0;
};
template <int kPerSlot>
__device__ inline SlotItem slot_item(std::int64_t k) {
  const auto u = static_cast<std::uint64_t>(k);  // k >= 0
  if constexpr ((kPerSlot & (kPerSlot - 1)) == 0)
    return {static_cast<std::int64_t>(u / kPerSlot), static_cast<int>(u % kPerSlot)};
  if ((u >> 32) == 0) {
    const auto k32 = static_cast<std::uint32_t>(k);
    return {static_cast<std::int64_t>(k32 / kPerSlot), static_cast<int>(k32 % kPerSlot)};
  }
  return {k / kPerSlot, static_cast<int>(k % kPerSlot)};
}

__global__ void requantize_576_to_656_kernel(std::int64_t slots, std::int64_t block_size, const std::uint8_t* src,
                                             float k_scale, KScale mode, std::uint8_t* dst) {
  batched_items(
      slots * kRequantChunks,
      [&](std::int64_t k) {
        const SlotItem it = slot_item<kRequantChunks>(k);
        return requantize_576_to_656_load(block_size, src, it.slot, it.index);
      },
      [&](std::int64_t k, const MlaChunkWords& words) {
        const SlotItem it = slot_item<kRequantChunks>(k);
        requantize_576_to_656_store(block_size, words, k_scale, mode, dst, it.slot, it.index);
      });
}

// A warp per token: lane j takes nope chunk j (16 dims, of tile j / (tile / 16)) and rope chunk j
// where they exist. The lanes of a tile (8 for 656, 4 for MODEL1: aligned groups) combine their
// maxima by xor shuffles, each lane encodes its chunk under the layout's tile rule (mla_tile_recipe)
// and the tile's first lane stores the tile's scale word (and MODEL1's last one the pad byte); the
// twin runs the same chunk functions and combines the maxima in a loop (max over non-NaN
// magnitudes does not depend on the order; a code depends on its value and the tile's max alone),
// so the bytes are the same. The slot's record and tail offsets are found once a token
// (MlaCacheShape::bases).
template <MlaLayoutId L>
struct QuantizeLanes {
  static constexpr MlaLayout l = mla_layout(L);
  static constexpr int per_tile = l.tile / kQuantChunk;  // lanes a tile
  static_assert(mla_nope_chunks(l) <= 32 && mla_rope_chunks(l) <= 32 && 32 % per_tile == 0);
  static constexpr bool nope(int lane) { return lane < mla_nope_chunks(l); }
  static constexpr bool rope(int lane) { return lane < mla_rope_chunks(l); }
};
// A lane's part of a token: the slot, its nope chunk's BF16 pair words and its rope chunk's words.
struct TokenLoads {
  std::int64_t slot = -1;
  std::uint32_t nope[kQuantChunk / 2] = {};
  std::uint32_t rope[4] = {};
};
template <MlaLayoutId L, bool kAligned>
__device__ __forceinline__ void quantize_token(const MlaCacheShape& c, const TokenLoads& token, int lane,
                                               std::uint8_t* cache) {
  using Q = QuantizeLanes<L>;
  constexpr MlaLayout l = Q::l;
  constexpr Recipe r = mla_tile_recipe(l);
  static_assert(mla_tile_ignores_nan(r));
  if (token.slot < 0 || token.slot >= c.slots()) return;  // the whole warp takes or skips the token
  const MlaSlotBases b = c.bases(token.slot);
  float values[kQuantChunk];
  // The tile's max; its rule ignores NaN elements (mla_tile_ignores_nan), so m.nan stays unset. The
  // lanes past the nope chunks take part in the shuffles as a group of their own.
  SpanMax m;
  if (Q::nope(lane)) m.max = mla_nope_chunk_values(token.nope, values).max;
  KVQ_UNROLL
  for (int offset = Q::per_tile / 2; offset > 0; offset /= 2)
    m = combine({__shfl_xor_sync(0xffffffffu, m.max, offset), false}, m);
  if (Q::nope(lane)) {
    const std::uint8_t code = mla_store_nope_chunk<kQuantChunk, kAligned>(l, r, values, m, cache, b, lane);
    if (lane % Q::per_tile == 0)
      mla_store_tile_scale<kAligned>(l, mla_tile_scale_word_of_code(l, r, m, code), cache, b, lane / Q::per_tile);
  }
  if (Q::rope(lane)) mla_store_rope_chunk<kAligned>(l, token.rope, cache, b, lane);
}

// Buffers not 16-byte aligned: a warp loads its next token (slot, nope and rope words) into
// registers before it works on this one, so that a token's loads are in flight during the previous
// token's work. At most 64 registers, 8 thread blocks an SM.
template <MlaLayoutId L>
__global__ void __launch_bounds__(kThreads, 8)
    quantize_kernel(MlaCacheShape c, const std::uint16_t* x, const std::int64_t* slot_mapping, std::int64_t num_tokens,
                    std::uint8_t* cache) {
  using Q = QuantizeLanes<L>;
  constexpr MlaLayout l = Q::l;
  c.layout = L;  // the layout a constant: offsets fold at compile time
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t warps = item_stride() / 32;
  const auto load = [&](std::int64_t row) {
    TokenLoads t;
    t.slot = slot_mapping[row];
    if (Q::nope(lane)) mla_load_nope_words(l, x, row, lane, t.nope);
    if (Q::rope(lane)) mla_load_rope_chunk(l, x, row, lane, t.rope);
    return t;
  };
  std::int64_t row = first_item() / 32;
  TokenLoads token;
  if (row < num_tokens) token = load(row);
  for (; row < num_tokens; row += warps) {
    TokenLoads next;
    if (row + warps < num_tokens) next = load(row + warps);
    quantize_token<L, false>(c, token, lane, cache);
    token = next;
  }
}

// x and the cache 16-byte aligned (every access then aligned to its width: no run-time tests): a
// warp copies its tokens' rows kStagedTokens - 1 ahead into shared memory (cp.async,
// kernels/async_copy.cuh; 16-byte pieces j, j + 32 and j + 64 a lane, so that each copy of the
// warp is contiguous) and loads its next token's slot into a register; its lanes then read their
// chunks from the stage. One token ahead in registers, the kernel waited on its loads (72% of its
// stall samples on their first use; docs/performance.md).
constexpr int kStagedTokens = 3;
constexpr int kMaxRowPieces = 72;  // 16-byte pieces of a token's row: 1152 bytes (656), 1024 (MODEL1)
static_assert(kMlaFp8NopeBlockScaleBf16Rope.dims() * 2 == 16 * kMaxRowPieces &&
              kMlaModel1Fp8Sparse.dims() * 2 <= 16 * kMaxRowPieces);
struct TokenStage {
  uint4 piece[kMaxRowPieces];  // the token's row of x
};
template <MlaLayoutId L>
__global__ void __launch_bounds__(kThreads, 8)
    quantize_kernel_staged(MlaCacheShape c, const std::uint16_t* x, const std::int64_t* slot_mapping,
                           std::int64_t num_tokens, std::uint8_t* cache) {
  using Q = QuantizeLanes<L>;
  constexpr MlaLayout l = Q::l;
  constexpr int pieces = l.dims() * 2 / 16, nope_pieces = l.nope_dims() * 2 / 16;
  c.layout = L;
  __shared__ TokenStage stages[kThreads / 32][kStagedTokens];
  const int lane = static_cast<int>(threadIdx.x % 32);
  TokenStage* ring = stages[threadIdx.x / 32];
  const std::int64_t warps = item_stride() / 32;
  const auto copy = [&](std::int64_t row, TokenStage& st) {  // then a commit, whether or not row exists
    if (row >= num_tokens) return;
    const auto* from = reinterpret_cast<const uint4*>(x + row * l.dims());
    KVQ_UNROLL
    for (int k = 0; k < (pieces + 31) / 32; ++k)
      if (lane + 32 * k < pieces) async_copy::copy16(&st.piece[lane + 32 * k], from + lane + 32 * k);
  };
  std::int64_t row = first_item() / 32;
  KVQ_UNROLL
  for (int i = 0; i + 1 < kStagedTokens; ++i) {
    copy(row + i * warps, ring[i]);
    async_copy::commit();
  }
  std::int64_t next_slot = row < num_tokens ? slot_mapping[row] : -1;
  for (int s = 0; row < num_tokens; row += warps) {
    TokenLoads token;
    token.slot = next_slot;
    if (row + warps < num_tokens) next_slot = slot_mapping[row + warps];
    __syncwarp();  // every lane has read the previous token's stage before it is copied over
    copy(row + (kStagedTokens - 1) * warps, ring[s == 0 ? kStagedTokens - 1 : s - 1]);
    async_copy::commit();
    async_copy::wait_groups<kStagedTokens - 1>();  // this thread's copies of this token
    __syncwarp();                                   // and every lane's
    const TokenStage& st = ring[s];
    if (Q::nope(lane)) {
      io::split_words(st.piece[2 * lane], token.nope);
      io::split_words(st.piece[2 * lane + 1], token.nope + 4);
    }
    if (Q::rope(lane)) io::split_words(st.piece[nope_pieces + lane], token.rope);
    quantize_token<L, true>(c, token, lane, cache);
    s = s + 1 == kStagedTokens ? 0 : s + 1;
  }
}

// A warp per slot: lane j takes the 8-dim spans j, j + 32 and j + 64 that exist (MODEL1's 64 spans:
// two a lane, its rope in lanes 24..31's second span; the 576-dim layouts' 72: the rope in lanes
// 0..7's third), so that each of a warp's loads and stores is contiguous; the slot's record and tail
// offsets are found once a slot (MlaCacheShape::bases), and a warp loads its next slot's spans
// before it converts and stores this one's. The loop is written out here as in
// the quantize kernel: through a helper taking the work as a lambda, nvcc left the quantize kernel's
// work out of line (a 1664-byte stack frame, spills, ptxas 11 minutes on this file). kAligned: the cache and y are 16-byte aligned.
template <MlaLayoutId L, DType T, bool kAligned>
__global__ void dequantize_kernel(MlaCacheShape c, const std::uint8_t* cache, float k_scale, void* y) {
  c.layout = L;
  constexpr MlaLayout l = mla_layout(L);
  constexpr int spans = mla_dequantize_spans(l), per_lane = (spans + 31) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t warps = item_stride() / 32, slots = c.slots();
  struct SlotSpans {
    MlaSpanBytes span[per_lane];
  };
  const auto load = [&](std::int64_t slot) {
    SlotSpans t;
    const MlaSlotBases b = c.bases(slot);
    KVQ_UNROLL
    for (int k = 0; k < per_lane; ++k)
      if (lane + 32 * k < spans) t.span[k] = mla_load_span<kAligned>(l, cache, k_scale, b, lane + 32 * k);
    return t;
  };
  std::int64_t slot = first_item() / 32;
  SlotSpans current;
  if (slot < slots) current = load(slot);
  for (; slot < slots; slot += warps) {
    SlotSpans next;
    if (slot + warps < slots) next = load(slot + warps);
    KVQ_UNROLL
    for (int k = 0; k < per_lane; ++k)
      if (lane + 32 * k < spans) mla_store_span<kAligned>(l, current.span[k], T, y, slot, lane + 32 * k);
    current = next;
  }
}

// Blocks of CTAs walk the page sides, the threads of a CTA the 16-element blocks of one side
// (contiguous 8-byte loads, 16-byte stores), kBatch blocks' loads in flight a thread; a side's
// request, page and rows are found once a thread (nvfp4_page_side).
__global__ void workspace_kernel(WorkspaceBatch w, const std::uint8_t* cache, const std::int32_t* block_tables,
                                 const std::int32_t* cu_seq_lens, float factor_k, float factor_v, std::uint8_t* k_out,
                                 std::uint8_t* v_out) {
  w.recipe.element = FormatId::e2m1;  // what validate() admits, as constants: requantize_e4m3 folds
  w.recipe.scale = BlockScale::e4m3_two_level;
  w.rounding = WorkspaceRounding{};  // the launcher admits the single rounding alone
  for (std::int64_t side = blockIdx.x; side < w.page_sides(); side += gridDim.x) {
    const Nvfp4PageSide p = nvfp4_page_side(w, cache, block_tables, cu_seq_lens, factor_k, factor_v, k_out, v_out, side);
    batched_range(
        p.first + threadIdx.x, p.end, blockDim.x, [&](std::int64_t i) { return nvfp4_page_block_load(p, i); },
        [&](std::int64_t i, const Nvfp4BlockBytes& bytes) { nvfp4_page_block_store(w, p, i, bytes); });
  }
}

}  // namespace

namespace device {

Status mla_requantize_576_to_656(std::int64_t num_blocks, std::int64_t block_size, const std::uint8_t* src,
                                 float k_scale, KScale mode, std::uint8_t* dst, void* stream) {
  if (auto e = validate_requantize(num_blocks, block_size, k_scale); !e.ok()) return e;
  const std::int64_t slots = num_blocks * block_size;
  if (slots == 0) return {};
  // 256 blocks an SM, 128 with fast memory (docs/performance.md "Grids")
  requantize_576_to_656_kernel<<<launch::grid_for(slots * kRequantChunks, kThreads, launch::GridCap(256, 128)), kThreads, 0,
                                 static_cast<cudaStream_t>(stream)>>>(
      slots, block_size, src, k_scale, mode, dst);
  return launched();
}

Status mla_quantize(const MlaCacheShape& c, const std::uint16_t* x, const std::int64_t* slot_mapping,
                    std::int64_t num_tokens, std::uint8_t* cache, void* stream) {
  if (auto e = validate_quantize(c, num_tokens); !e.ok()) return e;
  if (num_tokens == 0) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  // A warp a token: 656 one token a warp, MODEL1 256 blocks an SM (docs/performance.md "Grids").
  const int grid = launch::grid_for(num_tokens * 32, kThreads,
                                    c.layout == MlaLayoutId::fp8_nope_block_scale_bf16_rope ? launch::kOnePass : 256);
  const MlaCacheShape split = c.with_slot_split();
  const auto launch = [&]<MlaLayoutId L>() {
    if (aligned16(x) && aligned16(cache))
      quantize_kernel_staged<L><<<grid, kThreads, 0, st>>>(split, x, slot_mapping, num_tokens, cache);
    else
      quantize_kernel<L><<<grid, kThreads, 0, st>>>(split, x, slot_mapping, num_tokens, cache);
  };
  if (c.layout == MlaLayoutId::fp8_nope_block_scale_bf16_rope)
    launch.template operator()<MlaLayoutId::fp8_nope_block_scale_bf16_rope>();
  else
    launch.template operator()<MlaLayoutId::model1_fp8_sparse>();
  return launched();
}

Status mla_dequantize(const MlaCacheShape& c, const std::uint8_t* cache, float k_scale, DType output, void* y,
                      void* stream) {
  if (auto e = validate_dequantize(c, k_scale); !e.ok()) return e;
  if (c.slots() == 0) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  // A warp a slot; 256 blocks an SM with fast memory (docs/performance.md "Grids")
  const int grid = launch::grid_for(c.slots() * 32, kThreads, launch::GridCap(launch::kOnePass, 256));
  const MlaCacheShape split = c.with_slot_split();
  const bool aligned = aligned16(cache) && aligned16(y);
  const auto launch = [&]<MlaLayoutId L>() {
    const auto with = [&]<DType T>() {
      if (aligned)
        dequantize_kernel<L, T, true><<<grid, kThreads, 0, st>>>(split, cache, k_scale, y);
      else
        dequantize_kernel<L, T, false><<<grid, kThreads, 0, st>>>(split, cache, k_scale, y);
    };
    switch (output) {
      case DType::bf16: with.template operator()<DType::bf16>(); break;
      case DType::fp16: with.template operator()<DType::fp16>(); break;
      case DType::fp32: with.template operator()<DType::fp32>(); break;
    }
  };
  switch (c.layout) {
    case MlaLayoutId::bf16: launch.template operator()<MlaLayoutId::bf16>(); break;
    case MlaLayoutId::fp8_nope_fp8_rope: launch.template operator()<MlaLayoutId::fp8_nope_fp8_rope>(); break;
    case MlaLayoutId::fp8_nope_block_scale_bf16_rope:
      launch.template operator()<MlaLayoutId::fp8_nope_block_scale_bf16_rope>();
      break;
    case MlaLayoutId::model1_fp8_sparse: launch.template operator()<MlaLayoutId::model1_fp8_sparse>(); break;
  }
  return launched();
}

Status nvfp4_paged_to_workspace(const WorkspaceBatch& w, const std::uint8_t* cache, const std::int32_t* block_tables,
                                const std::int32_t* cu_seq_lens, float factor_k, float factor_v,
                                std::uint8_t* k_out, std::uint8_t* v_out, void* stream) {
  if (auto e = validate(w, factor_k, factor_v); !e.ok()) return e;
  if (!w.rounding.reference()) return std::string("rounding: the kernel rounds the exact product once (the CPU twin models the others)");
  if (w.items() == 0) return {};
  workspace_kernel<<<launch::grid_for(w.page_sides() * kThreads, kThreads, 256), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      w, cache, block_tables, cu_seq_lens, factor_k, factor_v, k_out, v_out);
  return launched();
}

}  // namespace device
}  // namespace kvq::kernels
