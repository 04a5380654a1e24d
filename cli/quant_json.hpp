// quant.json, the description kvq quant writes beside codes.npy and scales.npy and kvq dequant
// reads back (docs/cli.md): recipe, shape, block and the tensor scale's FP32 bits.
#pragma once

#include <cstdint>
#include <string>

namespace kvq::cli {

struct QuantJson {
  std::string recipe;
  std::int64_t rows = 0, cols = 0;
  int block = 0;
  std::uint32_t tensor_scale_bits = 0;
};

// Reads quant.json's text (untrusted): "" and *out, or a message naming `path` and the member.
std::string read_quant_json(const std::string& text, const std::string& path, QuantJson* out);

// A finite or non-finite FP32 as a JSON value: a number, or the string "inf", "-inf" or "nan" (JSON
// has no non-finite numbers; the bits beside it are what dequant reads).
std::string json_float(float v);

}  // namespace kvq::cli
