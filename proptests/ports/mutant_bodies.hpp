// The per-element code of the mutants whose bug is not a Recipe field (a decode step, a
// workspace rounding), host and device: the CPU twin (mutants.cpp) and the device variant
// (mutants_device.cu) run the same lines, as kvq's own kernels and twins do.
#pragma once

#include <cstdint>

#include "kernels/quantize.hpp"

namespace kvq::ports {

enum class DecodeBug : std::uint8_t {
  none,
  ignores_block_scale,  // value = element * g: the block scale dropped on the decode path
  nan_as_number,        // the E4M3 NaN code 0x7F/0xFF read as +-480 (the "next" binade's value)
};

// What a mutant's kernels do besides running a (changed) Recipe.
struct MutantBugs {
  float dequantize_g_factor = 1.0f;     // its dequantize multiplies the given g by this (factor-6 mismatch)
  bool swap_nibbles = false;            // element 2i packed in the high nibble
  DecodeBug decode = DecodeBug::none;
  WorkspaceRounding workspace{};         // the E4M3 workspace's rounding (formats/recipes.hpp), if not kvq's
};

// 0x7F / 0xFF as the 480 an unchecked exponent-and-mantissa decode gives.
KVQ_HD inline float e4m3_value_nan_as_number(std::uint8_t code) {
  if ((code & 0x7F) == 0x7F) return (code & 0x80) ? -480.0f : 480.0f;
  return e4m3_value_fast(code);
}

// One dequantized value under a decode bug (b.decode != none).
KVQ_HD inline float mutant_value(const Recipe& r, const MutantBugs& b, float g, std::uint8_t scale, std::uint8_t code) {
  if (b.decode == DecodeBug::ignores_block_scale) return element_value(r, code) * g;
  const float element = r.element == FormatId::e4m3fn ? e4m3_value_nan_as_number(code) : element_value(r, code);
  if (r.scale == BlockScale::e4m3_two_level) return (element * e4m3_value_nan_as_number(scale)) * g;
  if (r.scale == BlockScale::tensor_only) return element * g;
  return scale == 0xFF ? float_from_bits(kCanonicalNanBits) : element * pow2_float(static_cast<int>(scale) - 127);
}


KVQ_HD inline std::uint8_t swapped_nibbles(std::uint8_t b) { return static_cast<std::uint8_t>(b << 4 | b >> 4); }

// Element k of a [rows, cols] tensor: its code and its block's scale code.
KVQ_HD inline void code_and_scale(const kernels::QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales,
                                  std::int64_t k, std::uint8_t* code, std::uint8_t* scale) {
  const std::int64_t row = k / s.cols, j = k % s.cols;
  *code = kernels::code_at(s, codes + row * s.code_bytes_per_row(), j);
  *scale = s.scales_per_row() ? scales[row * s.scales_per_row() + j / s.block()] : 0;
}

// Device variants (mutants_device.cu; a stub without CUDA). Device pointers; success or an error (kernels/status.hpp).
namespace device {
Status swap_nibbles(std::uint8_t* codes, std::int64_t bytes, void* stream);
Status dequantize(const kernels::QuantizeShape& s, const MutantBugs& b, const std::uint8_t* codes,
                  const std::uint8_t* scales, float g, kernels::DType output, void* y, void* stream);
Status requantize_e4m3(const kernels::QuantizeShape& s, WorkspaceRounding w, const std::uint8_t* codes,
                       const std::uint8_t* scales, float factor, std::uint8_t* out, void* stream);
}  // namespace device

}  // namespace kvq::ports
