// MLA (DeepSeek) KV-cache layouts as data (docs/layouts.md), and the geometry of the
// vLLM NVFP4 page that the prefill workspace kernel reads. Host and device.
//
// A layout is an ordered list of segments per token; every byte offset is a prefix sum of the
// segment sizes, never a constant written twice. A token's bytes are its `record` (in the
// token's row of the block) and, for MODEL1, a `tail` record in a section after all the
// block's rows. Block bytes are padded to a multiple of `block_align`.
#pragma once

#include <cstdint>

#include "formats/conventions.hpp"
#include "formats/host_device.hpp"

namespace kvq::kernels {

enum class MlaPart : std::uint8_t { nope, tile_scales, rope, pad };
inline const char* name_of(MlaPart p) {  // as `kvq layouts` and the verify reports print it
  switch (p) {
    case MlaPart::nope: return "nope";
    case MlaPart::tile_scales: return "tile scales";
    case MlaPart::rope: return "rope";
    case MlaPart::pad: return "pad";
  }
  return "?";
}

struct MlaSegment {
  MlaPart part = MlaPart::nope;
  FormatId format = FormatId::e4m3fn;  // of each item (pad: one E8M0-sized byte each)
  int count = 0;                       // items
  KVQ_HD constexpr int bytes() const { return count * format_of(format).bits() / 8; }
};

enum class MlaLayoutId : std::uint8_t { bf16, fp8_nope_fp8_rope, fp8_nope_block_scale_bf16_rope, model1_fp8_sparse };

struct MlaLayout {
  MlaLayoutId id = MlaLayoutId::bf16;
  const char* name = "";
  int tile = 0;  // nope dims per tile scale; 0: no tile scales
  MlaSegment record[3] = {};
  int record_segments = 0;
  MlaSegment tail[2] = {};
  int tail_segments = 0;
  int block_align = 1;  // block bytes rounded up to a multiple of this

  // Loops run over the arrays' full sizes (a fixed trip count), and segments are returned by
  // value: with a constant layout, device code folds every offset to a constant instead of
  // keeping the layout in local memory.
  static constexpr int kMaxRecord = 3, kMaxTail = 2;

  // The segment holding `part` (record first, then tail; count 0 when absent) and whether it is
  // in the tail.
  KVQ_HD constexpr MlaSegment segment(MlaPart part, bool* in_tail = nullptr) const {
    MlaSegment found{part, FormatId::e4m3fn, 0};
    bool tail_part = false;
    for (int i = kMaxTail - 1; i >= 0; --i)
      if (i < tail_segments && tail[i].part == part) found = tail[i], tail_part = true;
    for (int i = kMaxRecord - 1; i >= 0; --i)
      if (i < record_segments && record[i].part == part) found = record[i], tail_part = false;
    if (in_tail) *in_tail = tail_part;
    return found;
  }
  KVQ_HD constexpr bool has(MlaPart part) const { return segment(part).count > 0; }
  // Byte offset of `part` inside its record (record or tail), the sum of the sizes before it.
  KVQ_HD constexpr int offset_of(MlaPart part) const {
    int at = -1, sum = 0;
    for (int i = 0; i < kMaxRecord; ++i) {
      if (i < record_segments && at < 0 && record[i].part == part) at = sum;
      if (i < record_segments) sum += record[i].bytes();
    }
    if (at >= 0) return at;
    sum = 0;
    for (int i = 0; i < kMaxTail; ++i) {
      if (i < tail_segments && at < 0 && tail[i].part == part) at = sum;
      if (i < tail_segments) sum += tail[i].bytes();
    }
    return at;
  }
  KVQ_HD constexpr bool in_tail(MlaPart part) const {
    bool tail_part = false;
    segment(part, &tail_part);
    return tail_part;
  }
  KVQ_HD constexpr int count_of(MlaPart part) const { return segment(part).count; }
  KVQ_HD constexpr int record_bytes() const {
    int n = 0;
    for (int i = 0; i < kMaxRecord; ++i) n += i < record_segments ? record[i].bytes() : 0;
    return n;
  }
  KVQ_HD constexpr int tail_bytes() const {
    int n = 0;
    for (int i = 0; i < kMaxTail; ++i) n += i < tail_segments ? tail[i].bytes() : 0;
    return n;
  }
  KVQ_HD constexpr int token_bytes() const { return record_bytes() + tail_bytes(); }  // what one token costs
  KVQ_HD constexpr int nope_dims() const { return count_of(MlaPart::nope); }
  KVQ_HD constexpr int rope_dims() const { return count_of(MlaPart::rope); }
  KVQ_HD constexpr int dims() const { return nope_dims() + rope_dims(); }  // the head_dim a token holds
  KVQ_HD constexpr int tiles() const { return tile > 0 ? nope_dims() / tile : 0; }

  // A paged cache is [num_blocks][block_bytes(T)]: T records, then T tail records, then padding.
  KVQ_HD constexpr std::int64_t block_bytes(std::int64_t T) const {
    const std::int64_t used = T * token_bytes();
    return (used + block_align - 1) / block_align * block_align;
  }
  KVQ_HD constexpr std::int64_t record_offset(std::int64_t T, std::int64_t block, std::int64_t t) const {
    return block * block_bytes(T) + t * record_bytes();
  }
  KVQ_HD constexpr std::int64_t tail_offset(std::int64_t T, std::int64_t block, std::int64_t t) const {
    return block * block_bytes(T) + T * record_bytes() + t * tail_bytes();
  }
  // The byte offset of `part` of token t of a block.
  KVQ_HD constexpr std::int64_t part_offset(std::int64_t T, std::int64_t block, std::int64_t t, MlaPart part) const {
    return (in_tail(part) ? tail_offset(T, block, t) : record_offset(T, block, t)) + offset_of(part);
  }
};

// The four layouts of docs/layouts.md (one KV head, head_dim 576 = 512 nope + 64 rope;
// MODEL1: 448 + 64). Built by a function so that device code gets them as values.
KVQ_HD constexpr MlaLayout mla_layout(MlaLayoutId id) {
  switch (id) {
    case MlaLayoutId::bf16: break;
    case MlaLayoutId::fp8_nope_fp8_rope:  // the decode backend's layout, one per-tensor k_scale
      return {id, "fp8_nope_fp8_rope", 0,
              {{MlaPart::nope, FormatId::e4m3fn, 512}, {MlaPart::rope, FormatId::e4m3fn, 64}}, 2, {}, 0, 1};
    case MlaLayoutId::fp8_nope_block_scale_bf16_rope:  // the sparse prefill backend's (FlashMLA "V32")
      return {id, "fp8_nope_with_block_scale_bf16_rope", 128,
              {{MlaPart::nope, FormatId::e4m3fn, 512}, {MlaPart::tile_scales, FormatId::fp32, 4},
               {MlaPart::rope, FormatId::bf16, 64}}, 3, {}, 0, 1};
    case MlaLayoutId::model1_fp8_sparse:  // E8M0 tile scales in the block's tail, one pad byte each
      return {id, "model1_fp8_sparse", 64,
              {{MlaPart::nope, FormatId::e4m3fn, 448}, {MlaPart::rope, FormatId::bf16, 64}}, 2,
              {{MlaPart::tile_scales, FormatId::e8m0fnu, 7}, {MlaPart::pad, FormatId::e8m0fnu, 1}}, 2, 576};
  }
  return {MlaLayoutId::bf16, "bf16", 0, {{MlaPart::nope, FormatId::bf16, 512}, {MlaPart::rope, FormatId::bf16, 64}}, 2,
          {}, 0, 1};
}

inline constexpr MlaLayout kMlaBf16 = mla_layout(MlaLayoutId::bf16);
inline constexpr MlaLayout kMlaFp8NopeFp8Rope = mla_layout(MlaLayoutId::fp8_nope_fp8_rope);
inline constexpr MlaLayout kMlaFp8NopeBlockScaleBf16Rope = mla_layout(MlaLayoutId::fp8_nope_block_scale_bf16_rope);
inline constexpr MlaLayout kMlaModel1Fp8Sparse = mla_layout(MlaLayoutId::model1_fp8_sparse);
inline constexpr MlaLayoutId kMlaLayoutIds[] = {MlaLayoutId::bf16, MlaLayoutId::fp8_nope_fp8_rope,
                                                MlaLayoutId::fp8_nope_block_scale_bf16_rope,
                                                MlaLayoutId::model1_fp8_sparse};

static_assert(kMlaBf16.token_bytes() == 1152 && kMlaBf16.dims() == 576);
static_assert(kMlaFp8NopeFp8Rope.token_bytes() == 576 && kMlaFp8NopeFp8Rope.offset_of(MlaPart::rope) == 512);
static_assert(kMlaFp8NopeBlockScaleBf16Rope.token_bytes() == 656 && kMlaFp8NopeBlockScaleBf16Rope.tiles() == 4);
static_assert(kMlaFp8NopeBlockScaleBf16Rope.offset_of(MlaPart::tile_scales) == 512 &&
              kMlaFp8NopeBlockScaleBf16Rope.offset_of(MlaPart::rope) == 528);
static_assert(kMlaModel1Fp8Sparse.record_bytes() == 448 + 128 && kMlaModel1Fp8Sparse.tail_bytes() == 8);
static_assert(kMlaModel1Fp8Sparse.tiles() == 7 && kMlaModel1Fp8Sparse.dims() == 512);
static_assert(kMlaModel1Fp8Sparse.block_bytes(64) == 65 * 576 && kMlaModel1Fp8Sparse.block_bytes(1) == 2 * 576);
static_assert(kMlaModel1Fp8Sparse.in_tail(MlaPart::tile_scales) && !kMlaModel1Fp8Sparse.in_tail(MlaPart::rope));

// The vLLM NVFP4 paged cache, NHD, no scale swizzle: [num_blocks, 2 (K, V), block_size, heads,
// full_dim] bytes, each side [data: block_size*heads*D/2][scales: block_size*heads*D/16], so a
// block is [K_data | K_scale | V_data | V_scale]. Only what the prefill workspace reads.
struct Nvfp4PageGeometry {
  std::int64_t num_blocks = 0;
  std::int64_t block_size = 0;  // tokens a block
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;  // D; 16 elements share an E4M3 scale, two E2M1 codes a byte
  static constexpr int kBlock = 16;

  KVQ_HD constexpr std::int64_t data_bytes_per_head() const { return head_dim / 2; }
  KVQ_HD constexpr std::int64_t scale_bytes_per_head() const { return head_dim / kBlock; }
  KVQ_HD constexpr std::int64_t full_dim() const { return data_bytes_per_head() + scale_bytes_per_head(); }
  KVQ_HD constexpr std::int64_t side_bytes() const { return block_size * heads * full_dim(); }
  KVQ_HD constexpr std::int64_t block_bytes() const { return 2 * side_bytes(); }
  KVQ_HD constexpr std::int64_t cache_bytes() const { return num_blocks * block_bytes(); }
  // side 0 = K, 1 = V; token t of the block, head h.
  KVQ_HD constexpr std::int64_t data_offset(std::int64_t block, int side, std::int64_t t, std::int64_t h) const {
    return block * block_bytes() + side * side_bytes() + (t * heads + h) * data_bytes_per_head();
  }
  KVQ_HD constexpr std::int64_t scale_offset(std::int64_t block, int side, std::int64_t t, std::int64_t h) const {
    return block * block_bytes() + side * side_bytes() + block_size * heads * data_bytes_per_head() +
           (t * heads + h) * scale_bytes_per_head();
  }
};

static_assert(Nvfp4PageGeometry{1, 16, 1, 128}.full_dim() == 72 && Nvfp4PageGeometry{1, 16, 1, 576}.full_dim() * 8 / 9 == 288);
static_assert(Nvfp4PageGeometry{2, 16, 8, 128}.scale_offset(1, 1, 0, 0) == 2 * 16 * 8 * 72 + 16 * 8 * 72 + 16 * 8 * 64);

}  // namespace kvq::kernels
