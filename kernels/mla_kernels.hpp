// MLA KV-cache kernels (S5) and the NVFP4 paged cache -> E4M3 prefill workspace (S1), with
// their CPU twins. Contracts: docs/layouts.md. The per-chunk code below is the whole work of
// both the twin and the kernel (a GPU thread per 16-byte chunk; dequantize and quantize: a warp
// per slot or token).
//
// 1. requantize FP8_NOPE_FP8_ROPE (576 B) -> FP8_NOPE_WITH_BLOCK_SCALE_BF16_ROPE (656 B) over a
//    whole paged cache; the per-tensor k_scale folded into the tile scales, or dropped (the bug).
// 2. quantize BF16 tokens -> 656 or MODEL1 at slot_mapping[i]; dequantize any layout.
// 3. NVFP4 paged cache -> contiguous E4M3 workspace, for a batch given block tables and
//    cu_seq_lens.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "formats/recipe_names.hpp"
#include "kernels/fast_divide.hpp"
#include "kernels/lane_quantize.hpp"
#include "kernels/mla_layouts.hpp"
#include "kernels/quantize.hpp"
#include "kernels/status.hpp"

namespace kvq::kernels {

// Where a slot's bytes start: its record and (MODEL1) its tail record, the slot split once for all
// its parts.
struct MlaSlotBases {
  std::int64_t record = 0, tail = 0;
  KVQ_HD constexpr std::int64_t at(const MlaLayout& l, MlaPart p) const {
    return (l.in_tail(p) ? tail : record) + l.offset_of(p);
  }
};

// A paged MLA cache: num_blocks blocks of layout.block_bytes(block_size) bytes.
struct MlaCacheShape {
  MlaLayoutId layout = MlaLayoutId::fp8_nope_block_scale_bf16_rope;
  std::int64_t num_blocks = 0;
  std::int64_t block_size = 0;  // tokens a block
  KVQ_HD constexpr MlaLayout desc() const { return mla_layout(layout); }
  KVQ_HD constexpr std::int64_t slots() const { return num_blocks * block_size; }
  // This shape with slot_split set (a block_size of 32 bits; else unchanged).
  MlaCacheShape with_slot_split() const {
    MlaCacheShape c = *this;
    if (block_size >= 1 && (block_size >> 31) == 0) c.slot_split = FastDivide32(static_cast<std::uint32_t>(block_size));
    return c;
  }
  KVQ_HD constexpr std::int64_t bytes() const { return num_blocks * desc().block_bytes(block_size); }
  // block_size's multiply-high divider where a launcher set it (with_slot_split): MODEL1's slot
  // split without a 32-bit division sequence.
  FastDivide32 slot_split{};
  // A layout without tail records or block padding keeps token s at s * record bytes (the same
  // offset, without a division); MODEL1 splits the slot, in 32 bits where it fits.
  KVQ_HD constexpr MlaSlotBases bases(std::int64_t slot) const {
    const MlaLayout l = desc();
    if (l.tail_segments == 0 && l.block_align == 1) return {slot * l.record_bytes(), 0};
    std::int64_t block = 0, token = 0;
    if (((slot | block_size) >> 31) == 0) {
      const auto s = static_cast<std::uint32_t>(slot), T = static_cast<std::uint32_t>(block_size);
      std::uint32_t b = 0, t = 0;
      if (slot_split.divisor == T) {
        slot_split.divide(s, &b, &t);
      } else {
        b = s / T, t = s % T;
      }
      block = b, token = t;
    } else {
      block = slot / block_size, token = slot % block_size;
    }
    return {l.record_offset(block_size, block, token), l.tail_offset(block_size, block, token)};
  }
  KVQ_HD constexpr std::int64_t part(std::int64_t slot, MlaPart p) const { return bases(slot).at(desc(), p); }
};

// What the 576 -> 656 conversion does with the 576 cache's per-tensor decode scale k_scale.
enum class KScale : std::uint8_t {
  fold,  // tile scales = k_scale, rope = bf16(e4m3 * k_scale) rounded once: values kept
  drop,  // tile scales = 1.0, rope = bf16(e4m3): the conversion one engine ships (k_scale lost)
};
const char* name_of(KScale k);
const char* name_of(MlaLayoutId id);

// The tile recipe of a tiled layout's writer, as the engine that writes the layout computes it
// (docs/layouts.md "2. Quantize"): the 656-byte record fp8-e4m3-tensor-rcp-triton per tile
// (SGLang's quantize_k_cache: the FP32 scale amax / 448 and x * (1 / s), Triton's `/`, tl.clamp),
// MODEL1 mla-model1-tile64 (vLLM's writer: the floor on bmax, Triton's `/`, float exponents,
// tl.clamp). The kernels apply these; the CPU twin also takes another rule a port follows
// (mla_tile_recipe_error), such as FlashMLA's power-of-two mla-fp8-tile128 for the 656 record.
KVQ_HD constexpr const char* mla_tile_recipe_name(const MlaLayout& l) {
  return l.id == MlaLayoutId::model1_fp8_sparse ? "mla-model1-tile64" : "fp8-e4m3-tensor-rcp-triton";
}
// A recipe as layout l's tile rule: its block the layout's tile (a per-tile FP32 rule's "tensor").
KVQ_HD constexpr Recipe mla_tile_rule_of(const MlaLayout& l, Recipe r) {
  r.block = l.tile;
  return r;
}
KVQ_HD constexpr Recipe mla_tile_recipe(const MlaLayout& l) {
  return mla_tile_rule_of(l, recipe_from_name(mla_tile_recipe_name(l))->recipe);
}
// Whether a tile rule ignores NaN elements (a ratio floor, or Triton's float exponents: tl.max skips
// NaN), so that a tile's scale depends on its max alone; else (OCP MX) a NaN element makes it 0xFF.
KVQ_HD constexpr bool mla_tile_ignores_nan(const Recipe& r) {
  return r.scale == BlockScale::tensor_only || r.pow2 == Pow2Rule::ceil_ratio || r.float_exponent;
}
static_assert(mla_tile_ignores_nan(mla_tile_recipe(kMlaFp8NopeBlockScaleBf16Rope)) &&
              mla_tile_ignores_nan(mla_tile_recipe(kMlaModel1Fp8Sparse)) &&
              mla_tile_recipe(kMlaFp8NopeBlockScaleBf16Rope).block == kMlaFp8NopeBlockScaleBf16Rope.tile &&
              mla_tile_recipe(kMlaModel1Fp8Sparse).block == kMlaModel1Fp8Sparse.tile);

namespace mla_detail {

inline constexpr int kRopeDims = 64;
inline constexpr std::uint16_t kBf16Nan = 0x7FC0;  // every NaN the kernels write (canonical)

KVQ_HD inline void store_u32(std::uint8_t* p, std::uint32_t v) {
  KVQ_UNROLL
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
KVQ_HD inline std::uint16_t load_u16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
KVQ_HD inline float canonical(float v) { return v != v ? canonical_nan() : v; }
// The FP32 value of a stored tile scale (656: FP32 bits; MODEL1: an E8M0 byte, 0xFF = NaN).
// kAligned: p is 4-byte aligned (no run-time test).
template <bool kAligned = false>
KVQ_HD inline float tile_scale(const MlaLayout& l, const std::uint8_t* p) {
  if (l.segment(MlaPart::tile_scales).format == FormatId::fp32) return float_from_bits(io::load_word<false, kAligned>(p));
  return e8m0_value(p[0]);
}
}  // namespace mla_detail

// 1. One 16-byte chunk of slot s's 656-byte record, the record's bytes in order (41 chunks a
// token, so a warp writes contiguous bytes): chunks 0..31 copy 16 nope bytes, chunk 32 writes the
// four FP32 tile scales, chunks 33..40 widen 8 rope codes each to BF16. `fold` keeps the nope
// values exactly and rounds the rope once: the exact e4m3 * k_scale (FP64, exact) to BF16.
inline constexpr int kRequantChunkBytes = io::kVectorBytes;
inline constexpr int kRequantChunks = kMlaFp8NopeBlockScaleBf16Rope.token_bytes() / kRequantChunkBytes;
static_assert(kRequantChunks * kRequantChunkBytes == kMlaFp8NopeBlockScaleBf16Rope.token_bytes());
// A chunk's source bytes as four little-endian words (16 nope bytes; 8 rope codes in words[0, 2);
// nothing for the scale chunk), loaded first and converted after, so that a kernel can have several
// chunks' loads in flight before its first store.
struct MlaChunkWords {
  std::uint32_t words[kRequantChunkBytes / 4] = {};
};
KVQ_HD inline MlaChunkWords requantize_576_to_656_load(std::int64_t block_size, const std::uint8_t* src, std::int64_t slot,
                                                       int chunk) {
  constexpr int n = kRequantChunkBytes;
  constexpr MlaLayout out_layout = kMlaFp8NopeBlockScaleBf16Rope;
  constexpr int scale_chunk = out_layout.offset_of(MlaPart::tile_scales) / n, rope_chunk = out_layout.offset_of(MlaPart::rope) / n;
  const MlaCacheShape in{MlaLayoutId::fp8_nope_fp8_rope, 0, block_size};
  MlaChunkWords c;
  if (chunk < scale_chunk) io::load_four_words(src + in.part(slot, MlaPart::nope) + n * chunk, c.words);
  else if (chunk > scale_chunk) io::load_word_pair(src + in.part(slot, MlaPart::rope) + (chunk - rope_chunk) * (n / 2), c.words);
  return c;
}
KVQ_HD inline void requantize_576_to_656_store(std::int64_t block_size, const MlaChunkWords& chunk_words, float k_scale,
                                               KScale mode, std::uint8_t* dst, std::int64_t slot, int chunk) {
  using namespace mla_detail;
  constexpr int n = kRequantChunkBytes;
  constexpr MlaLayout out_layout = kMlaFp8NopeBlockScaleBf16Rope;
  constexpr int scale_chunk = out_layout.offset_of(MlaPart::tile_scales) / n, rope_chunk = out_layout.offset_of(MlaPart::rope) / n;
  static_assert(scale_chunk * n == out_layout.offset_of(MlaPart::tile_scales) && rope_chunk == scale_chunk + 1 &&
                out_layout.tiles() * 4 == n);
  const MlaCacheShape out{MlaLayoutId::fp8_nope_block_scale_bf16_rope, 0, block_size};
  const std::uint32_t* loaded = chunk_words.words;
  std::uint32_t words[n / 4];
  if (chunk < scale_chunk) {
    KVQ_UNROLL
    for (int w = 0; w < n / 4; ++w) words[w] = loaded[w];
  } else if (chunk == scale_chunk) {
    KVQ_UNROLL
    for (int t = 0; t < out_layout.tiles(); ++t) words[t] = bits_of(mode == KScale::fold ? k_scale : 1.0f);
  } else {
    constexpr int dims = n / 2;  // BF16 rope values a chunk
    KVQ_UNROLL
    for (int i = 0; i < dims; ++i) {
      const float v = e4m3_value_fast(static_cast<std::uint8_t>(loaded[i / 4] >> (8 * (i % 4))));
      std::uint16_t r = kBf16Nan;
      if (v == v) r = mode == KScale::drop ? bf16_rne_fast(v)  // exact: every E4M3 value is a BF16 value
                                           : bf16_rne_of_product(v, k_scale);
      if (i % 2 == 0) words[i / 2] = r;
      else words[i / 2] |= std::uint32_t{r} << 16;
    }
  }
  io::store_words(dst + out.part(slot, MlaPart::nope) + n * chunk, words, n / 4);
}
KVQ_HD inline void requantize_576_to_656_chunk(std::int64_t block_size, const std::uint8_t* src, float k_scale,
                                               KScale mode, std::uint8_t* dst, std::int64_t slot, int chunk) {
  requantize_576_to_656_store(block_size, requantize_576_to_656_load(block_size, src, slot, chunk), k_scale, mode, dst, slot,
                              chunk);
}

// 2. Quantize token `row` of x (BF16 [tokens, dims]) into its slot, in 16-byte chunks of the
// record: nope chunk j (16 dims, tile j / (tile / 16)) and rope chunk j (8 BF16 dims, copied).
// A tile's scale needs the max over its chunks: each chunk gives its partial max (NaN ignored),
// the partials of a tile combine by max (the order does not matter: no NaN, no -0 among them),
// the tile's scale comes from the combined max (mla_tile_scale_word), then each chunk encodes
// its values by quantize_block_with_max's rule given the tile's max (mla_store_nope_chunk). The twin combines in
// a loop (mla_quantize_token), the kernel by warp shuffles (its rules ignore NaN elements, so the
// max alone); the stored bytes are the same.
inline constexpr int kQuantChunk = io::kVectorBytes;  // nope dims a chunk (one vector of E4M3 bytes out)
inline constexpr int kRopeChunk = io::kVectorBytes / 2;  // rope dims a chunk (one vector of BF16 in and out)
KVQ_HD constexpr int mla_nope_chunks(const MlaLayout& l) { return l.nope_dims() / kQuantChunk; }
KVQ_HD constexpr int mla_rope_chunks(const MlaLayout& l) { return l.rope_dims() / kRopeChunk; }
inline constexpr int kMlaMaxTiles = 8;
static_assert(kMlaFp8NopeBlockScaleBf16Rope.tiles() <= kMlaMaxTiles && kMlaModel1Fp8Sparse.tiles() <= kMlaMaxTiles);
static_assert(kMlaFp8NopeBlockScaleBf16Rope.tile % kQuantChunk == 0 && kMlaModel1Fp8Sparse.tile % kQuantChunk == 0);

// Loads nope chunk j of token `row` and returns its max |x| (NaN never wins) and whether some
// element is NaN: the lane-split quantizer's span max (kernels/lane_quantize.hpp), a chunk being a span.
static_assert(kQuantChunk == kLaneSpan);
// In two halves, so that a kernel can load a token's chunks a token ahead: the chunk's BF16 pair
// words, then their values and max. kDims: the dims of a chunk (16, the twin's and the kernels'),
// j counting chunks of kDims. (The kernel reads aligned rows from its shared-memory copy.)
template <int kDims = kQuantChunk>
KVQ_HD inline void mla_load_nope_words(const MlaLayout& l, const std::uint16_t* x, std::int64_t row, int j,
                                       std::uint32_t* words) {
  io::load_pair_words<kDims>(x, row * l.dims() + j * kDims, words);
}
template <int kDims = kQuantChunk>
KVQ_HD inline SpanMax mla_nope_chunk_values(const std::uint32_t* words, float* values) {
  io::unpack_pair_words<kDims>(DType::bf16, words, values);
  return span_max<kDims>(values);
}
KVQ_HD inline SpanMax mla_load_nope_chunk(const MlaLayout& l, const std::uint16_t* x, std::int64_t row, int j,
                                          float* values) {
  std::uint32_t words[kQuantChunk / 2];
  mla_load_nope_words(l, x, row, j, words);
  return mla_nope_chunk_values(words, values);
}

// The tile's stored scale from its max, by quantize_block's rules (formats/recipes.hpp
// e8m0_nan_block, e8m0_block_exponent, tensor_scale): MODEL1 the E8M0 byte; the 656-byte record
// the FP32 bits of 2^e (NaN for byte 0xFF) or, for a per-tile FP32 rule (tensor_only: SGLang's
// writer), of s = tensor_scale(r, tile max).
// Both always inlined: the kernel's tile rule is a constant there and its variant branches fold
// away (docs/performance.md).
// mla_tile_scale_word_of_code: the same from the tile's E8M0 code where the caller has it already
// (mla_store_nope_chunk returns it for each chunk of the tile, by the same two rules), so that a
// kernel evaluates the tile exponent once a lane.
KVQ_HD KVQ_KERNEL_INLINE std::uint32_t mla_tile_scale_word_of_code(const MlaLayout& l, const Recipe& r, SpanMax m,
                                                                   std::uint8_t code) {
  if (r.scale == BlockScale::tensor_only) return bits_of(tensor_scale(r, m.max));
  return l.segment(MlaPart::tile_scales).format == FormatId::fp32 ? bits_of(e8m0_value(code)) : code;
}
KVQ_HD KVQ_KERNEL_INLINE std::uint32_t mla_tile_scale_word(const MlaLayout& l, const Recipe& r, SpanMax m) {
  const std::uint8_t code = r.scale == BlockScale::tensor_only     ? 0
                            : e8m0_nan_block(r, m.max, m.nan) ? 0xFF
                                                              : e8m0_code(r, e8m0_block_exponent(r, m.max));
  return mla_tile_scale_word_of_code(l, r, m, code);
}

// Encodes nope chunk j of a tile with max m (quantize_block_with_max's rule: the tile's, kDims values,
// each code a function of its value and m alone), stores its codes at slot bases b and returns the
// tile's scale code as that rule computed it (E8M0 rules; 0 for a per-tile FP32 rule). The usual
// tile as a plan and its codes four a paired conversion (tensor_code_words: a per-tile FP32 rule's
// plan_block, an E8M0 rule's pow2_plan, both quantize_block_with_max's scale and multiplier); a
// NaN tile under an OCP rule, or elements scaled in a 16-bit dtype, through quantize_block_with_max
// itself. kAligned: the cache is 16-byte aligned (every record's nope part is: no run-time test).
template <int kDims = kQuantChunk, bool kAligned = false>
KVQ_HD KVQ_KERNEL_INLINE std::uint8_t mla_store_nope_chunk(const MlaLayout& l, const Recipe& r, const float* values,
                                                           SpanMax m, std::uint8_t* cache, const MlaSlotBases& b,
                                                           int j) {
  static_assert(kDims % 8 == 0);
  const bool per_tile = r.scale == BlockScale::tensor_only;
  const float s = per_tile ? tensor_scale(r, m.max) : 0.0f;
  std::uint32_t words[kDims / 4];
  std::uint8_t scale_code = 0;
  if (per_tile || (r.scale_dtype == FormatId::fp32 && !e8m0_nan_block(r, m.max, m.nan))) {
    const BlockPlan p = per_tile ? plan_block(r, s, m.max, m.nan) : recipe_detail::pow2_plan(r, m.max);
    tensor_code_words<kDims>(r, p, values, words);
    scale_code = p.scale_code;
  } else {
    std::uint8_t codes[kDims];
    scale_code = quantize_block_with_max(r, s, values, kDims, m.max, m.nan, codes);
    KVQ_UNROLL
    for (int w = 0; w < kDims / 4; ++w)
      words[w] = codes[4 * w] | std::uint32_t{codes[4 * w + 1]} << 8 | std::uint32_t{codes[4 * w + 2]} << 16 |
                 std::uint32_t{codes[4 * w + 3]} << 24;
  }
  io::store_words<true, kAligned ? 8 : 1>(cache + b.at(l, MlaPart::nope) + j * kDims, words, kDims / 4);
  return per_tile ? 0 : scale_code;
}

// Writes tile t's scale word (mla_tile_scale_word: 656 an FP32 word at 4t, MODEL1 an E8M0 byte at
// t) and, with the last tile, the pad bytes (0) that follow the scales. kAligned: the cache is
// 16-byte aligned (656's words then are 4-byte aligned: no run-time test).
template <bool kAligned = false>
KVQ_HD inline void mla_store_tile_scale(const MlaLayout& l, std::uint32_t word, std::uint8_t* cache,
                                        const MlaSlotBases& b, int t) {
  std::uint8_t* dst = cache + b.at(l, MlaPart::tile_scales);
  if (l.segment(MlaPart::tile_scales).format == FormatId::fp32) {
    io::store_words<true, kAligned ? 4 : 1>(dst + 4 * t, &word, 1);
  } else {
    dst[t] = static_cast<std::uint8_t>(word);
  }
  if (t == l.tiles() - 1)
    for (int i = 0; i < l.segment(MlaPart::pad).bytes(); ++i) cache[b.at(l, MlaPart::pad) + i] = 0;
}
KVQ_HD inline void mla_store_tile_scales(const MlaLayout& l, const std::uint32_t* scale_words, std::uint8_t* cache,
                                         const MlaSlotBases& b) {
  for (int t = 0; t < l.tiles(); ++t) mla_store_tile_scale(l, scale_words[t], cache, b, t);
}
static_assert(kMlaModel1Fp8Sparse.offset_of(MlaPart::pad) == kMlaModel1Fp8Sparse.offset_of(MlaPart::tile_scales) + 7 &&
              kMlaModel1Fp8Sparse.tiles() == 7 && kMlaModel1Fp8Sparse.segment(MlaPart::pad).bytes() == 1 &&
              kMlaFp8NopeBlockScaleBf16Rope.segment(MlaPart::tile_scales).bytes() == 16 &&
              kMlaFp8NopeBlockScaleBf16Rope.segment(MlaPart::pad).bytes() == 0);

// Copies rope chunk j (8 BF16 values, bit for bit).
// Rope chunk j (16 bytes of BF16) as four words, read from x and written to the cache unchanged.
static_assert(2 * kRopeChunk == 16);
KVQ_HD inline void mla_load_rope_chunk(const MlaLayout& l, const std::uint16_t* x, std::int64_t row, int j,
                                       std::uint32_t* words) {
  io::load_pair_words<kRopeChunk>(x, row * l.dims() + l.nope_dims() + j * kRopeChunk, words);
}
// kAligned: the cache is 16-byte aligned (every rope chunk then is).
template <bool kAligned = false>
KVQ_HD inline void mla_store_rope_chunk(const MlaLayout& l, const std::uint32_t* words, std::uint8_t* cache,
                                        const MlaSlotBases& b, int j) {
  io::store_words<true, kAligned ? 16 : 1>(cache + b.at(l, MlaPart::rope) + 2 * j * kRopeChunk, words, 4);
}
KVQ_HD inline void mla_copy_rope_chunk(const MlaLayout& l, const std::uint16_t* x, std::int64_t row,
                                       std::uint8_t* cache, const MlaSlotBases& b, int j) {
  std::uint32_t words[4];
  mla_load_rope_chunk(l, x, row, j, words);
  mla_store_rope_chunk(l, words, cache, b, j);
}

// The whole token, chunk by chunk, under tile rule r (the twin, and the expected bytes of the
// bad-slot property).
KVQ_HD inline void mla_quantize_token(const MlaCacheShape& c, const Recipe& r, const std::uint16_t* x, std::int64_t row,
                                      std::uint8_t* cache, std::int64_t slot) {
  const MlaLayout l = c.desc();
  const MlaSlotBases b = c.bases(slot);
  const int per_tile = l.tile / kQuantChunk;
  SpanMax tile_max[kMlaMaxTiles] = {};
  std::uint32_t scale_words[kMlaMaxTiles];
  float values[kQuantChunk];
  for (int j = 0; j < mla_nope_chunks(l); ++j)
    tile_max[j / per_tile] = combine(mla_load_nope_chunk(l, x, row, j, values), tile_max[j / per_tile]);
  for (int t = 0; t < l.tiles(); ++t) scale_words[t] = mla_tile_scale_word(l, r, tile_max[t]);
  for (int j = 0; j < mla_nope_chunks(l); ++j) {
    mla_load_nope_chunk(l, x, row, j, values);
    mla_store_nope_chunk(l, r, values, tile_max[j / per_tile], cache, b, j);
  }
  mla_store_tile_scales(l, scale_words, cache, b);
  for (int j = 0; j < mla_rope_chunks(l); ++j) mla_copy_rope_chunk(l, x, row, cache, b, j);
}

// Dequantize one span: 8 dims of slot s, all in one part and one tile (16 bytes of BF16/FP16
// output; the part's bytes and the tile scale read once). The FP32 value of a dim (NaN canonical):
// BF16 widened; 576: e4m3 * k_scale (one FP32 multiply); tiled layouts: e4m3 * tile scale (one FP32
// multiply: exact for a power of two, rounded once for an FP32 scale such as SGLang's amax / 448 or a
// folded k_scale). k_scale is used by the 576 layout only.
inline constexpr int kDequantSpan = 8;
KVQ_HD constexpr int mla_dequantize_spans(const MlaLayout& l) { return l.dims() / kDequantSpan; }
// A span's bytes as read from the cache: the part's bytes (8 E4M3 codes, or 16 bytes of BF16) and
// the tile scale (k_scale for the 576 layout). Loaded first and converted after, so that a kernel can
// have several spans' loads in flight before its first store.
struct MlaSpanBytes {
  std::uint32_t words[kDequantSpan / 2];  // little-endian: 8 codes in words[0, 2), or 8 BF16 values
  float scale = 0;
};
// Span `span` of the slot at bases b. kAligned: the cache is 16-byte aligned (then every part of
// every record is aligned to its span's load: no run-time test).
template <bool kAligned = false>
KVQ_HD inline MlaSpanBytes mla_load_span(const MlaLayout& l, const std::uint8_t* cache, float k_scale,
                                         const MlaSlotBases& b, int span) {
  using namespace mla_detail;
  constexpr int n = kDequantSpan;
  const int d = span * n;
  const bool rope = d >= l.nope_dims();
  const MlaPart part = rope ? MlaPart::rope : MlaPart::nope;
  const FormatId f = l.segment(part).format;
  const std::uint8_t* p = cache + b.at(l, part) + (rope ? d - l.nope_dims() : d) * (format_of(f).bits() / 8);
  MlaSpanBytes bytes;
  if (f == FormatId::bf16) {
    io::load_four_words<kAligned>(p, bytes.words);
  } else {
    io::load_word_pair<kAligned>(p, bytes.words);
    bytes.scale = k_scale;
    if (l.tile != 0) {
      const int scale_bytes = format_of(l.segment(MlaPart::tile_scales).format).bits() / 8;
      bytes.scale = tile_scale<kAligned>(l, cache + b.at(l, MlaPart::tile_scales) + (d / l.tile) * scale_bytes);
    }
  }
  return bytes;
}
// Span `span` of slot `slot` to y (the slot's row of dims values of type `output`). kAligned: y is
// 16-byte aligned (rows of 1152, 1024, 2304 or 2048 bytes: every span is).
template <bool kAligned = false>
KVQ_HD inline void mla_store_span(const MlaLayout& l, const MlaSpanBytes& b, DType output, void* y, std::int64_t slot,
                                  int span) {
  using namespace mla_detail;
  constexpr int n = kDequantSpan;
  const int d = span * n;
  const FormatId f = l.segment(d >= l.nope_dims() ? MlaPart::rope : MlaPart::nope).format;
  // A span with no NaN value (no BF16 NaN; no E4M3 NaN code and a finite scale, so no 0 * inf)
  // takes the paired conversions without NaN tests (io::store_values<true>; the same bits).
  float values[n];
  bool nan_free = true;
  if (f == FormatId::bf16) {
    KVQ_UNROLL
    for (int i = 0; i < n; ++i) {
      const std::uint32_t half = (b.words[i / 2] >> (16 * (i % 2))) & 0xFFFFu;
      nan_free = nan_free && (half & 0x7FFFu) <= 0x7F80u;
      values[i] = float_from_bits(half << 16);
    }
  } else {
    nan_free = !word_has_e4m3_nan(b.words[0]) && !word_has_e4m3_nan(b.words[1]) && fabsf(b.scale) <= kFp32Max;
    KVQ_UNROLL
    for (int i = 0; i < n; ++i) values[i] = byte_code_value(false, b.words[i / 4], i % 4) * b.scale;  // e4m3 value, exact
  }
  if (nan_free) {
    io::store_values<true, kAligned>(output, y, slot * l.dims() + d, n, values);
    return;
  }
  KVQ_UNROLL
  for (int i = 0; i < n; ++i)  // byte_code_value reads an E4M3 NaN code as a number: the codec's value here
    values[i] = canonical(f == FormatId::bf16 ? values[i]
                                              : e4m3_value_fast(static_cast<std::uint8_t>(b.words[i / 4] >> (8 * (i % 4)))) *
                                                    b.scale);
  io::store_values<false, kAligned>(output, y, slot * l.dims() + d, n, values);
}
KVQ_HD inline void mla_dequantize_span(const MlaCacheShape& c, const std::uint8_t* cache, float k_scale, DType output,
                                       void* y, std::int64_t slot, int span) {
  const MlaLayout l = c.desc();
  mla_store_span(l, mla_load_span(l, cache, k_scale, c.bases(slot), span), output, y, slot, span);
}
static_assert(kMlaBf16.nope_dims() % kDequantSpan == 0 && kMlaModel1Fp8Sparse.nope_dims() % kDequantSpan == 0 &&
              kMlaModel1Fp8Sparse.tile % kDequantSpan == 0 && kMlaFp8NopeBlockScaleBf16Rope.tile % kDequantSpan == 0);

// 3. The prefill workspace of an NVFP4 paged cache for a batch: request b's tokens
// [0, cu_seq_lens[b+1] - cu_seq_lens[b]) live in pages block_tables[b][pos / block_size]; the
// workspace row of (b, pos) is cu_seq_lens[b] + pos, each row [heads, head_dim] E4M3 codes
// (requantize_e4m3: element * block scale * factor, exact, rounded once; the twin also rounds as a
// port does, WorkspaceBatch::rounding). K and V separately.
struct WorkspaceBatch {
  Recipe recipe;  // an NVFP4 recipe (E2M1 elements, E4M3 block scales of 16)
  Nvfp4PageGeometry pages;
  std::int64_t batch = 0;
  std::int64_t max_blocks_per_seq = 0;  // block_tables is [batch, max_blocks_per_seq] int32
  std::int64_t workspace_tokens = 0;    // rows of each workspace; == cu_seq_lens[batch]
  // A port's rounding (requantize_e4m3_rounded; the CPU twin's model of it); the kernel rounds once.
  WorkspaceRounding rounding{};
  KVQ_HD constexpr std::int64_t blocks_per_row() const { return pages.heads * (pages.head_dim / Nvfp4PageGeometry::kBlock); }
  // One page side (request b, table column k, side) holds page_items() 16-element blocks in
  // memory order (token, head, block); an item is (page side, block), page side = (b * columns + k) * 2 + side.
  KVQ_HD constexpr std::int64_t page_items() const { return pages.block_size * blocks_per_row(); }
  KVQ_HD constexpr std::int64_t page_sides() const { return batch * max_blocks_per_seq * 2; }
  KVQ_HD constexpr std::int64_t items() const { return page_sides() * page_items(); }
  KVQ_HD constexpr std::int64_t workspace_bytes() const { return workspace_tokens * pages.heads * pages.head_dim; }
};

// One page side (request b, table column k, side: page_side = (b * columns + k) * 2 + side), found
// once for its blocks: block i is token t = i / blocks_per_row of page block_tables[b][k], so
// request position k * block_size + t and workspace row cu_seq_lens[b] + that; its packed codes
// are at the side's data + 8 i, its scale at the side's scales + i, its output at the page's first
// row + 16 i (the rows of a page are contiguous in the workspace): no division by a runtime size
// a block. Blocks at positions past the request's length, or in rows outside the workspace, are
// not in [first, end) and write nothing; a page id outside [0, num_blocks) (the twin rejects it
// first) reads nothing and writes 0x7F (E4M3 NaN) codes.
struct Nvfp4PageSide {
  const std::uint8_t* data = nullptr;    // the side's packed codes; nullptr for a page id out of range
  const std::uint8_t* scales = nullptr;  // its block scales
  std::uint8_t* out = nullptr;           // the K or V workspace
  std::int64_t out_first = 0;            // the byte offset of the side's first row in it
  std::int64_t first = 0, end = 0;       // the blocks it writes
  float factor = 0.0f;
};
KVQ_HD inline Nvfp4PageSide nvfp4_page_side(const WorkspaceBatch& w, const std::uint8_t* cache,
                                            const std::int32_t* block_tables, const std::int32_t* cu_seq_lens,
                                            float factor_k, float factor_v, std::uint8_t* k_out, std::uint8_t* v_out,
                                            std::int64_t page_side) {
  const Nvfp4PageGeometry& g = w.pages;
  const int side = static_cast<int>(page_side % 2);
  const std::int64_t k = page_side / 2 % w.max_blocks_per_seq, b = page_side / 2 / w.max_blocks_per_seq;
  const std::int64_t start = cu_seq_lens[b], per_token = w.blocks_per_row();
  const std::int64_t first_pos = k * g.block_size, first_row = start + first_pos;
  Nvfp4PageSide p;
  p.first = first_row < 0 ? -first_row * per_token : 0;
  const std::int64_t past_length = (cu_seq_lens[b + 1] - start - first_pos) * per_token;
  const std::int64_t past_rows = (w.workspace_tokens - first_row) * per_token;
  p.end = past_length < past_rows ? past_length : past_rows;
  if (p.end > w.page_items()) p.end = w.page_items();
  p.out = side == 0 ? k_out : v_out;
  p.out_first = first_row * g.heads * g.head_dim;
  p.factor = side == 0 ? factor_k : factor_v;
  const std::int64_t page = block_tables[b * w.max_blocks_per_seq + k];
  if (page >= 0 && page < g.num_blocks) {
    p.data = cache + g.data_offset(page, side, 0, 0);
    p.scales = cache + g.scale_offset(page, side, 0, 0);
  }
  return p;
}
// Block i of a page side in two halves, so a kernel can have several blocks' loads in flight
// before the first store: its two words of codes and its scale, then its sixteen workspace codes.
struct Nvfp4BlockBytes {
  std::uint32_t codes[2] = {};
  std::uint8_t scale = 0;
};
KVQ_HD inline Nvfp4BlockBytes nvfp4_page_block_load(const Nvfp4PageSide& p, std::int64_t i) {
  Nvfp4BlockBytes bytes;
  if (p.data != nullptr) {
    io::load_word_pair(p.data + 8 * i, bytes.codes);
    bytes.scale = p.scales[i];
  }
  return bytes;
}
KVQ_HD inline void nvfp4_page_block_store(const WorkspaceBatch& w, const Nvfp4PageSide& p, std::int64_t i,
                                          const Nvfp4BlockBytes& bytes) {
  std::uint32_t words[4] = {0x7F7F7F7Fu, 0x7F7F7F7Fu, 0x7F7F7F7Fu, 0x7F7F7F7Fu};
  if (p.data != nullptr && w.rounding.reference()) {
    requantize_nibble_codes<2>(w.recipe, bytes.codes, bytes.scale, p.factor, words);
  } else if (p.data != nullptr) {
    KVQ_UNROLL
    for (int e = 0; e < Nvfp4PageGeometry::kBlock; ++e) {
      const auto code = static_cast<std::uint8_t>((bytes.codes[e / 8] >> (4 * (e % 8))) & 0xFu);
      const std::uint32_t byte = requantize_e4m3_rounded(w.recipe, bytes.scale, code, p.factor, w.rounding);
      words[e / 4] = (e % 4 ? words[e / 4] : 0u) | byte << (8 * (e % 4));
    }
  }
  io::store_words(p.out + (p.out_first + Nvfp4PageGeometry::kBlock * i), words, 4);  // offsets first: in range
}
// Every block of one page side (the CPU twin's order).
KVQ_HD inline void nvfp4_page_side_to_workspace(const WorkspaceBatch& w, const std::uint8_t* cache,
                                                const std::int32_t* block_tables, const std::int32_t* cu_seq_lens,
                                                float factor_k, float factor_v, std::uint8_t* k_out,
                                                std::uint8_t* v_out, std::int64_t page_side) {
  const Nvfp4PageSide p = nvfp4_page_side(w, cache, block_tables, cu_seq_lens, factor_k, factor_v, k_out, v_out, page_side);
  for (std::int64_t i = p.first; i < p.end; ++i) nvfp4_page_block_store(w, p, i, nvfp4_page_block_load(p, i));
}

// Validation (a Status: success or a message naming the argument). The *_cpu twins also check table contents
// (slot_mapping, block_tables, cu_seq_lens) before writing anything; the launchers cannot read
// device tables and rely on the kernels' bounds checks above.
Status validate(const MlaCacheShape& c);
Status validate_requantize(std::int64_t num_blocks, std::int64_t block_size, float k_scale);
Status validate_quantize(const MlaCacheShape& c, std::int64_t num_tokens);
// Why r cannot be layout c's tile rule (empty: it can): E4M3 elements in tiles of the layout's,
// an E8M0 rule (NaN elements under an OCP rule make the tile's scale 0xFF), or a per-tile FP32
// scale (tensor_only) where the layout stores FP32 scales; not a two-level rule.
Status mla_tile_recipe_error(const MlaCacheShape& c, const Recipe& r);
Status validate_dequantize(const MlaCacheShape& c, float k_scale);
Status validate(const WorkspaceBatch& w, float factor_k, float factor_v);

// CPU twins.
Status mla_requantize_576_to_656_cpu(std::int64_t num_blocks, std::int64_t block_size, const std::uint8_t* src,
                                     float k_scale, KScale mode, std::uint8_t* dst);
Status mla_quantize_cpu(const MlaCacheShape& c, const std::uint16_t* x, const std::int64_t* slot_mapping,
                        std::int64_t num_tokens, std::uint8_t* cache);
// The same under another tile rule (a port's: mla_tile_recipe_error says which fit).
Status mla_quantize_cpu(const MlaCacheShape& c, const Recipe& tile, const std::uint16_t* x,
                        const std::int64_t* slot_mapping, std::int64_t num_tokens, std::uint8_t* cache);
Status mla_dequantize_cpu(const MlaCacheShape& c, const std::uint8_t* cache, float k_scale, DType output, void* y);
Status nvfp4_paged_to_workspace_cpu(const WorkspaceBatch& w, const std::uint8_t* cache,
                                    const std::int32_t* block_tables, const std::int32_t* cu_seq_lens,
                                    float factor_k, float factor_v, std::uint8_t* k_out, std::uint8_t* v_out);

// GPU launchers: device pointers, an opaque cudaStream_t; a Status: success or the validation / CUDA error.
namespace device {
Status mla_requantize_576_to_656(std::int64_t num_blocks, std::int64_t block_size, const std::uint8_t* src,
                                 float k_scale, KScale mode, std::uint8_t* dst, void* stream);
Status mla_quantize(const MlaCacheShape& c, const std::uint16_t* x, const std::int64_t* slot_mapping,
                    std::int64_t num_tokens, std::uint8_t* cache, void* stream);
Status mla_dequantize(const MlaCacheShape& c, const std::uint8_t* cache, float k_scale, DType output, void* y,
                      void* stream);
Status nvfp4_paged_to_workspace(const WorkspaceBatch& w, const std::uint8_t* cache, const std::int32_t* block_tables,
                                const std::int32_t* cu_seq_lens, float factor_k, float factor_v,
                                std::uint8_t* k_out, std::uint8_t* v_out, void* stream);
}  // namespace device

}  // namespace kvq::kernels
