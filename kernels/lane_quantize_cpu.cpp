// The CPU twin of the lane-split quantize kernel (kernels/lane_quantize.hpp): the lanes of a block
// in a loop, then the same plan and span encoding.
#include "kernels/lane_quantize.hpp"

namespace kvq::kernels {

std::string quantize_lanes_cpu(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                               std::uint8_t* scales) {
  if (auto e = validate(s); !e.empty()) return e;
  if (!lane_split(s)) return "recipe: the lane-split quantizer takes E4M3 elements with E8M0 blocks of 128";
  constexpr int kLanes = 128 / kLaneSpan;
  for (std::int64_t b = 0; b < s.rows * (s.cols / 128); ++b) {  // dense rows: block b of row 0
    float v[kLanes][kLaneSpan];
    SpanMax m;
    for (int lane = 0; lane < kLanes; ++lane) {
      io::load_values(input, x, 128 * b + kLaneSpan * lane, kLaneSpan, v[lane]);
      m = combine(m, span_max(v[lane]));
    }
    const BlockPlan p = plan_block(s.recipe, g, m.max, m.nan);
    scales[b] = p.scale_code;
    for (int lane = 0; lane < kLanes; ++lane) {
      std::uint32_t words[kLaneSpan / 4];
      encode_span(s.recipe, p, v[lane], words);
      io::store_words(codes + 128 * b + kLaneSpan * lane, words, kLaneSpan / 4);
    }
  }
  return {};
}

}  // namespace kvq::kernels
