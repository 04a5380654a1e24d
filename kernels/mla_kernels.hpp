// MLA KV-cache kernels (S5) and the NVFP4 paged cache -> E4M3 prefill workspace (S1), with
// their CPU twins. Contracts: docs/layouts.md. The per-piece code below is the whole work of
// both the twin and the kernel (one GPU thread per piece).
//
// 1. requantize FP8_NOPE_FP8_ROPE (576 B) -> FP8_NOPE_WITH_BLOCK_SCALE_BF16_ROPE (656 B) over a
//    whole paged cache; the per-tensor k_scale folded into the tile scales, or dropped (the bug).
// 2. quantize BF16 tokens -> 656 or MODEL1 at slot_mapping[i]; dequantize any layout.
// 3. NVFP4 paged cache -> contiguous E4M3 workspace, for a batch given block tables and
//    cu_seq_lens.
#pragma once

#include <cstdint>
#include <string>

#include "formats/recipe_names.hpp"
#include "kernels/mla_layouts.hpp"
#include "kernels/quantize.hpp"

namespace kvq::kernels {

// A paged MLA cache: num_blocks blocks of layout.block_bytes(block_size) bytes.
struct MlaCacheShape {
  MlaLayoutId layout = MlaLayoutId::fp8_nope_block_scale_bf16_rope;
  std::int64_t num_blocks = 0;
  std::int64_t block_size = 0;  // tokens a block
  KVQ_HD constexpr MlaLayout desc() const { return mla_layout(layout); }
  KVQ_HD constexpr std::int64_t slots() const { return num_blocks * block_size; }
  KVQ_HD constexpr std::int64_t bytes() const { return num_blocks * desc().block_bytes(block_size); }
  KVQ_HD constexpr std::int64_t part(std::int64_t slot, MlaPart p) const {
    return desc().part_offset(block_size, slot / block_size, slot % block_size, p);
  }
};

// What the 576 -> 656 conversion does with the 576 cache's per-tensor decode scale k_scale.
enum class KScale : std::uint8_t {
  fold,  // tile scales = k_scale, rope = bf16(e4m3 * k_scale) rounded once: values kept
  drop,  // tile scales = 1.0, rope = bf16(e4m3): the conversion one engine ships (k_scale lost)
};
const char* name_of(KScale k);
const char* name_of(MlaLayoutId id);

// The tile recipe of a tiled layout: mla-fp8-tile128's rule at the layout's tile
// (scale 2^ceil(log2(max(amax/448, 1e-4))), E4M3 elements x / 2^e).
KVQ_HD constexpr Recipe mla_tile_recipe(const MlaLayout& l) {
  Recipe r = recipe_names_detail::mla_tile128();
  r.block = l.tile;
  return r;
}

namespace mla_detail {

inline constexpr int kRopeDims = 64;
inline constexpr std::uint16_t kBf16Nan = 0x7FC0;  // every NaN the kernels write (canonical)

KVQ_HD inline void store_u32(std::uint8_t* p, std::uint32_t v) {
  KVQ_UNROLL
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
KVQ_HD inline std::uint32_t load_u32(const std::uint8_t* p) {
  return p[0] | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
}
KVQ_HD inline std::uint16_t load_u16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
KVQ_HD inline float canonical(float v) { return v != v ? float_from_bits(0x7fc00000u) : v; }
// The FP32 value of a stored tile scale (656: FP32 bits; MODEL1: an E8M0 byte, 0xFF = NaN).
KVQ_HD inline float tile_scale(const MlaLayout& l, const std::uint8_t* p) {
  if (l.find(MlaPart::tile_scales)->format == FormatId::fp32) return float_from_bits(load_u32(p));
  return p[0] == 0xFF ? float_from_bits(0x7fc00000u) : pow2_float(static_cast<int>(p[0]) - 127);
}

}  // namespace mla_detail

// 1. One piece of slot s: piece < 4 copies nope tile `piece` and writes its FP32 tile scale;
// piece 4 widens the rope. `fold` keeps the nope values exactly and rounds the rope once: the
// exact e4m3 * k_scale (FP64, exact) to BF16.
inline constexpr int kRequantPieces = kMlaFp8NopeBlockScaleBf16Rope.tiles() + 1;
KVQ_HD inline void requantize_576_to_656_piece(std::int64_t block_size, const std::uint8_t* src, float k_scale,
                                               KScale mode, std::uint8_t* dst, std::int64_t slot, int piece) {
  using namespace mla_detail;
  const MlaCacheShape in{MlaLayoutId::fp8_nope_fp8_rope, 0, block_size};
  const MlaCacheShape out{MlaLayoutId::fp8_nope_block_scale_bf16_rope, 0, block_size};
  const int tile = out.desc().tile;
  if (piece < out.desc().tiles()) {
    std::uint8_t codes[kMaxRecipeBlock];
    io::load_bytes(src + in.part(slot, MlaPart::nope) + piece * tile, tile, codes);
    io::store_bytes(dst + out.part(slot, MlaPart::nope) + piece * tile, codes, tile);
    store_u32(dst + out.part(slot, MlaPart::tile_scales) + 4 * piece, bits_of(mode == KScale::fold ? k_scale : 1.0f));
    return;
  }
  std::uint8_t codes[kRopeDims];
  std::uint16_t rope[kRopeDims];
  io::load_bytes(src + in.part(slot, MlaPart::rope), kRopeDims, codes);
  KVQ_UNROLL
  for (int i = 0; i < kRopeDims; ++i) {
    const float v = e4m3_value_fast(codes[i]);
    if (v != v) {
      rope[i] = kBf16Nan;
    } else if (mode == KScale::drop) {
      rope[i] = bf16_rne_fast(v);  // exact: every E4M3 value is a BF16 value
    } else {
      rope[i] = static_cast<std::uint16_t>(encode_double(kBF16, Conversion{}, static_cast<double>(v) * k_scale));
    }
  }
  io::store_bytes(dst + out.part(slot, MlaPart::rope), reinterpret_cast<const std::uint8_t*>(rope), 2 * kRopeDims);
}

// 2. Quantize one piece of token `row` of x (BF16 [tokens, dims]) into its slot: piece < tiles
// quantizes nope tile `piece` (quantize_block, the tile recipe) and writes its scale; piece ==
// tiles copies the BF16 rope (and zeroes MODEL1's pad byte).
KVQ_HD constexpr int mla_quantize_pieces(const MlaLayout& l) { return l.tiles() + 1; }
KVQ_HD inline void mla_quantize_piece(const MlaCacheShape& c, const std::uint16_t* x, std::int64_t row,
                                      std::uint8_t* cache, std::int64_t slot, int piece) {
  using namespace mla_detail;
  const MlaLayout l = c.desc();
  const std::int64_t first = row * l.dims();
  if (piece < l.tiles()) {
    float values[kMaxRecipeBlock];
    std::uint8_t codes[kMaxRecipeBlock];
    io::load_values(DType::bf16, x, first + piece * l.tile, l.tile, values);
    const std::uint8_t e8m0 = quantize_block(mla_tile_recipe(l), 1.0f, values, l.tile, codes);
    io::store_bytes(cache + c.part(slot, MlaPart::nope) + piece * l.tile, codes, l.tile);
    std::uint8_t* scale = cache + c.part(slot, MlaPart::tile_scales);
    if (l.find(MlaPart::tile_scales)->format == FormatId::fp32) {  // the E8M0 byte's value as FP32 (NaN for 0xFF)
      store_u32(scale + 4 * piece, e8m0 == 0xFF ? 0x7fc00000u : bits_of(pow2_float(static_cast<int>(e8m0) - 127)));
    } else {
      scale[piece] = e8m0;
    }
    return;
  }
  std::uint8_t rope[2 * kRopeDims];
  io::load_bytes(reinterpret_cast<const std::uint8_t*>(x + first + l.nope_dims()), 2 * kRopeDims, rope);
  io::store_bytes(cache + c.part(slot, MlaPart::rope), rope, 2 * kRopeDims);
  if (l.find(MlaPart::pad)) cache[c.part(slot, MlaPart::pad)] = 0;
}

// The FP32 value of dim `d` of slot s (NaN canonical): BF16 widened; 576: e4m3 * k_scale (one
// FP32 multiply); tiled layouts: e4m3 * tile scale (exact: a power of two, or k_scale after a
// 576 -> 656 fold); rope BF16 widened. k_scale is used by the 576 layout only.
KVQ_HD inline float mla_dequantize_element(const MlaCacheShape& c, const std::uint8_t* cache, std::int64_t slot, int d,
                                           float k_scale) {
  using namespace mla_detail;
  const MlaLayout l = c.desc();
  const bool rope = d >= l.nope_dims();
  const MlaPart part = rope ? MlaPart::rope : MlaPart::nope;
  const FormatId f = l.find(part)->format;
  const std::uint8_t* p = cache + c.part(slot, part) + static_cast<std::int64_t>(rope ? d - l.nope_dims() : d) *
                                                          (format_of(f).bits() / 8);
  if (f == FormatId::bf16) return canonical(float_from_bits(std::uint32_t{load_u16(p)} << 16));
  const float v = e4m3_value_fast(p[0]);
  if (l.tile == 0) return canonical(v * k_scale);
  const int tile = d / l.tile;
  const std::uint8_t* scales = cache + c.part(slot, MlaPart::tile_scales);
  return canonical(v * mla_detail::tile_scale(l, scales + tile * (format_of(l.find(MlaPart::tile_scales)->format).bits() / 8)));
}

// Dequantize pieces: 64 dims each.
inline constexpr int kDequantChunk = 64;
KVQ_HD constexpr int mla_dequantize_pieces(const MlaLayout& l) { return l.dims() / kDequantChunk; }
KVQ_HD inline void mla_dequantize_piece(const MlaCacheShape& c, const std::uint8_t* cache, float k_scale, DType output,
                                        void* y, std::int64_t slot, int piece) {
  float values[kDequantChunk];
  KVQ_UNROLL
  for (int i = 0; i < kDequantChunk; ++i) values[i] = mla_dequantize_element(c, cache, slot, piece * kDequantChunk + i, k_scale);
  io::store_values(output, y, slot * c.desc().dims() + piece * kDequantChunk, kDequantChunk, values);
}
static_assert(kMlaBf16.dims() % kDequantChunk == 0 && kMlaModel1Fp8Sparse.dims() % kDequantChunk == 0);

// 3. The prefill workspace of an NVFP4 paged cache for a batch: request b's tokens
// [0, cu_seq_lens[b+1] - cu_seq_lens[b]) live in pages block_tables[b][pos / block_size]; the
// workspace row of (b, pos) is cu_seq_lens[b] + pos, each row [heads, head_dim] E4M3 codes
// (requantize_e4m3: element * block scale * factor, exact, rounded once). K and V separately.
struct WorkspaceBatch {
  Recipe recipe;  // an NVFP4 recipe (E2M1 elements, E4M3 block scales of 16)
  Nvfp4PageGeometry pages;
  std::int64_t batch = 0;
  std::int64_t max_blocks_per_seq = 0;  // block_tables is [batch, max_blocks_per_seq] int32
  std::int64_t workspace_tokens = 0;    // rows of each workspace; == cu_seq_lens[batch]
  KVQ_HD constexpr std::int64_t blocks_per_row() const { return pages.heads * (pages.head_dim / Nvfp4PageGeometry::kBlock); }
  KVQ_HD constexpr std::int64_t items() const {  // (b, pos, side, head, 16-block) over the table capacity
    return batch * max_blocks_per_seq * pages.block_size * 2 * blocks_per_row();
  }
  KVQ_HD constexpr std::int64_t workspace_bytes() const { return workspace_tokens * pages.heads * pages.head_dim; }
};

// One 16-element block of one (request, position, side, head). Positions past the request's
// length write nothing; a page id outside [0, num_blocks) or a row outside the workspace (the
// twin rejects both first) never reads or writes out of bounds: the row's block becomes 0x7F
// (E4M3 NaN), or nothing is written when the row itself is out of range.
KVQ_HD inline void nvfp4_page_to_workspace_item(const WorkspaceBatch& w, const std::uint8_t* cache,
                                                const std::int32_t* block_tables, const std::int32_t* cu_seq_lens,
                                                float factor_k, float factor_v, std::uint8_t* k_out,
                                                std::uint8_t* v_out, std::int64_t item) {
  constexpr int n = Nvfp4PageGeometry::kBlock;
  const Nvfp4PageGeometry& g = w.pages;
  const std::int64_t j = item % (g.head_dim / n);
  std::int64_t rest = item / (g.head_dim / n);
  const std::int64_t h = rest % g.heads;
  rest /= g.heads;
  const int side = static_cast<int>(rest % 2);
  rest /= 2;
  const std::int64_t capacity = w.max_blocks_per_seq * g.block_size;
  const std::int64_t pos = rest % capacity;
  const std::int64_t b = rest / capacity;
  const std::int64_t start = cu_seq_lens[b];
  if (pos >= cu_seq_lens[b + 1] - start) return;
  const std::int64_t row = start + pos;
  if (row < 0 || row >= w.workspace_tokens) return;
  std::uint8_t* out = (side == 0 ? k_out : v_out) + (row * g.heads + h) * g.head_dim + j * n;
  const std::int64_t page = block_tables[b * w.max_blocks_per_seq + pos / g.block_size];
  std::uint8_t codes[n];
  if (page < 0 || page >= g.num_blocks) {
    KVQ_UNROLL
    for (int i = 0; i < n; ++i) codes[i] = 0x7F;
  } else {
    const std::int64_t t = pos % g.block_size;
    std::uint8_t packed[n / 2];
    io::load_bytes(cache + g.data_offset(page, side, t, h) + j * (n / 2), n / 2, packed);
    const std::uint8_t scale = cache[g.scale_offset(page, side, t, h) + j];
    const float factor = side == 0 ? factor_k : factor_v;
    KVQ_UNROLL
    for (int i = 0; i < n; ++i) {
      const std::uint8_t code = (i & 1) ? e2m1_odd(packed[i / 2]) : e2m1_even(packed[i / 2]);
      codes[i] = requantize_e4m3(w.recipe, scale, code, factor);
    }
  }
  io::store_bytes(out, codes, n);
}

// Validation ("" or a message naming the argument). The *_cpu twins also check table contents
// (slot_mapping, block_tables, cu_seq_lens) before writing anything; the launchers cannot read
// device tables and rely on the kernels' bounds checks above.
std::string validate(const MlaCacheShape& c);
std::string validate_requantize(std::int64_t num_blocks, std::int64_t block_size, float k_scale);
std::string validate_quantize(const MlaCacheShape& c, std::int64_t num_tokens);
std::string validate_dequantize(const MlaCacheShape& c, float k_scale);
std::string validate(const WorkspaceBatch& w, float factor_k, float factor_v);

// CPU twins.
std::string mla_requantize_576_to_656_cpu(std::int64_t num_blocks, std::int64_t block_size, const std::uint8_t* src,
                                          float k_scale, KScale mode, std::uint8_t* dst);
std::string mla_quantize_cpu(const MlaCacheShape& c, const std::uint16_t* x, const std::int64_t* slot_mapping,
                             std::int64_t num_tokens, std::uint8_t* cache);
std::string mla_dequantize_cpu(const MlaCacheShape& c, const std::uint8_t* cache, float k_scale, DType output, void* y);
std::string nvfp4_paged_to_workspace_cpu(const WorkspaceBatch& w, const std::uint8_t* cache,
                                         const std::int32_t* block_tables, const std::int32_t* cu_seq_lens,
                                         float factor_k, float factor_v, std::uint8_t* k_out, std::uint8_t* v_out);

// GPU launchers: device pointers, an opaque cudaStream_t; "" or the validation / CUDA error.
namespace device {
std::string mla_requantize_576_to_656(std::int64_t num_blocks, std::int64_t block_size, const std::uint8_t* src,
                                      float k_scale, KScale mode, std::uint8_t* dst, void* stream);
std::string mla_quantize(const MlaCacheShape& c, const std::uint16_t* x, const std::int64_t* slot_mapping,
                         std::int64_t num_tokens, std::uint8_t* cache, void* stream);
std::string mla_dequantize(const MlaCacheShape& c, const std::uint8_t* cache, float k_scale, DType output, void* y,
                           void* stream);
std::string nvfp4_paged_to_workspace(const WorkspaceBatch& w, const std::uint8_t* cache, const std::int32_t* block_tables,
                                     const std::int32_t* cu_seq_lens, float factor_k, float factor_v,
                                     std::uint8_t* k_out, std::uint8_t* v_out, void* stream);
}  // namespace device

}  // namespace kvq::kernels
