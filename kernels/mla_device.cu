// MLA and prefill-workspace kernels (kernels/mla_kernels.hpp, the same per-chunk code the CPU
// twins run), grid-stride: a thread per 16-byte output chunk (requantize), a warp per slot
// (dequantize) or token (quantize), a CTA per page side (workspace).
#include <cuda_runtime.h>

#include "kernels/mla_kernels.hpp"

namespace kvq::kernels {
namespace {

constexpr int kThreads = 128;

int grid_of(std::int64_t work) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const std::int64_t wanted = (work + kThreads - 1) / kThreads, cap = static_cast<std::int64_t>(sms > 0 ? sms : 1) * 32;
  return static_cast<int>(wanted < cap ? wanted : cap);
}

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

// A warp per token, in pieces of 8 nope dims (16 bytes of BF16 in, 8 codes out): lane j takes
// pieces j and j + 32, so that each of a warp's loads and stores is contiguous (as a lane's 16-dim
// chunk, its two 16-byte loads sat at a 32-byte lane stride: docs/performance.md). The
// lanes of a tile (tile / 8 of them, aligned groups) combine their maxima by xor shuffles, each lane
// encodes its pieces under the layout's tile rule (mla_tile_recipe; a code depends on its value
// and the tile's max alone, so the bytes are the twin's, which encodes 16-dim chunks), lane 0
// gathers the tile scale words and writes the scale record, lanes 0..7 copy the rope. A warp loads
// its next token (slot, nope and rope words) before it works on this one, so that a token's loads
// are in flight during the previous token's work; the slot's record and tail offsets are found
// once a token (MlaCacheShape::bases). kAligned: x and the cache are 16-byte aligned (every
// access is then aligned to its width: no run-time tests). At most 64 registers, 8 thread blocks an
// SM (MODEL1's kernel took 70 unbounded: 7 blocks; no spill at 64).
template <MlaLayoutId L, bool kAligned>
__global__ void __launch_bounds__(kThreads, 8)
    quantize_kernel(MlaCacheShape c, const std::uint16_t* x, const std::int64_t* slot_mapping, std::int64_t num_tokens,
                    std::uint8_t* cache) {
  c.layout = L;  // the layout a constant: offsets fold at compile time
  constexpr MlaLayout l = mla_layout(L);
  constexpr int kPiece = kQuantChunk / 2;
  constexpr int pieces = l.nope_dims() / kPiece;
  constexpr int per_tile = l.tile / kPiece;  // lanes a tile, in each half
  constexpr int first_tiles = 32 * kPiece / l.tile;  // the tiles of pieces 0..31
  constexpr Recipe r = mla_tile_recipe(l);
  static_assert(mla_tile_ignores_nan(r));
  static_assert(pieces > 32 && pieces <= 64 && pieces % per_tile == 0 && mla_rope_chunks(l) <= 32 &&
                32 % per_tile == 0);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const bool second = lane + 32 < pieces, rope_lane = lane < mla_rope_chunks(l);
  const std::int64_t warps = item_stride() / 32;
  struct TokenLoads {
    std::int64_t slot = -1;
    std::uint32_t nope[2][kPiece / 2] = {};
    std::uint32_t rope[4] = {};
  };
  const auto load = [&](std::int64_t row) {
    TokenLoads t;
    t.slot = slot_mapping[row];
    mla_load_nope_words<kPiece, kAligned>(l, x, row, lane, t.nope[0]);
    if (second) mla_load_nope_words<kPiece, kAligned>(l, x, row, lane + 32, t.nope[1]);
    if (rope_lane) mla_load_rope_chunk<kAligned>(l, x, row, lane, t.rope);
    return t;
  };
  std::int64_t row = first_item() / 32;
  TokenLoads token;
  if (row < num_tokens) token = load(row);
  for (; row < num_tokens; row += warps) {
    TokenLoads next;
    if (row + warps < num_tokens) next = load(row + warps);
    const std::int64_t slot = token.slot;
    if (slot >= 0 && slot < c.slots()) {  // the whole warp takes or skips the token
      const MlaSlotBases b = c.bases(slot);
      float values[2][kPiece];
      // The tiles' maxima; their rule ignores NaN elements (mla_tile_ignores_nan), so m.nan stays unset.
      SpanMax m[2];
      KVQ_UNROLL
      for (int h = 0; h < 2; ++h) {
        if (h == 0 || second) m[h].max = mla_nope_chunk_values<kPiece>(token.nope[h], values[h]).max;
        KVQ_UNROLL
        for (int offset = per_tile / 2; offset > 0; offset /= 2)
          m[h] = combine({__shfl_xor_sync(0xffffffffu, m[h].max, offset), false}, m[h]);
      }
      std::uint8_t code[2] = {};  // each piece's tile scale code
      code[0] = mla_store_nope_chunk<kPiece, kAligned>(l, r, values[0], m[0], cache, b, lane);
      if (second) code[1] = mla_store_nope_chunk<kPiece, kAligned>(l, r, values[1], m[1], cache, b, lane + 32);
      const std::uint32_t word[2] = {mla_tile_scale_word_of_code(l, r, m[0], code[0]),
                                     mla_tile_scale_word_of_code(l, r, m[1], code[1])};
      std::uint32_t words[kMlaMaxTiles];
      KVQ_UNROLL
      for (int t = 0; t < l.tiles(); ++t)
        words[t] = t < first_tiles ? __shfl_sync(0xffffffffu, word[0], t * per_tile)
                                   : __shfl_sync(0xffffffffu, word[1], (t - first_tiles) * per_tile);
      if (lane == 0) mla_store_tile_scales(l, words, cache, b);
      if (rope_lane) mla_store_rope_chunk<kAligned>(l, token.rope, cache, b, lane);
    }
    token = next;
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
  requantize_576_to_656_kernel<<<grid_of(slots * kRequantChunks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      slots, block_size, src, k_scale, mode, dst);
  return launched();
}

Status mla_quantize(const MlaCacheShape& c, const std::uint16_t* x, const std::int64_t* slot_mapping,
                    std::int64_t num_tokens, std::uint8_t* cache, void* stream) {
  if (auto e = validate_quantize(c, num_tokens); !e.ok()) return e;
  if (num_tokens == 0) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  const int grid = grid_of(num_tokens * 32);  // a warp a token
  const MlaCacheShape split = c.with_slot_split();
  const auto launch = [&]<MlaLayoutId L>() {
    if (aligned16(x) && aligned16(cache))
      quantize_kernel<L, true><<<grid, kThreads, 0, st>>>(split, x, slot_mapping, num_tokens, cache);
    else
      quantize_kernel<L, false><<<grid, kThreads, 0, st>>>(split, x, slot_mapping, num_tokens, cache);
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
  const int grid = grid_of(c.slots() * 32);  // a warp a slot
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
  workspace_kernel<<<grid_of(w.page_sides() * kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      w, cache, block_tables, cu_seq_lens, factor_k, factor_v, k_out, v_out);
  return launched();
}

}  // namespace device
}  // namespace kvq::kernels
