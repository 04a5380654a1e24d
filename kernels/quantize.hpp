// Quantize / dequantize of a [rows, cols] tensor under a recipe: layout, validation,
// the CPU twin, and the GPU entry points (quantize_device.cu, or a stub without CUDA).
//
// Layout (row-major, no padding):
// - input x: rows * cols values of `input` type (FP32, or BF16/FP16 bit patterns).
// - codes: E2M1 packed two per byte (element 2i in the low nibble), cols/2 bytes a row;
//   E4M3 one byte each, cols bytes a row.
// - scales: one byte per block, cols/block a row (E4M3 or E8M0); none for per-tensor recipes.
// - g: the FP32 tensor scale tensor_scale(recipe, amax), an input (amax_* compute amax).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#include "formats/packing.hpp"
#include "formats/recipes.hpp"

namespace kvq::kernels {

enum class DType : std::uint8_t { fp32, bf16, fp16 };
const char* name_of(DType d);
int bytes_of(DType d);

inline constexpr int kMaxBlock = 64;       // kernels keep one block in registers
inline constexpr int kTensorChunk = 16;    // per-tensor recipes work in chunks of 16

struct QuantizeShape {
  Recipe recipe;
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  KVQ_HD int block() const { return recipe.scale == BlockScale::tensor_only ? kTensorChunk : recipe.block; }
  KVQ_HD bool packed() const { return recipe.element == FormatId::e2m1; }
  KVQ_HD std::int64_t code_bytes_per_row() const { return packed() ? cols / 2 : cols; }
  KVQ_HD std::int64_t scales_per_row() const { return recipe.scale == BlockScale::tensor_only ? 0 : cols / block(); }
  KVQ_HD std::int64_t code_bytes() const { return rows * code_bytes_per_row(); }
  KVQ_HD std::int64_t scale_bytes() const { return rows * scales_per_row(); }
};

// "" when the shape is valid; otherwise a message naming the argument.
std::string validate(const QuantizeShape& s);

// CPU twins: the same element code as the kernels (formats/recipes.hpp). Return "" or an error.
std::string quantize_cpu(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                         std::uint8_t* scales);
std::string dequantize_cpu(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                           DType output, void* y);
float amax_cpu(DType input, const void* x, std::int64_t count);  // max |x|, NaN ignored (fmaxf)

// One input or output value <-> FP32 (exact widening; narrowing rounds to nearest even).
// Fast paths, held to the oracle over all 2^16 patterns (suite kernels): BF16 is the top half
// of an FP32 (NaN payloads kept as they are); FP16 through the hardware's exact conversion.
KVQ_HD inline float load_value(DType t, const void* p, std::int64_t i) {
  switch (t) {
    case DType::fp32: return static_cast<const float*>(p)[i];
    case DType::bf16: return float_from_bits(static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(p)[i]) << 16);
    case DType::fp16:
#if defined(__CUDA_ARCH__)
      return __half2float(__ushort_as_half(static_cast<const std::uint16_t*>(p)[i]));
#else
      return decode_float(kFP16, static_cast<const std::uint16_t*>(p)[i]);
#endif
  }
  return 0.0f;
}
KVQ_HD inline void store_value(DType t, void* p, std::int64_t i, float v) {
  switch (t) {
    case DType::fp32: static_cast<float*>(p)[i] = v; return;
    case DType::bf16: static_cast<std::uint16_t*>(p)[i] = static_cast<std::uint16_t>(encode_float(kBF16, Conversion{}, v)); return;
    case DType::fp16: static_cast<std::uint16_t*>(p)[i] = static_cast<std::uint16_t>(encode_float(kFP16, Conversion{}, v)); return;
  }
}

// The element code of column j in a row of codes.
KVQ_HD inline std::uint8_t code_at(const QuantizeShape& s, const std::uint8_t* row, std::int64_t j) {
  return s.packed() ? ((j & 1) ? row[j / 2] >> 4 : row[j / 2] & 0xF) : row[j];
}

// One block (row, b) of the tensor: load, quantize, store its scale, pack its codes.
// The whole per-block work of both the CPU twin and the kernel.
KVQ_HD inline void quantize_one_block(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                                      std::uint8_t* scales, std::int64_t row, std::int64_t b) {
  const int n = s.block();
  float values[kMaxBlock];
  std::uint8_t block_codes[kMaxBlock];
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

// One element (row, j): its code and block scale to a value of the output type.
KVQ_HD inline void dequantize_one_element(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales,
                                          float g, DType output, void* y, std::int64_t row, std::int64_t j) {
  const std::uint8_t scale = s.scales_per_row() ? scales[row * s.scales_per_row() + j / s.block()] : 0;
  const std::uint8_t code = code_at(s, codes + row * s.code_bytes_per_row(), j);
  store_value(output, y, row * s.cols + j, dequantize_element(s.recipe, g, scale, code));
}

// GPU: device pointers, an opaque cudaStream_t; returns "" or the CUDA error / validation message.
namespace device {
bool available(std::string* why);
std::string quantize(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                     std::uint8_t* scales, void* stream);
std::string dequantize(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                       DType output, void* y, void* stream);
std::string amax(DType input, const void* x, std::int64_t count, float* result, void* stream);  // result: device
// Memory, for host code that has no CUDA headers (tests, the CLI).
std::string allocate(void** p, std::size_t bytes);
void release(void* p);
std::string upload(void* device_dst, const void* host_src, std::size_t bytes);
std::string download(void* host_dst, const void* device_src, std::size_t bytes);
std::string fill(void* device_dst, std::uint8_t byte, std::size_t bytes);
std::string synchronize();
}  // namespace device

}  // namespace kvq::kernels
