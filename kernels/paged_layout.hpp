// Paged KV-cache layouts (docs/paged.md): every byte offset of an FP8 cache pair and of
// the NVFP4 packed page, computed in one place for the kernels, their CPU twins and the tests.
//
// FP8 (vLLM flash layout): two caches, key_cache and value_cache, one E4M3 byte per element,
//   NHD [num_blocks, block_size, heads, D] or HND [num_blocks, heads, block_size, D].
// NVFP4 packed page: one kv_cache `[num_blocks, 2, block_size, heads, full_dim]` bytes,
//   full_dim = D/2 + D/16. Each side (K, then V) of a block is
//   [data: block_size*heads*D/2 packed E2M1 | scales: block_size*heads*D/16 E4M3], so a block is
//   [K_data | K_scale | V_data | V_scale]. Rows of the data and scale regions are (token, head)
//   in NHD and (head, token) in HND.
// Scale swizzle (needs block_size % 4 == 0): the scale region read as a row-major matrix
//   [block_size, C] (C = heads*S in NHD, one matrix [block_size, S] per head in HND; S = D/16)
//   stores entry (t, c) at (t/4)*4*C + 4*c + t%4: the 4 tokens of a group are adjacent.
#pragma once

#include <cstdint>

#include "formats/host_device.hpp"

namespace kvq::kernels {

enum class PagedFormat : std::uint8_t { fp8, nvfp4 };
enum class KvOrder : std::uint8_t { nhd, hnd };
enum class ScaleSwizzle : std::uint8_t { none, v_only, k_and_v };
enum class KvSide : std::uint8_t { k = 0, v = 1 };
enum class PagePart : std::uint8_t { data = 0, scales = 1 };
// The names manifests and reports use (docs/ports.md "Paged stores").
constexpr const char* name_of(KvOrder o) { return o == KvOrder::nhd ? "NHD" : "HND"; }
constexpr const char* name_of(ScaleSwizzle s) {
  return s == ScaleSwizzle::none ? "none" : s == ScaleSwizzle::v_only ? "v_only" : "k_and_v";
}

inline constexpr int kSwizzleGroup = 4;  // tokens whose scales interleave

// The swizzle on a row-major [rows, cols] matrix (rows % 4 == 0) and its inverse.
KVQ_HD constexpr std::int64_t swizzle_index(std::int64_t cols, std::int64_t row, std::int64_t col) {
  return (row / kSwizzleGroup) * kSwizzleGroup * cols + kSwizzleGroup * col + row % kSwizzleGroup;
}
KVQ_HD constexpr std::int64_t unswizzle_index(std::int64_t cols, std::int64_t offset) {
  const std::int64_t group = offset / (kSwizzleGroup * cols), within = offset % (kSwizzleGroup * cols);
  const std::int64_t row = group * kSwizzleGroup + within % kSwizzleGroup, col = within / kSwizzleGroup;
  return row * cols + col;
}

// A contiguous byte range inside one block (split views: block b's range starts at
// b * block_bytes() + offset of the buffer the side lives in).
struct PageRegion {
  std::int64_t offset = 0;
  std::int64_t bytes = 0;
};

// Where a side's NVFP4 rows lie within a block, as sums of products for 32-bit offsets (the paged
// kernels' narrow path): one form for NHD and HND, swizzled or not, whose terms a launch computes
// once (PagedKvLayout::row_steps), so a chunk's offsets cost the same few multiply-adds in every
// layout. Within block 0, equal to data_offset and scale_offset (property
// paged/layout/row-steps-are-offsets).
struct RowSteps {
  std::uint32_t data_base = 0, data_token = 0, data_head = 0;
  std::uint32_t scale_base = 0, scale_group = 0, scale_token = 0, scale_head = 0, scale_s = 0;
  // Byte `byte` of (token, head)'s data row.
  KVQ_HD std::uint32_t data(std::uint32_t token, std::uint32_t head, std::uint32_t byte) const {
    return data_base + token * data_token + head * data_head + byte;
  }
  // Scale s of (token, head): tokens in groups of kSwizzleGroup, each token of a group a step.
  KVQ_HD std::uint32_t scale(std::uint32_t token, std::uint32_t head, std::uint32_t s) const {
    return scale_base + (token / kSwizzleGroup) * scale_group + (token % kSwizzleGroup) * scale_token +
           head * scale_head + s * scale_s;
  }
};

struct PagedKvLayout {
  PagedFormat format = PagedFormat::fp8;
  KvOrder order = KvOrder::nhd;
  ScaleSwizzle swizzle = ScaleSwizzle::none;  // NVFP4 only
  std::int64_t num_blocks = 0;
  std::int64_t block_size = 0;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;  // D

  KVQ_HD std::int64_t slots() const { return num_blocks * block_size; }
  KVQ_HD std::int64_t scales_per_head() const { return head_dim / 16; }  // S (NVFP4)
  // Bytes of one (token, head) row in the data region: D (FP8) or D/2 (NVFP4).
  KVQ_HD std::int64_t data_row_bytes() const { return format == PagedFormat::fp8 ? head_dim : head_dim / 2; }
  KVQ_HD std::int64_t full_dim() const { return head_dim / 2 + head_dim / 16; }
  KVQ_HD std::int64_t rows_per_block() const { return block_size * heads; }
  KVQ_HD std::int64_t data_bytes_per_side() const { return rows_per_block() * data_row_bytes(); }
  KVQ_HD std::int64_t scale_bytes_per_side() const {
    return format == PagedFormat::fp8 ? 0 : rows_per_block() * scales_per_head();
  }
  KVQ_HD std::int64_t side_bytes() const { return data_bytes_per_side() + scale_bytes_per_side(); }
  // Bytes between consecutive blocks of one buffer: one side (FP8, each side its own cache) or
  // both sides (NVFP4, one kv_cache).
  KVQ_HD std::int64_t block_bytes() const { return format == PagedFormat::fp8 ? side_bytes() : 2 * side_bytes(); }
  KVQ_HD std::int64_t buffer_bytes() const { return num_blocks * block_bytes(); }  // each FP8 cache, or kv_cache
  KVQ_HD bool swizzled(KvSide side) const {
    return swizzle == ScaleSwizzle::k_and_v || (swizzle == ScaleSwizzle::v_only && side == KvSide::v);
  }

  // The split views: where part `part` of side `side` lies within a block of its buffer.
  KVQ_HD PageRegion region(KvSide side, PagePart part) const {
    const std::int64_t side_offset = format == PagedFormat::fp8 ? 0 : static_cast<std::int64_t>(side) * side_bytes();
    if (part == PagePart::data) return {side_offset, data_bytes_per_side()};
    return {side_offset + data_bytes_per_side(), scale_bytes_per_side()};
  }

  // Row of (token, head) within a region: NHD token-major, HND head-major.
  KVQ_HD std::int64_t row(std::int64_t token, std::int64_t head) const {
    return order == KvOrder::nhd ? token * heads + head : head * block_size + token;
  }
  // The row steps of a side (NVFP4), for callers that know a block's bytes fit 31 bits (the
  // paged kernels' narrow path: the block base is then one 64-bit multiply-add, the rest 32-bit).
  // scale_offset's four cases as one sum: a token is (token / 4) * 4 + token % 4, so an unswizzled
  // row's token step splits into a step of 4 tokens and a token step, and a swizzled row's token
  // step is 1 and its scale step 4 (swizzle_index).
  KVQ_HD RowSteps row_steps(KvSide side) const {
    const auto S = static_cast<std::uint32_t>(scales_per_head()), H = static_cast<std::uint32_t>(heads),
               B = static_cast<std::uint32_t>(block_size), R = static_cast<std::uint32_t>(data_row_bytes());
    const bool nhd = order == KvOrder::nhd;
    RowSteps st;
    st.data_base = static_cast<std::uint32_t>(region(side, PagePart::data).offset);
    st.data_token = nhd ? H * R : R;
    st.data_head = nhd ? R : B * R;
    st.scale_base = static_cast<std::uint32_t>(region(side, PagePart::scales).offset);
    const std::uint32_t token_scales = nhd ? H * S : S;  // scale bytes between consecutive tokens, unswizzled
    st.scale_group = kSwizzleGroup * token_scales;
    st.scale_token = swizzled(side) ? 1 : token_scales;
    st.scale_head = nhd ? (swizzled(side) ? kSwizzleGroup * S : S) : B * S;
    st.scale_s = swizzled(side) ? kSwizzleGroup : 1;
    return st;
  }

  // Byte `byte` (< data_row_bytes()) of the data of (token, head) in block `block`, in its buffer.
  KVQ_HD std::int64_t data_offset(KvSide side, std::int64_t block, std::int64_t token, std::int64_t head,
                                  std::int64_t byte) const {
    return block * block_bytes() + region(side, PagePart::data).offset + row(token, head) * data_row_bytes() + byte;
  }
  // Scale s (< S) of (token, head) in block `block` (NVFP4), swizzled where the side is.
  KVQ_HD std::int64_t scale_offset(KvSide side, std::int64_t block, std::int64_t token, std::int64_t head,
                                   std::int64_t s) const {
    const std::int64_t S = scales_per_head();
    std::int64_t within;
    if (!swizzled(side)) {
      within = row(token, head) * S + s;
    } else if (order == KvOrder::nhd) {
      within = swizzle_index(heads * S, token, head * S + s);
    } else {
      within = head * block_size * S + swizzle_index(S, token, s);
    }
    return block * block_bytes() + region(side, PagePart::scales).offset + within;
  }
};

}  // namespace kvq::kernels
