// The qsnr study's sums, the same code on the CPU and the GPU: per block, the block's error and
// signal sums, clipping and crest factor (block_partial); per chunk of kChunkBlocks blocks their
// sums in block order (add_to_chunk); the host adds the chunks in order. A fixed order, so the
// device and the CPU give the same doubles bit for bit. The crest factors' median is an order
// statistic, the same whatever finds it (the CPU: nth_element; the GPU: a radix select).
#pragma once

#include <cmath>
#include <cstdint>

#include "formats/recipes.hpp"

namespace kvq::experiments {

inline constexpr int kChunkBlocks = 1024;

struct BlockPartial {
  double err2 = 0, x2 = 0, max_abs_error = 0;
  double crest = -1;  // max|x| / rms(x); -1 for an all-zero block
  int clipped = 0;    // elements stored as the top code with |x| beyond its value
};

struct ChunkSum {
  double err2 = 0, x2 = 0, max_abs_error = 0;
  double crest_sum = 0;  // over the blocks with a crest factor (not all zero)
  std::int64_t clipped = 0, clipped_blocks = 0, crest_blocks = 0;
};

// One block of n values through the recipe: quantize_block, dequantize_element, the sums in
// element order.
KVQ_HD inline BlockPartial block_partial(const Recipe& r, float g, const float* x, int n) {
  std::uint8_t codes[kMaxRecipeBlock];
  const std::uint8_t scale = quantize_block(r, g, x, n, codes);
  const Format f = format_of(r.element);
  BlockPartial p;
  double block_max = 0;
  for (int i = 0; i < n; ++i) {
    const double xv = x[i], yv = dequantize_element(r, g, scale, codes[i]);
    const double d = xv - yv;
    const double ax = xv < 0 ? -xv : xv, ay = yv < 0 ? -yv : yv, ad = d < 0 ? -d : d;
    p.err2 += d * d;
    p.x2 += xv * xv;
    block_max = ax > block_max ? ax : block_max;
    p.max_abs_error = ad > p.max_abs_error ? ad : p.max_abs_error;
    p.clipped += (codes[i] & f.magnitude_mask()) == f.max_finite_code() && ax > ay;
  }
  if (p.x2 > 0) p.crest = block_max / sqrt(p.x2 / n);
  return p;
}

KVQ_HD inline void add_to_chunk(ChunkSum& c, const BlockPartial& p) {
  c.err2 += p.err2;
  c.x2 += p.x2;
  c.max_abs_error = p.max_abs_error > c.max_abs_error ? p.max_abs_error : c.max_abs_error;
  c.clipped += p.clipped;
  c.clipped_blocks += p.clipped > 0;
  if (p.crest >= 0) {
    c.crest_sum += p.crest;
    ++c.crest_blocks;
  }
}

KVQ_HD inline void add_chunk(ChunkSum& total, const ChunkSum& c) {
  total.err2 += c.err2;
  total.x2 += c.x2;
  total.max_abs_error = c.max_abs_error > total.max_abs_error ? c.max_abs_error : total.max_abs_error;
  total.clipped += c.clipped;
  total.clipped_blocks += c.clipped_blocks;
  total.crest_sum += c.crest_sum;
  total.crest_blocks += c.crest_blocks;
}

}  // namespace kvq::experiments
