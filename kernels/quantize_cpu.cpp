#include <limits>
#include <sstream>

#include "kernels/cpu_rows.hpp"
#include "kernels/lane_quantize.hpp"
#include "kernels/quantize.hpp"

namespace kvq::kernels {

const char* name_of(DType d) { return d == DType::fp32 ? "fp32" : (d == DType::bf16 ? "bf16" : "fp16"); }

Status validate(const QuantizeShape& s) {
  std::ostringstream os;
  const int block = s.block();
  const FormatId e = s.recipe.element;
  if (e != FormatId::e2m1 && e != FormatId::e4m3fn && e != FormatId::int4 && e != FormatId::int8) {
    os << "recipe element must be e2m1, e4m3fn, int4 or int8, got " << static_cast<int>(e);
  } else if (s.rows < 0) {
    os << "rows must be >= 0, got " << s.rows;
  } else if (s.cols <= 0) {
    os << "cols (head_dim) must be > 0, got " << s.cols;
  } else if (block <= 0 || block > kMaxBlock || (s.packed() && block % 2)) {
    os << "block must be in 1.." << kMaxBlock << (s.packed() ? " and even" : "") << ", got " << block;
  } else if (s.cols % block != 0) {
    os << "cols (head_dim) = " << s.cols << " is not a multiple of the block size " << block;
  } else if (s.rows > std::numeric_limits<std::int64_t>::max() / 4 / s.cols) {  // FP32 bytes of the tensor
    os << "rows x cols = " << s.rows << " x " << s.cols << " is too large (its FP32 bytes overflow 64 bits)";
  }
  return os.str();
}

Status quantize_cpu(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                    std::uint8_t* scales) {
  if (auto e = validate(s); !e.ok()) return e;
  if (lane_split(s, input)) return quantize_lanes_cpu(s, input, x, g, codes, scales);  // as device::quantize
  const std::int64_t elements = s.rows * s.cols;
  if (s.recipe.scale == BlockScale::tensor_only && !s.packed()) {  // spans of four (engine variants too)
    const BlockPlan p = plan_block(s.recipe, g, 0.0f, false);
    for_ranges(elements / 4, elements, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t k = first; k < last; ++k) quantize_tensor_span<4>(s.recipe, p, input, x, 4 * k, codes);
    });
    return {};
  }
  const CodeTable table = code_table(s.recipe, g);  // as the kernels: g's terms once
  const GlobalTerms t = global_terms(g, table.at);
  for_ranges(s.rows, elements, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t row = first; row < last; ++row)
      for (std::int64_t b = 0; b < s.cols / s.block(); ++b) {
        // The kernels' fixed block sizes run the fixed-size code (quantize_block_packed for 4-bit).
        if (s.block() == 16) {
          quantize_one_block<16>(s, input, x, t, codes, scales, row, b);
        } else if (s.block() == 32) {
          quantize_one_block<32>(s, input, x, t, codes, scales, row, b);
        } else {
          quantize_one_block(s, input, x, t, codes, scales, row, b);
        }
      }
  });
  return {};
}

Status dequantize_cpu(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                      DType output, void* y) {
  if (auto e = validate(s); !e.ok()) return e;
  for_ranges(s.rows, s.rows * s.cols, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t row = first; row < last; ++row)
      for (std::int64_t b = 0; b < s.cols / s.block(); ++b) dequantize_one_block(s, codes, scales, g, output, y, row, b);
  });
  return {};
}

Status requantize_e4m3_cpu(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales,
                           float factor, std::uint8_t* out) {
  if (auto e = validate(s); !e.ok()) return e;
  if (factor != factor) return "factor (workspace scale) must not be NaN";
  for_ranges(s.rows, s.rows * s.cols, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t row = first; row < last; ++row)
      for (std::int64_t b = 0; b < s.cols / s.block(); ++b) requantize_one_block(s, codes, scales, factor, out, row, b);
  });
  return {};
}

float amax_cpu(DType input, const void* x, std::int64_t count) {
  const auto range_max = [&](std::int64_t first, std::int64_t last) {
    float m = 0.0f;
    for (std::int64_t i = first; i < last; ++i) {
      const float a = float_from_bits(bits_of(load_value(input, x, i)) & 0x7fffffffu);
      m = a > m ? a : m;
    }
    return m;
  };
  if (count < kCpuParallelElements) return range_max(0, count);
  constexpr std::int64_t kParts = 64;  // the maxima of 64 ranges, then theirs: the same max
  float parts[kParts] = {};
  for_ranges(kParts, count, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t k = first; k < last; ++k) parts[k] = range_max(count * k / kParts, count * (k + 1) / kParts);
  });
  float m = 0.0f;
  for (const float part : parts) m = part > m ? part : m;
  return m;
}

}  // namespace kvq::kernels
