// `kvq bench` rows for the fused RoPE + FP8 + paged append kernel and the unfused pair (GPU):
// bytes moved / median time against a same-run device copy of the same bytes (benchmark.hpp).
// The shapes, their labels and their bytes are host code here, so that `kvq bench --peers` hands
// FlashInfer the very problems kvq's rows time (kernels/bench_flashinfer_rope.py).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/benchmark.hpp"
#include "kernels/rope_append.hpp"
#include "kernels/status.hpp"

namespace kvq::kernels {

// Each request of a benchmark batch holds this many new tokens, positions 0..255 (pos_ids = positions),
// on its own pages: kv_indptr[r] = r * 256 / page_size, kv_indices = 0, 1, 2, ... (one page each).
constexpr int kRopeBenchRequest = 256;

// The shapes run_rope_benchmarks times, in its order: MHA (32 Q / 8 KV heads, head_dim 128, all rotated)
// NeoX NHD, NeoX HND, GPT-J NHD, GPT-J HND; MLA (16 Q heads, 512 + 64) NeoX, whose ckv / kpe caches
// have no head axis (NHD and HND coincide). `tokens` rounded up to whole requests; page_size 16.
inline std::vector<RopeShape> rope_bench_shapes(DType dtype, std::int64_t tokens) {
  const std::int64_t n = (tokens + kRopeBenchRequest - 1) / kRopeBenchRequest * kRopeBenchRequest;
  const RopeShape mha{.input = dtype, .tokens = n, .batch = n / kRopeBenchRequest, .q_heads = 32, .kv_heads = 8,
                      .head_dim = 128, .rope_dim = 128, .max_pos = kRopeBenchRequest, .page_size = 16,
                      .num_pages = n / 16, .num_page_indices = n / 16};
  std::vector<RopeShape> shapes;
  for (const RopeStyle style : {RopeStyle::neox, RopeStyle::gptj}) {
    for (const KvLayout layout : {KvLayout::nhd, KvLayout::hnd}) {
      shapes.push_back(mha);
      shapes.back().style = style;
      shapes.back().layout = layout;
    }
  }
  RopeShape mla = mha;
  mla.attention = Attention::mla;
  mla.q_heads = 16;
  mla.kv_heads = 1;
  mla.head_dim = 576;
  mla.rope_dim = 64;
  shapes.push_back(mla);
  return shapes;
}

// A shape's row label, attention-style[-hnd]-tokens: NHD, the default layout, goes unnamed.
inline std::string rope_bench_label(const RopeShape& s) {
  return std::string(name_of(s.attention)) + "-" + name_of(s.style) + (s.layout == KvLayout::hnd ? "-hnd" : "") + "-" +
         std::to_string(s.tokens);
}

// Bytes a row must move (read + written): the inputs, one FP32 cos/sin row and four int32 indices per
// token, the FP8 outputs. The layout moves where K/V land, not how many bytes.
struct RopeBenchBytes {
  double fused = 0;   // rope-fused, rope-quant: Q, K and (MHA) V in, their FP8 codes out
  double append = 0;  // rope-append: the FP8 K/V read and written, four indices per token
  double v = 0;       // V's share of `fused` (MHA; 0 for MLA), in and out: FlashInfer's rope_quantize_fp8 has no V
};
inline RopeBenchBytes rope_bench_bytes(const RopeShape& s) {
  const double in_bytes = static_cast<double>(bytes_of(s.input)), tokens = static_cast<double>(s.tokens);
  const double q_elems = tokens * s.q_heads * s.head_dim, v_elems = s.mla() ? 0.0 : tokens * s.kv_heads * s.head_dim;
  const double kv_elems = s.mla() ? tokens * s.head_dim : 2 * v_elems;  // K (MLA: ckv + kpe) and V
  RopeBenchBytes b;
  b.fused = (q_elems + kv_elems) * in_bytes + tokens * (s.rope_dim * 4 + 16) + q_elems + kv_elems;
  b.append = 2 * kv_elems + tokens * 16;
  b.v = v_elems * (in_bytes + 1);
  return b;
}

// Rows rope-fused, rope-quant (NHD only: its output is contiguous, the same for HND), rope-append and
// rope-pair for every shape of rope_bench_shapes(dtype, tokens); success or an error (kernels/status.hpp).
Status run_rope_benchmarks(DType dtype, std::int64_t tokens, int repeats, std::vector<BenchRow>* rows_out);

}  // namespace kvq::kernels
