// Paged KV-cache layouts (REFERENCE.md section 5): every byte offset of an FP8 cache pair and of
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
  // The same offsets within one block in 32-bit arithmetic, for callers that know the block's
  // bytes fit (block_bytes() < 2^31; the paged kernels' narrow path): the block base is then one
  // 64-bit multiply-add, the rest 32-bit (a 64-bit multiply costs several instructions).
  KVQ_HD std::uint32_t data_within(KvSide side, std::uint32_t token, std::uint32_t head, std::uint32_t byte) const {
    const auto r = order == KvOrder::nhd ? token * static_cast<std::uint32_t>(heads) + head
                                         : head * static_cast<std::uint32_t>(block_size) + token;
    return static_cast<std::uint32_t>(region(side, PagePart::data).offset) +
           r * static_cast<std::uint32_t>(data_row_bytes()) + byte;
  }
  KVQ_HD std::uint32_t scale_within(KvSide side, std::uint32_t token, std::uint32_t head, std::uint32_t s) const {
    const auto S = static_cast<std::uint32_t>(scales_per_head()), H = static_cast<std::uint32_t>(heads),
               B = static_cast<std::uint32_t>(block_size);
    std::uint32_t within;
    if (!swizzled(side)) {
      within = (order == KvOrder::nhd ? token * H + head : head * B + token) * S + s;
    } else if (order == KvOrder::nhd) {
      within = (token / 4) * 4 * (H * S) + 4 * (head * S + s) + token % 4;  // swizzle_index(H * S, token, head * S + s)
    } else {
      within = head * B * S + (token / 4) * 4 * S + 4 * s + token % 4;     // head * B * S + swizzle_index(S, token, s)
    }
    return static_cast<std::uint32_t>(region(side, PagePart::scales).offset) + within;
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
