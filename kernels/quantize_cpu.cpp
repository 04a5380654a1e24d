#include <sstream>

#include "kernels/quantize.hpp"

namespace kvq::kernels {

const char* name_of(DType d) { return d == DType::fp32 ? "fp32" : (d == DType::bf16 ? "bf16" : "fp16"); }
int bytes_of(DType d) { return d == DType::fp32 ? 4 : 2; }

std::string validate(const QuantizeShape& s) {
  std::ostringstream os;
  const int block = s.block();
  if (s.rows < 0) {
    os << "rows must be >= 0, got " << s.rows;
  } else if (s.cols <= 0) {
    os << "cols (head_dim) must be > 0, got " << s.cols;
  } else if (block <= 0 || block > kMaxBlock || (s.packed() && block % 2)) {
    os << "block must be in 1.." << kMaxBlock << (s.packed() ? " and even" : "") << ", got " << block;
  } else if (s.cols % block != 0) {
    os << "cols (head_dim) = " << s.cols << " is not a multiple of the block size " << block;
  }
  return os.str();
}

std::string quantize_cpu(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                         std::uint8_t* scales) {
  if (auto e = validate(s); !e.empty()) return e;
  const int n = s.block();
  float values[kMaxBlock];
  std::uint8_t block_codes[kMaxBlock];
  for (std::int64_t row = 0; row < s.rows; ++row) {
    for (std::int64_t b = 0; b < s.cols / n; ++b) {
      for (int i = 0; i < n; ++i) values[i] = load_value(input, x, row * s.cols + b * n + i);
      const std::uint8_t scale = quantize_block(s.recipe, g, values, n, block_codes);
      if (s.scales_per_row()) scales[row * s.scales_per_row() + b] = scale;
      std::uint8_t* out = codes + row * s.code_bytes_per_row();
      for (int i = 0; i < n; ++i) {
        const std::int64_t j = b * n + i;
        if (!s.packed()) {
          out[j] = block_codes[i];
        } else if (i % 2 == 1) {
          out[j / 2] = pack_e2m1_pair(block_codes[i - 1], block_codes[i]);
        }
      }
    }
  }
  return {};
}

std::string dequantize_cpu(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                           DType output, void* y) {
  if (auto e = validate(s); !e.empty()) return e;
  for (std::int64_t row = 0; row < s.rows; ++row) {
    for (std::int64_t j = 0; j < s.cols; ++j) {
      const std::uint8_t scale = s.scales_per_row() ? scales[row * s.scales_per_row() + j / s.block()] : 0;
      const std::uint8_t code = code_at(s, codes + row * s.code_bytes_per_row(), j);
      store_value(output, y, row * s.cols + j, dequantize_element(s.recipe, g, scale, code));
    }
  }
  return {};
}

float amax_cpu(DType input, const void* x, std::int64_t count) {
  float m = 0.0f;
  for (std::int64_t i = 0; i < count; ++i) {
    const float a = float_from_bits(bits_of(load_value(input, x, i)) & 0x7fffffffu);
    m = a > m ? a : m;
  }
  return m;
}

}  // namespace kvq::kernels
