// Where a port keeps its outputs (docs/ports.md "Layouts"): the nibble order of packed 4-bit codes
// and the place of each block scale. One source for the host comparison (oracle/verify.cpp) and
// the device comparator (kernels/port_compare.hpp).
#pragma once

#include <cstdint>

#include "formats/host_device.hpp"
#include "kernels/io.hpp"

namespace kvq::kernels {

enum class NibbleOrder : std::uint8_t { low_first, high_first };  // element 2i in the low (kvq) or high nibble
// Where the scale of (row, block) sits in a port's block scales.
enum class ScaleLayout : std::uint8_t {
  row_major,      // row * S + block (S = scales per row)
  token_group4,   // vLLM NVFP4 cache: (row/4)*4*S + 4*block + row%4 (rows a multiple of 4)
  swizzle_128x4,  // FlashInfer / cuBLAS GEMM-ready: rows padded to 128, scale columns to 4
};

// The bytes a scale layout occupies for rows x S scales; 0 when the layout does not apply to
// that shape.
KVQ_HD constexpr std::int64_t scale_layout_bytes(ScaleLayout l, std::int64_t rows, std::int64_t per_row) {
  switch (l) {
    case ScaleLayout::row_major: return rows * per_row;
    case ScaleLayout::token_group4: return rows % 4 == 0 ? rows * per_row : 0;
    case ScaleLayout::swizzle_128x4: return (rows + 127) / 128 * 128 * ((per_row + 3) / 4 * 4);
  }
  return 0;
}

// The index of the scale of (row, block) among rows x per_row scales in layout l.
KVQ_HD constexpr std::int64_t scale_index(ScaleLayout l, std::int64_t per_row, std::int64_t row, std::int64_t block) {
  switch (l) {
    case ScaleLayout::row_major: return row * per_row + block;
    case ScaleLayout::token_group4: return (row / 4) * 4 * per_row + 4 * block + row % 4;
    case ScaleLayout::swizzle_128x4: {
      const std::int64_t k_tiles = (per_row + 3) / 4;
      return (row / 128) * (k_tiles * 512) + (block / 4) * 512 + (row % 32) * 16 + ((row % 128) / 32) * 4 + block % 4;
    }
  }
  return 0;
}

// The element code of element i (row-major) in a port's code bytes: 4-bit codes packed two a byte
// in `order`, or one a byte (the low nibble of each byte for a 4-bit format).
KVQ_HD constexpr std::uint8_t port_element_code(const std::uint8_t* codes, bool four_bit, bool packed, NibbleOrder order,
                                                std::int64_t i) {
  if (!packed) return codes[i] & (four_bit ? 0x0F : 0xFF);
  const std::uint8_t byte = codes[i / 2];
  const bool high = (i & 1) != (order == NibbleOrder::high_first);
  return high ? byte >> 4 : byte & 0x0F;
}

// A port's dequantized values: the model's FP32 value of the port's code is rounded once (RNE) to
// the port's dtype, as kvq's own dequantize kernels write it (docs/ports.md), and the port's value
// (widened to FP32) matches it when the bits are equal or both are NaN.
KVQ_HD inline float in_port_dtype(DType t, float model) {
  std::uint32_t rounded = 0;
  store_value(t, &rounded, 0, model);
  return load_value(t, &rounded, 0);
}
KVQ_HD inline bool dequantized_matches(float port, float model_in_port_dtype) {
  return bits_of(port) == bits_of(model_in_port_dtype) || (port != port && model_in_port_dtype != model_in_port_dtype);
}

}  // namespace kvq::kernels
