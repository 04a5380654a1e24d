// Paged store ("reshape and cache", docs/paged.md): K/V tokens [T, heads, D] are quantized and
// written at slot_mapping[t] of a paged cache (kernels/paged_layout.hpp). Validation, the
// per-chunk work shared by the CPU twin and the kernel, and the entry points. Contract:
// docs/paged.md.
#pragma once

#include <cstdint>
#include <string>

#include "formats/packing.hpp"
#include "formats/recipes.hpp"
#include "kernels/block_quantize.hpp"
#include "kernels/fast_divide.hpp"
#include "kernels/paged_layout.hpp"
#include "kernels/quantize.hpp"
#include "kernels/status.hpp"

namespace kvq::kernels {

inline constexpr int kPagedChunk = 16;       // elements quantized together: one NVFP4 block, one FP8 chunk
inline constexpr int kMaxPagedHeads = 256;  // scales travel by value in the kernel's parameters

struct PagedStoreShape {
  PagedKvLayout layout;
  // FP8: a per-tensor E4M3 recipe (fp8-e4m3-tensor divides by the scale, fp8-e4m3-tensor-rcp
  // multiplies by its FP32 reciprocal). NVFP4: E2M1 elements, E4M3 two-level scale, block 16
  // (nvfp4, nvfp4-vllm, ...).
  Recipe recipe;
  std::int64_t tokens = 0;  // T
  DType input = DType::bf16;
  // Elements from one token to the next in key / value (a view of a fused qkv tensor has
  // (q_heads + 2*heads)*D); 0 means contiguous, heads*D.
  std::int64_t key_stride = 0;
  std::int64_t value_stride = 0;
  bool per_head_scales = false;  // scale of head h is k[h] / v[h]; otherwise k[0] / v[0]
  bool check_slots = true;       // device launcher: validate slot_mapping on the host first (one stream sync)
};

// Tensor parameters, host values: the recipe's own (tensor_scale): for the reference recipes the
// DECODE scales, FP8 k_scale / v_scale (value = code * scale) and NVFP4's FP32 tensor (global)
// scale g of K and of V; an encode scale or amax for the recipes that take one.
struct PagedScales {
  float k[kMaxPagedHeads] = {};
  float v[kMaxPagedHeads] = {};
};

struct PagedStoreArgs {
  const void* key = nullptr;    // [T, heads, D] of shape.input, token stride shape.key_stride
  const void* value = nullptr;  // [T, heads, D], token stride shape.value_stride
  const std::int64_t* slot_mapping = nullptr;  // [T]; slot < 0: padding, nothing written
  std::uint8_t* key_cache = nullptr;    // FP8: the K cache; NVFP4: the one kv_cache
  std::uint8_t* value_cache = nullptr;  // FP8: the V cache; NVFP4: must be null
};

// Success or a message naming the argument: geometry, recipe, scales, pointers (not the slots).
Status validate(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a);
// Success or a message naming the first bad slot_mapping entry: >= num_blocks*block_size, or a slot
// given to two tokens (rejected: the write order would decide the cache).
Status validate_slots(const PagedKvLayout& layout, const std::int64_t* slot_mapping, std::int64_t tokens);

// CPU twin: validate everything, then paged_store_item over every item.
Status paged_store_cpu(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a);

KVQ_HD inline std::int64_t token_stride(const PagedStoreShape& s, KvSide side) {
  const std::int64_t given = side == KvSide::k ? s.key_stride : s.value_stride;
  return given ? given : s.layout.heads * s.layout.head_dim;
}

// Items (paged_store_item): NVFP4 a (token, head, chunk) each, its chunk of K and then of V; FP8
// a (side, token, head, chunk) each, K's tokens first (FP8 chunks are cheap: more of them in
// flight keep the FP8 kernels faster, docs/performance.md).
KVQ_HD inline bool paged_items_pair(const PagedStoreShape& s) { return s.layout.format == PagedFormat::nvfp4; }
KVQ_HD inline std::int64_t paged_store_items(const PagedStoreShape& s) {
  return (paged_items_pair(s) ? 1 : 2) * s.tokens * s.layout.heads * (s.layout.head_dim / kPagedChunk);
}

// Whether slot indices fit 32 bits, and items, a block's bytes, a token's elements and the token
// strides 31 (items and a grid's stride then stay below 2^32 in the kernels' item loop): the kernel
// and the twin then decompose them, and compute offsets within a block and a token, in 32-bit
// arithmetic (a GPU's 64-bit division is a long software routine, a 64-bit multiply several
// instructions), with the same results.
KVQ_HD inline bool paged_store_narrow(const PagedStoreShape& s) {
  constexpr std::int64_t k31 = std::int64_t{1} << 31;
  return paged_store_items(s) < k31 && s.layout.slots() <= 0xffffffffll && s.layout.block_bytes() < k31 &&
         s.layout.heads * s.layout.head_dim < k31 && token_stride(s, KvSide::k) < k31 && token_stride(s, KvSide::v) < k31;
}

// The divisors of the item and slot decomposition, and each side's row steps (NVFP4: where a
// chunk's codes and scale lie within a block), computed once per launch for the 32-bit path (a
// valid shape with paged_store_narrow and items: each divisor in 1..2^32-1, every offset within
// a block below 2^31); defaults (unused) otherwise.
struct PagedDividers {
  FastDivide32 chunks, heads, block_size;
  RowSteps k_steps, v_steps;
  KVQ_HD const RowSteps& steps(KvSide side) const { return side == KvSide::k ? k_steps : v_steps; }
};
inline PagedDividers paged_dividers(const PagedStoreShape& s) {
  if (!paged_store_narrow(s) || paged_store_items(s) <= 0 || s.layout.block_size < 1 || s.layout.heads < 1) return {};
  return {FastDivide32(static_cast<std::uint32_t>(s.layout.head_dim / kPagedChunk)),
          FastDivide32(static_cast<std::uint32_t>(s.layout.heads)),
          FastDivide32(static_cast<std::uint32_t>(s.layout.block_size)), s.layout.row_steps(KvSide::k),
          s.layout.row_steps(KvSide::v)};
}

// What the NVFP4 chunks take beside the global scales (formats/packed_quantize.hpp: GlobalTerms):
// for the per-tensor scales k[0] and v[0], their reciprocals and the tables of their code terms (the
// K table, then the V table, or null), computed once a call; lean where both scales are. A chunk
// of per-head scales computes its head's terms, without a table.
struct PagedTerms {
  float k_reciprocal = 0.0f, v_reciprocal = 0.0f;
  const CodeTerms* codes = nullptr;
  bool lean = false;
  // The terms of side K or V (codes not null): selects, not a copy of either side's terms.
  KVQ_HD GlobalTerms side(bool is_k, float g) const {
    return {g, is_k ? k_reciprocal : v_reciprocal, codes + (is_k ? 0 : kE4m3Codes), lean};
  }
};
// PagedTerms but the tables: the per-tensor scales' reciprocals and whether both scales are lean.
// A launch computes them once on the host (the same IEEE quotients); each thread block adds its
// tables in shared memory (`with`).
struct PagedReciprocals {
  float k = 0.0f, v = 0.0f;
  bool lean = false;
  KVQ_HD PagedTerms with(const CodeTerms* codes) const { return {k, v, codes, codes != nullptr && lean}; }
};
KVQ_HD inline PagedReciprocals paged_reciprocals(const PagedScales& scales) {
  return {1.0f / scales.k[0], 1.0f / scales.v[0], lean_global_scale(scales.k[0]) && lean_global_scale(scales.v[0])};
}
KVQ_HD inline PagedTerms paged_terms(const PagedScales& scales, const CodeTerms* codes) {
  return paged_reciprocals(scales).with(codes);
}
// Host: with the tables themselves.
struct PagedTables {
  CodeTerms at[2 * kE4m3Codes];
  PagedTables(const Recipe& r, const PagedScales& scales) {
    const CodeTable k = code_table(r, scales.k[0]), v = code_table(r, scales.v[0]);
    for (int c = 0; c < kE4m3Codes; ++c) at[c] = k.at[c], at[kE4m3Codes + c] = v.at[c];
  }
  PagedTerms terms(const PagedScales& scales) const { return paged_terms(scales, at); }
};

// One NVFP4 chunk to two words of packed codes (element 8w + k in bits 4k..4k+3 of word w) and
// its scale code. kPacked: quantize_block_packed (formats/packed_quantize.hpp: FMA rounding, IMAD
// packing, quantize_block itself for NaN/inf blocks), else quantize_block's codes packed: the
// same bytes for every input. The generic kernel (runtime recipe) keeps quantize_block: with a
// runtime recipe the packed path would add a second copy of every recipe's code. pairs: the
// values' 16-bit words where the input is BF16 or FP16 (`input`; quantize_block_packed's 16-bit
// forms), else null.
template <bool kPacked>
KVQ_HD KVQ_KERNEL_INLINE std::uint8_t quantize_nvfp4_chunk(const Recipe& r, const GlobalTerms& t, DType input,
                                                           const float* x, const std::uint32_t* pairs,
                                                           std::uint32_t* words) {
  if constexpr (kPacked) {
    if (pairs == nullptr) return quantize_block_packed<kPagedChunk>(r, t, x, words);
    return input == DType::bf16 ? quantize_block_packed<kPagedChunk, PairWords::bf16>(r, t, x, words, pairs)
                                : quantize_block_packed<kPagedChunk, PairWords::fp16>(r, t, x, words, pairs);
  } else {
    std::uint8_t codes[kPagedChunk];
    const std::uint8_t scale = quantize_block(r, t.g, x, kPagedChunk, codes);
    pack_codes(codes, kPagedChunk, words);
    return scale;
  }
}

// The first input element of a chunk of side K or V. Index: std::uint32_t where paged_store_narrow
// (a 32 x 32 -> 64-bit product and a 32-bit offset), else std::int64_t.
template <typename Index>
KVQ_HD inline std::int64_t chunk_first(const PagedStoreShape& s, KvSide side, Index token, Index head, Index chunk) {
  if constexpr (sizeof(Index) == 4)
    return static_cast<std::int64_t>(std::uint64_t{token} * static_cast<std::uint32_t>(token_stride(s, side)) +
                                     (head * static_cast<std::uint32_t>(s.layout.head_dim) + chunk * kPagedChunk));
  return token * token_stride(s, side) + head * s.layout.head_dim + std::int64_t{chunk} * kPagedChunk;
}

// Where a chunk goes: its side, token, head and chunk index, and its slot's block and offset.
template <typename Index>
struct ChunkPlace {
  KvSide side = KvSide::k;
  Index token = 0, head = 0, chunk = 0, block = 0, offset = 0;
};

// One chunk's 16 loaded values quantized (FP8: tensor_code_words, kernels/block_quantize.hpp; NVFP4:
// quantize_nvfp4_chunk<kPacked>) and stored, the codes and the NVFP4 block scale at the layout's
// offsets. recipe: s.recipe, or an equal constant (the fixed kernels pass one in __constant__
// memory, which nvcc folds into the code).
// Chunk: its 16 values as FP32, or (chunk_pairs) as their 8 BF16 or FP16 pair words alone
// (store_chunk unpacks them: a loaded chunk waiting for its turn holds 8 registers, not 24).
struct ChunkValues {
  float x[kPagedChunk];
  std::uint32_t pairs[kPagedChunk / 2];
};
// Whether NVFP4 chunks take the packed quantizer's 16-bit forms (BF16 or FP16 input): their pair
// words.
KVQ_HD inline bool chunk_pairs(const PagedStoreShape& s) {
  return s.input != DType::fp32 && s.layout.format == PagedFormat::nvfp4;
}
// Loads a chunk's values (chunk_pairs: its pair words; kAligned: aligned_items holds, 16-byte loads
// without a test). Cached loads, not streamed: an item's V chunk is prefetched into L1 during its
// K chunk's work, and a streamed load does not find it there (slower: docs/performance.md).
template <bool kAligned = false>
KVQ_HD inline void load_chunk(const PagedStoreShape& s, const void* input, std::int64_t first, ChunkValues* v) {
  if (chunk_pairs(s)) {
    io::load_pair_words<kPagedChunk, kAligned, false>(input, first, v->pairs);
  } else {
    io::load_values(s.input, input, first, kPagedChunk, v->x);
  }
}

template <typename Index, bool kPacked, bool kAligned = false>
KVQ_HD KVQ_KERNEL_INLINE void store_chunk(const PagedStoreShape& s, const Recipe& recipe, const PagedScales& scales,
                                         const PagedStoreArgs& a, const ChunkPlace<Index>& c, const ChunkValues& chunk,
                                         const PagedDividers& d, const PagedTerms& terms) {
  float unpacked[kPagedChunk];
  if (chunk_pairs(s)) io::unpack_pair_words<kPagedChunk>(s.input, chunk.pairs, unpacked);
  const float* values = chunk_pairs(s) ? unpacked : chunk.x;
  const PagedKvLayout& L = s.layout;
  const bool is_k = c.side == KvSide::k;
  const Index h = s.per_head_scales ? c.head : 0;
  const float g = is_k ? scales.k[h] : scales.v[h];
  if (L.format == PagedFormat::fp8) {  // quantize_block's per-tensor case, four codes a conversion word
    std::uint32_t words[kPagedChunk / 4];
    tensor_code_words<kPagedChunk>(recipe, plan_block(recipe, g, 0.0f, false), values, words);
    std::uint8_t* cache = is_k ? a.key_cache : a.value_cache;
    io::store_words(cache + L.data_offset(c.side, c.block, c.offset, c.head, std::int64_t{c.chunk} * kPagedChunk), words,
                    kPagedChunk / 4);
    return;
  }
  std::uint32_t words[kPagedChunk / 8];
  const GlobalTerms t = s.per_head_scales ? global_terms(g) : terms.side(is_k, g);
  const std::uint8_t scale =
      quantize_nvfp4_chunk<kPacked>(recipe, t, s.input, values, chunk_pairs(s) ? chunk.pairs : nullptr, words);
  if constexpr (sizeof(Index) == 4) {  // paged_store_narrow: a block's bytes fit 31 bits
    std::uint8_t* base = a.key_cache + static_cast<std::int64_t>(c.block) * L.block_bytes();
    const RowSteps& steps = d.steps(c.side);
    io::store_words<true, kAligned ? 8 : 1>(base + steps.data(c.offset, c.head, c.chunk * (kPagedChunk / 2)), words,
                                           kPagedChunk / 8);
    base[steps.scale(c.offset, c.head, c.chunk)] = scale;
  } else {
    io::store_words<true, kAligned ? 8 : 1>(
        a.key_cache + L.data_offset(c.side, c.block, c.offset, c.head, std::int64_t{c.chunk} * kPagedChunk / 2), words,
        kPagedChunk / 8);
    a.key_cache[L.scale_offset(c.side, c.block, c.offset, c.head, c.chunk)] = scale;
  }
}

// Item -> ([side,] token, head, chunk), chunk fastest: neighbouring items write neighbouring bytes.
// An NVFP4 item: the chunk of K, then the same chunk of V, which share the decomposition, the
// slot and its block and offset (paged_items_pair). Index: std::uint32_t where paged_store_narrow
// (the divisions by the dividers, which paged_dividers(s) must give), else std::int64_t (plain
// 64-bit division; d unused).
template <typename Index>
KVQ_HD inline ChunkPlace<Index> chunk_place(const PagedStoreShape& s, Index item, const PagedDividers& d) {
  ChunkPlace<Index> c;
  Index row, token_row;
  if constexpr (sizeof(Index) == 4) {
    d.chunks.divide(item, &row, &c.chunk);
    d.heads.divide(row, &token_row, &c.head);
  } else {
    const auto chunks = static_cast<Index>(s.layout.head_dim / kPagedChunk), heads = static_cast<Index>(s.layout.heads);
    c.chunk = item % chunks, row = item / chunks;
    c.head = row % heads, token_row = row / heads;
  }
  const auto tokens = static_cast<Index>(s.tokens);
  c.side = paged_items_pair(s) || token_row < tokens ? KvSide::k : KvSide::v;
  c.token = c.side == KvSide::k ? token_row : token_row - tokens;
  return c;
}

// An item once its slot and its first chunk's values are at hand: a padding or out-of-range slot
// writes nothing; else the chunk is stored, then a pair's V chunk, which load_v(c, &values) loads
// (c.side then V): after K's store, so the two chunks' values are not live together. kAligned:
// aligned_items holds.
template <typename Index, bool kPacked, bool kAligned, typename LoadV>
KVQ_HD KVQ_KERNEL_INLINE void store_item(const PagedStoreShape& s, const Recipe& recipe, const PagedScales& scales,
                                        const PagedStoreArgs& a, ChunkPlace<Index> c, std::int64_t slot,
                                        const ChunkValues& first, const LoadV& load_v, const PagedDividers& d,
                                        const PagedTerms& terms) {
  if (slot < 0 || slot >= s.layout.slots()) return;
  if constexpr (sizeof(Index) == 4) {
    d.block_size.divide(static_cast<Index>(slot), &c.block, &c.offset);
  } else {
    const auto bs = static_cast<Index>(s.layout.block_size);
    c.block = static_cast<Index>(slot) / bs, c.offset = static_cast<Index>(slot) % bs;
  }
  store_chunk<Index, kPacked, kAligned>(s, recipe, scales, a, c, first, d, terms);
  if (!paged_items_pair(s)) return;
  c.side = KvSide::v;
  ChunkValues values;
  load_v(c, &values);
  store_chunk<Index, kPacked, kAligned>(s, recipe, scales, a, c, values, d, terms);
}

// One item from global memory (the CPU twin's and the unstaged kernels' way). The first chunk's
// values are loaded before the slot is tested, so the two loads are in flight together (a padding
// token's values are read and dropped). A pair's V chunk is prefetched into L1 meanwhile (holding
// it in registers through K's quantization spills; its load comes after). kAligned: aligned_items
// holds (the 4over6 kernel's loads and stores without alignment tests).
template <typename Index, bool kPacked = true, bool kAligned = false>
KVQ_HD KVQ_KERNEL_INLINE void paged_store_item(const PagedStoreShape& s, const Recipe& recipe,
                                              const PagedScales& scales, const PagedStoreArgs& a, Index item,
                                              const PagedDividers& d, const PagedTerms& terms) {
  const ChunkPlace<Index> c = chunk_place(s, item, d);
  const std::int64_t slot = a.slot_mapping[c.token];
  ChunkValues values;
  load_chunk<kAligned>(s, c.side == KvSide::k ? a.key : a.value, chunk_first(s, c.side, c.token, c.head, c.chunk),
                       &values);
  if (paged_items_pair(s))
    io::prefetch(static_cast<const unsigned char*>(a.value) +
                 chunk_first(s, KvSide::v, c.token, c.head, c.chunk) * bytes_of(s.input));
  const auto load_v = [&](const ChunkPlace<Index>& v, ChunkValues* out) {
    load_chunk<kAligned>(s, a.value, chunk_first(s, KvSide::v, v.token, v.head, v.chunk), out);
  };
  store_item<Index, kPacked, kAligned>(s, recipe, scales, a, c, slot, values, load_v, d, terms);
}

// The same with s.recipe, and with the dividers and terms computed here (host: tests; the twin
// and the kernel compute them once).
template <typename Index, bool kPacked = true>
inline void paged_store_item(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, Index item) {
  const PagedTables tables(s.recipe, scales);
  paged_store_item<Index, kPacked>(s, s.recipe, scales, a, item, paged_dividers(s), tables.terms(scales));
}

// Whether the device may stage a store's loads (kernels/paged_store_kernel.cuh: the fixed NVFP4
// kernels' staged loop copies a warp's 32 items, one token's neighbouring chunks, as 16-byte pieces):
// the shape's part, BF16/FP16 NVFP4 pairs with token strides of whole 16-byte pieces and a token's
// items (heads * head_dim / 16) a multiple of 32; and the pointers' (staged_loads): 16-byte
// aligned K and V, slot_mapping 8-byte aligned.
KVQ_HD inline bool staged_shape(const PagedStoreShape& s) {
  return s.input != DType::fp32 && paged_items_pair(s) && token_stride(s, KvSide::k) % 8 == 0 &&
         token_stride(s, KvSide::v) % 8 == 0 && s.layout.heads * (s.layout.head_dim / kPagedChunk) % 32 == 0;
}
inline bool staged_loads(const PagedStoreShape& s, const PagedStoreArgs& a) {
  return staged_shape(s) && io::aligned(a.key, 16) && io::aligned(a.value, 16) && io::aligned(a.slot_mapping, 8);
}

// Whether every NVFP4 chunk's loads and stores are aligned: BF16/FP16 chunks (32 bytes) from
// 16-byte aligned K and V with token strides of whole 16-byte pieces, and their 8 bytes of packed
// words at 8-byte aligned offsets (kv_cache 8-byte aligned, and each side's bytes a multiple of 8:
// the V region and every block start there; a row's D/2 bytes and a chunk's 8 are multiples).
KVQ_HD inline bool aligned_shape(const PagedStoreShape& s) {
  return s.input != DType::fp32 && paged_items_pair(s) && token_stride(s, KvSide::k) % 8 == 0 &&
         token_stride(s, KvSide::v) % 8 == 0 && s.layout.side_bytes() % 8 == 0;
}
inline bool aligned_items(const PagedStoreShape& s, const PagedStoreArgs& a) {
  return aligned_shape(s) && io::aligned(a.key, 16) && io::aligned(a.value, 16) && io::aligned(a.key_cache, 8);
}

// GPU: device pointers for args, host values for scales, an opaque cudaStream_t. With
// check_slots, slot_mapping is copied to the host on the stream and the stream synchronised
// before the launch. Returns success or the validation / CUDA error (a Status).
namespace device {
Status paged_store(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a, void* stream);
}  // namespace device

}  // namespace kvq::kernels
