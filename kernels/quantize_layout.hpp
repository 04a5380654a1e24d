// The layout of a quantized [rows, cols] tensor (kernels/quantize.hpp) and its validation.
//
// Layout (row-major, no padding):
// - input x: rows * cols values of `input` type (FP32, or BF16/FP16 bit patterns).
// - codes: E2M1 packed two per byte (element 2i in the low nibble), cols/2 bytes a row;
//   E4M3 one byte each, cols bytes a row.
// - scales: one byte per block, cols/block a row (E4M3 or E8M0); none for per-tensor recipes.
// - g: the FP32 tensor scale tensor_scale(recipe, amax), an input (amax_* compute amax).
#pragma once

#include <cstdint>

#include "formats/packing.hpp"
#include "formats/recipes.hpp"
#include "kernels/io.hpp"
#include "kernels/status.hpp"

namespace kvq::kernels {

inline constexpr int kMaxBlock = kMaxRecipeBlock;  // one block is one thread's work
inline constexpr int kTensorChunk = 16;    // per-tensor recipes work in chunks of 16

struct QuantizeShape {
  Recipe recipe;
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  KVQ_HD int block() const { return recipe.scale == BlockScale::tensor_only ? kTensorChunk : recipe.block; }
  KVQ_HD bool packed() const { return format_of(recipe.element).bits() == 4; }  // E2M1, INT4: two a byte
  KVQ_HD std::int64_t code_bytes_per_row() const { return packed() ? cols / 2 : cols; }
  KVQ_HD std::int64_t scales_per_row() const { return recipe.scale == BlockScale::tensor_only ? 0 : cols / block(); }
  KVQ_HD std::int64_t code_bytes() const { return rows * code_bytes_per_row(); }
  KVQ_HD std::int64_t scale_bytes() const { return rows * scales_per_row(); }
};

// Success when the shape is valid; otherwise a message naming the argument.
Status validate(const QuantizeShape& s);

// The element code of column j in a row of codes.
KVQ_HD inline std::uint8_t code_at(const QuantizeShape& s, const std::uint8_t* row, std::int64_t j) {
  return s.packed() ? ((j & 1) ? e2m1_odd(row[j / 2]) : e2m1_even(row[j / 2])) : row[j];
}

}  // namespace kvq::kernels
