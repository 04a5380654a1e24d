// The CPU twin of the lane-split quantize kernel (kernels/lane_quantize.hpp): the lanes of a block
// in a loop, then the same plan and span encoding.
#include "kernels/cpu_rows.hpp"
#include "kernels/lane_quantize.hpp"

namespace kvq::kernels {

Status quantize_lanes_cpu(const QuantizeShape& s, DType input, const void* x, float, std::uint8_t* codes,
                          std::uint8_t* scales) {
  if (auto e = validate_lane_split(s, input); !e.ok()) return e;
  const int lanes = lanes_of(s), words = span_words(s);
  constexpr int kMaxLanes = 128 / kLaneSpan;
  for_ranges(s.rows * (s.cols / s.block()), s.rows * s.cols, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t b = first; b < last; ++b) {  // dense rows: block b of row 0
      float v[kMaxLanes][kLaneSpan];
      SpanMax m;
      for (int lane = 0; lane < lanes; ++lane) {
        io::load_values(input, x, s.block() * b + kLaneSpan * lane, kLaneSpan, v[lane]);
        m = combine(m, span_max(v[lane]));
      }
      const BlockPlan p = lane_plan(s.recipe, m);
      scales[b] = p.scale_code;
      for (int lane = 0; lane < lanes; ++lane) {
        std::uint32_t span[kLaneSpan / 4];
        encode_span(s, p, m, v[lane], span);
        io::store_words(codes + 4 * words * (lanes * b + lane), span, words);
      }
    }
  });
  return {};
}

}  // namespace kvq::kernels
