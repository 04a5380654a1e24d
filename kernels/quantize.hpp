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
#include <cstdint>

#include "formats/fast_decode.hpp"
#include "formats/packed_quantize.hpp"
#include "formats/packing.hpp"
#include "formats/recipes.hpp"
#include "kernels/status.hpp"

namespace kvq::kernels {

enum class DType : std::uint8_t { fp32, bf16, fp16 };
const char* name_of(DType d);
KVQ_HD constexpr int bytes_of(DType d) { return d == DType::fp32 ? 4 : 2; }

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

// CPU twins: the same element code as the kernels (formats/recipes.hpp). Return success or an error (kernels/status.hpp).
Status quantize_cpu(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                    std::uint8_t* scales);
Status dequantize_cpu(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                      DType output, void* y);
float amax_cpu(DType input, const void* x, std::int64_t count);  // max |x|, NaN ignored (fmaxf)
// The prefill workspace: rows * cols E4M3 codes from quantized codes and scales (requantize_e4m3);
// factor = tensor decode scale (1 for power-of-two recipes) / workspace decode scale, in FP32.
Status requantize_e4m3_cpu(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales,
                           float factor, std::uint8_t* out);

// One input or output value <-> FP32 (exact widening; narrowing rounds to nearest even).
// Fast paths, held to the oracle over all 2^16 patterns (suite kernels): BF16 is the top half
// of an FP32 (NaN payloads kept as they are); FP16 through the hardware's exact conversion
// (fp16_value, formats/fast_paths.hpp).
KVQ_HD inline float load_value(DType t, const void* p, std::int64_t i) {
  switch (t) {
    case DType::fp32: return static_cast<const float*>(p)[i];
    case DType::bf16: return float_from_bits(static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(p)[i]) << 16);
    case DType::fp16: return fp16_value(static_cast<const std::uint16_t*>(p)[i]);
  }
  return 0.0f;
}
KVQ_HD inline void store_value(DType t, void* p, std::int64_t i, float v) {
  switch (t) {
    case DType::fp32: static_cast<float*>(p)[i] = v; return;
    case DType::bf16: static_cast<std::uint16_t*>(p)[i] = bf16_rne_fast(v); return;
    case DType::fp16: static_cast<std::uint16_t*>(p)[i] = fp16_rne_fast(v); return;
  }
}

// The element code of column j in a row of codes.
KVQ_HD inline std::uint8_t code_at(const QuantizeShape& s, const std::uint8_t* row, std::int64_t j) {
  return s.packed() ? ((j & 1) ? e2m1_odd(row[j / 2]) : e2m1_even(row[j / 2])) : row[j];
}

// Memory access for one block: 16-byte vector loads and stores on the device where the span is
// aligned and a whole number of vectors, element by element otherwise (and on the host).
namespace io {

// Asks for the cache line holding p ahead of its load (device: prefetch.global.L1; host: nothing).
KVQ_HD inline void prefetch(const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

// Whether p is a multiple of bytes (a power of two).
KVQ_HD inline bool aligned(const void* p, int bytes) { return (reinterpret_cast<std::uintptr_t>(p) & (bytes - 1)) == 0; }

#if defined(__CUDACC__)
// A 16-byte vector's four words, in order.
__device__ inline void split_words(const uint4& w, std::uint32_t* out) {
  out[0] = w.x, out[1] = w.y, out[2] = w.z, out[3] = w.w;
}
#endif

#if defined(__CUDA_ARCH__)
__device__ inline std::uint32_t word(const std::uint8_t* b) {
  return b[0] | (std::uint32_t{b[1]} << 8) | (std::uint32_t{b[2]} << 16) | (std::uint32_t{b[3]} << 24);
}
__device__ inline void unpack_word(DType t, std::uint32_t w, float* out) {  // 1 FP32 or 2 halves
  if (t == DType::fp32) {
    out[0] = __uint_as_float(w);
  } else if (t == DType::bf16) {
    out[0] = __uint_as_float(w << 16);
    out[1] = __uint_as_float(w & 0xffff0000u);
  } else {
    out[0] = __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
    out[1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
  }
}
template <bool kFinite = false>  // kFinite: no value is NaN (the paired conversions need no NaN test)
__device__ inline std::uint32_t pack_word(DType t, const float* v) {
  if (t == DType::fp32) return __float_as_uint(v[0]);
  if (kFinite) return t == DType::bf16 ? bf16x2_rne_finite(v[0], v[1]) : fp16x2_rne_finite(v[0], v[1]);
  if (t == DType::bf16) return bf16_rne_fast(v[0]) | (std::uint32_t{bf16_rne_fast(v[1])} << 16);
  return fp16_rne_fast(v[0]) | (std::uint32_t{fp16_rne_fast(v[1])} << 16);
}
#endif

// kStreamed (the default): the device's streaming loads and stores (ld.global.cs, st.global.cs:
// read or written once); else the default cache policy.
template <bool kStreamed = true>
KVQ_HD inline void load_values(DType t, const void* x, std::int64_t first, int n, float* out) {
#if defined(__CUDA_ARCH__)
  const int bytes = bytes_of(t), per_word = 4 / bytes;
  const auto* base = static_cast<const unsigned char*>(x) + first * bytes;
  if (aligned(base, 16) && (n * bytes) % 16 == 0) {
    KVQ_UNROLL
    for (int v = 0; v < n * bytes / 16; ++v) {
      const uint4* p = reinterpret_cast<const uint4*>(base) + v;
      const uint4 w = kStreamed ? __ldcs(p) : *p;
      unpack_word(t, w.x, out + (4 * v + 0) * per_word);
      unpack_word(t, w.y, out + (4 * v + 1) * per_word);
      unpack_word(t, w.z, out + (4 * v + 2) * per_word);
      unpack_word(t, w.w, out + (4 * v + 3) * per_word);
    }
    return;
  }
#endif
  KVQ_UNROLL
  for (int i = 0; i < n; ++i) out[i] = load_value(t, x, first + i);
}

// kN 16-bit values (BF16 or FP16; kN a multiple of 8) as their kN/2 pair words (element 2i in
// the low half; the packed quantizer's BF16 form): 16-byte loads where aligned (kAligned: the
// caller knows it is), streamed (read once: evict first) or, !kStreamed, cached in L1 (where the
// caller prefetched the line there).
template <int kN, bool kAligned = false, bool kStreamed = true>
KVQ_HD inline void load_pair_words(const void* x, std::int64_t first, std::uint32_t* pairs) {
  const auto* h = static_cast<const std::uint16_t*>(x) + first;
#if defined(__CUDA_ARCH__)
  if (kAligned || aligned(h, 16)) {
    KVQ_UNROLL
    for (int v = 0; v < kN / 8; ++v) {
      const uint4* p = reinterpret_cast<const uint4*>(h) + v;
      split_words(kStreamed ? __ldcs(p) : __ldca(p), pairs + 4 * v);
    }
  } else
#endif
  {
    KVQ_UNROLL
    for (int i = 0; i < kN / 2; ++i) pairs[i] = h[2 * i] | (std::uint32_t{h[2 * i + 1]} << 16);
  }
}
// The FP32 values of kN 16-bit values of type t (BF16 or FP16) from their pair words (exact).
template <int kN>
KVQ_HD inline void unpack_pair_words(DType t, const std::uint32_t* pairs, float* out) {
  KVQ_UNROLL
  for (int i = 0; i < kN / 2; ++i) {
    if (t == DType::bf16) {
      out[2 * i] = float_from_bits(pairs[i] << 16);
      out[2 * i + 1] = float_from_bits(pairs[i] & 0xffff0000u);
    } else {
      out[2 * i] = fp16_value(static_cast<std::uint16_t>(pairs[i]));
      out[2 * i + 1] = fp16_value(static_cast<std::uint16_t>(pairs[i] >> 16));
    }
  }
}

template <bool kFinite = false>  // kFinite: no value is NaN (the same bits, fewer instructions)
KVQ_HD inline void store_values(DType t, void* y, std::int64_t first, int n, const float* v) {
#if defined(__CUDA_ARCH__)
  const int bytes = bytes_of(t), per_word = 4 / bytes;
  auto* base = static_cast<unsigned char*>(y) + first * bytes;
  if (aligned(base, 16) && (n * bytes) % 16 == 0) {
    KVQ_UNROLL
    for (int k = 0; k < n * bytes / 16; ++k) {
      const uint4 w{pack_word<kFinite>(t, v + (4 * k + 0) * per_word), pack_word<kFinite>(t, v + (4 * k + 1) * per_word),
                    pack_word<kFinite>(t, v + (4 * k + 2) * per_word), pack_word<kFinite>(t, v + (4 * k + 3) * per_word)};
      __stcs(reinterpret_cast<uint4*>(base) + k, w);
    }
    return;
  }
#endif
  KVQ_UNROLL
  for (int i = 0; i < n; ++i) store_value(t, y, first + i, v[i]);
}

KVQ_HD inline void load_bytes(const std::uint8_t* src, int count, std::uint8_t* out) {
#if defined(__CUDA_ARCH__)
  if (count == 4 && aligned(src, 4)) {
    const std::uint32_t w = __ldcs(reinterpret_cast<const unsigned int*>(src));
    KVQ_UNROLL
    for (int i = 0; i < 4; ++i) out[i] = static_cast<std::uint8_t>(w >> (8 * i));
    return;
  }
  if (aligned(src, 8) && count % 8 == 0) {
    KVQ_UNROLL
    for (int k = 0; k < count / 8; ++k) {
      const uint2 w = __ldcs(reinterpret_cast<const uint2*>(src) + k);
      KVQ_UNROLL
      for (int i = 0; i < 4; ++i) out[8 * k + i] = static_cast<std::uint8_t>(w.x >> (8 * i));
      KVQ_UNROLL
      for (int i = 0; i < 4; ++i) out[8 * k + 4 + i] = static_cast<std::uint8_t>(w.y >> (8 * i));
    }
    return;
  }
#endif
  KVQ_UNROLL
  for (int i = 0; i < count; ++i) out[i] = src[i];
}

// Four code bytes as a little-endian word (the first byte lowest).
KVQ_HD inline std::uint32_t load_word(const std::uint8_t* src) {
#if defined(__CUDA_ARCH__)
  if (aligned(src, 4)) return __ldcs(reinterpret_cast<const unsigned int*>(src));
#endif
  return src[0] | (std::uint32_t{src[1]} << 8) | (std::uint32_t{src[2]} << 16) | (std::uint32_t{src[3]} << 24);
}

// Two code bytes as a little-endian word's low half (one 2-byte load where aligned).
KVQ_HD inline std::uint32_t load_half_word(const std::uint8_t* src) {
#if defined(__CUDA_ARCH__)
  if (aligned(src, 2)) return __ldcs(reinterpret_cast<const unsigned short*>(src));
#endif
  return src[0] | (std::uint32_t{src[1]} << 8);
}

// Sixteen code bytes as four little-endian words (one 16-byte load where aligned).
KVQ_HD inline void load_four_words(const std::uint8_t* src, std::uint32_t* w) {
#if defined(__CUDA_ARCH__)
  if (aligned(src, 16)) {
    const uint4 v = __ldcs(reinterpret_cast<const uint4*>(src));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    return;
  }
#endif
  KVQ_UNROLL
  for (int i = 0; i < 4; ++i) w[i] = load_word(src + 4 * i);
}

// Eight code bytes as two little-endian words (one 8-byte load where aligned).
KVQ_HD inline void load_word_pair(const std::uint8_t* src, std::uint32_t* w) {
#if defined(__CUDA_ARCH__)
  if (aligned(src, 8)) {
    const uint2 v = __ldcs(reinterpret_cast<const uint2*>(src));
    w[0] = v.x, w[1] = v.y;
    return;
  }
#endif
  w[0] = load_word(src), w[1] = load_word(src + 4);
}

// Two little-endian words to eight bytes (one 8-byte store where aligned).
KVQ_HD inline void store_word_pair(std::uint8_t* dst, const std::uint32_t* w) {
#if defined(__CUDA_ARCH__)
  if (aligned(dst, 8)) {
    __stcs(reinterpret_cast<uint2*>(dst), uint2{w[0], w[1]});
    return;
  }
#endif
  KVQ_UNROLL
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<std::uint8_t>(w[i / 4] >> (8 * (i % 4)));
}

KVQ_HD inline void store_bytes(std::uint8_t* dst, const std::uint8_t* bytes, int count) {
#if defined(__CUDA_ARCH__)
  if (aligned(dst, 16) && count % 16 == 0) {
    KVQ_UNROLL
    for (int k = 0; k < count / 16; ++k) {
      const std::uint8_t* b = bytes + 16 * k;
      __stcs(reinterpret_cast<uint4*>(dst) + k, uint4{word(b), word(b + 4), word(b + 8), word(b + 12)});
    }
    return;
  }
  if (aligned(dst, 8) && count % 8 == 0) {
    KVQ_UNROLL
    for (int k = 0; k < count / 8; ++k)
      __stcs(reinterpret_cast<uint2*>(dst) + k, uint2{word(bytes + 8 * k), word(bytes + 8 * k + 4)});
    return;
  }
#endif
  KVQ_UNROLL
  for (int i = 0; i < count; ++i) dst[i] = bytes[i];
}

// Words whose little-endian bytes are the bytes to store (packed 4-bit codes); kStreamed as
// load_values; kAlign: an alignment of dst the caller knows (no test up to it).
template <bool kStreamed = true, int kAlign = 1>
KVQ_HD inline void store_words(std::uint8_t* dst, const std::uint32_t* words, int count) {
#if defined(__CUDA_ARCH__)
  const auto put = [](auto* p, auto v) {
    if constexpr (kStreamed) {
      __stcs(p, v);
    } else {
      *p = v;
    }
  };
  if ((kAlign >= 16 || aligned(dst, 16)) && count % 4 == 0) {
    KVQ_UNROLL
    for (int k = 0; k < count / 4; ++k)
      put(reinterpret_cast<uint4*>(dst) + k, uint4{words[4 * k], words[4 * k + 1], words[4 * k + 2], words[4 * k + 3]});
    return;
  }
  if ((kAlign >= 8 || aligned(dst, 8)) && count % 2 == 0) {
    KVQ_UNROLL
    for (int k = 0; k < count / 2; ++k) put(reinterpret_cast<uint2*>(dst) + k, uint2{words[2 * k], words[2 * k + 1]});
    return;
  }
  if (aligned(dst, 4)) {
    KVQ_UNROLL
    for (int k = 0; k < count; ++k) put(reinterpret_cast<unsigned int*>(dst) + k, words[k]);
    return;
  }
#endif
  KVQ_UNROLL
  for (int i = 0; i < 4 * count; ++i) dst[i] = static_cast<std::uint8_t>(words[i / 4] >> (8 * (i % 4)));
}

}  // namespace io

// The packed block (row, b) of a 4-bit recipe with block kN from its 16-bit values' pair words
// (as loaded: io::load_pair_words), input BF16 or FP16: quantize (quantize_block_packed's 16-bit
// form: the block max and signs from the words), store its codes and scale. quantize_one_block's
// 16-bit path; the kernels may load the words ahead (a pipelined loop).
template <int kN>
KVQ_HD KVQ_KERNEL_INLINE void quantize_pair_words(const QuantizeShape& s, DType input, const GlobalTerms& t,
                                                   const std::uint32_t* pairs, std::uint8_t* codes, std::uint8_t* scales,
                                                   std::int64_t row, std::int64_t b) {
  float values[kN];
  io::unpack_pair_words<kN>(input, pairs, values);
  std::uint32_t words[kN / 8];
  const std::uint8_t scale = input == DType::bf16
                                 ? quantize_block_packed<kN, PairWords::bf16>(s.recipe, t, values, words, pairs)
                                 : quantize_block_packed<kN, PairWords::fp16>(s.recipe, t, values, words, pairs);
  io::store_words(codes + row * s.code_bytes_per_row() + b * (kN / 2), words, kN / 8);
  if (s.scales_per_row()) scales[row * s.scales_per_row() + b] = scale;
}

// kN scaled values q of an 8-bit recipe to their codes, four a little-endian word: E4M3 half to
// even four at a time (e4m3x4_satfinite_fast, what encode_element does), else encode_element.
template <int kN>
KVQ_HD inline void encode_byte_words(const Recipe& r, const float* q, std::uint32_t* words) {
  static_assert(kN % 4 == 0);
  if (r.element == FormatId::e4m3fn && r.element_rounding == Rounding::nearest_even && !r.element_input_bf16 &&
      r.element_cast == ElementCast::satfinite) {
    KVQ_UNROLL
    for (int w = 0; w < kN / 4; ++w) words[w] = e4m3x4_satfinite_fast(q + 4 * w);
    return;
  }
  KVQ_UNROLL
  for (int w = 0; w < kN / 4; ++w) {
    words[w] = 0;
    KVQ_UNROLL
    for (int i = 0; i < 4; ++i) words[w] |= std::uint32_t{encode_element(r, q[4 * w + i])} << (8 * i);
  }
}

// Per-tensor recipes (8-bit codes, no block scales) in spans of kSpan elements: the kernels take
// 16 bytes of input a thread (kTensorSpanOf: 8 BF16/FP16 values, 4 FP32), so a warp's loads and
// stores are contiguous (a thread per chunk of 16 BF16 loaded 32 bytes at a 32-byte lane stride).
// The elements of quantize_block's per-tensor case: plan_block's rule for g (x / g, x * (1/g), or
// x * 0 where g = 0), then encode_byte_words; elements [first, first + kSpan) of the row-major
// tensor.
// kStreamed: the memory access policy (io::load_values); the kernel streams dividing spans only:
// each policy is the faster for its op (docs/performance.md).
KVQ_HD constexpr int kTensorSpanOf(DType input) { return input == DType::fp32 ? 4 : 8; }
template <int kSpan, bool kStreamed = true>
KVQ_HD inline void quantize_tensor_span(const Recipe& r, const BlockPlan& p, DType input, const void* x,
                                        std::int64_t first, std::uint8_t* codes) {
  static_assert(kSpan % 4 == 0);
  float q[kSpan];
  io::load_values<kStreamed>(input, x, first, kSpan, q);
  KVQ_UNROLL
  for (int i = 0; i < kSpan; ++i) q[i] = p.op == ElementOp::divide ? q[i] / p.by : q[i] * p.by;
  std::uint32_t words[kSpan / 4];
  encode_byte_words<kSpan>(r, q, words);
  io::store_words<kStreamed>(codes + first, words, kSpan / 4);
}

// One block (row, b) of the tensor: load, quantize, store its scale, pack its codes. The whole
// per-block work of both the CPU twin and the kernel; kN > 0 fixes the block size at compile time,
// and then 4-bit blocks run quantize_block_packed (formats/packed_quantize.hpp: the same codes).
// kMayPack = false: the caller knows the elements are 8-bit (keeps the packed path out of the code).
// t: global_terms(g, table), computed once for all blocks (the kernels: the table in shared memory).
template <int kN = 0, bool kMayPack = true>
KVQ_HD KVQ_KERNEL_INLINE void quantize_one_block(const QuantizeShape& s, DType input, const void* x, const GlobalTerms& t,
                                      std::uint8_t* codes, std::uint8_t* scales, std::int64_t row, std::int64_t b) {
  const float g = t.g;
  constexpr int kCap = kN > 0 ? kN : kMaxBlock;
  const int n = kN > 0 ? kN : s.block();
  float values[kCap];
  const bool packed = s.packed();
  std::uint8_t* code_dst = codes + row * s.code_bytes_per_row() + b * (packed ? n / 2 : n);
  std::uint8_t scale = 0;
  if constexpr (kMayPack && kN > 0 && kN % 8 == 0) {
    if (packed) {
      if (input != DType::fp32) {  // 16-bit input: its pair words (BF16: the packed quantizer's BF16 form)
        std::uint32_t pairs[kN / 2];
        io::load_pair_words<kN>(x, row * s.cols + b * n, pairs);
        quantize_pair_words<kN>(s, input, t, pairs, codes, scales, row, b);
        return;
      }
      std::uint32_t words[kN / 8];
      io::load_values(input, x, row * s.cols + b * n, n, values);
      scale = quantize_block_packed<kN>(s.recipe, t, values, words);
      io::store_words(code_dst, words, kN / 8);
      if (s.scales_per_row()) scales[row * s.scales_per_row() + b] = scale;
      return;
    }
  }
  io::load_values(input, x, row * s.cols + b * n, n, values);
  std::uint8_t block_codes[kCap];
  scale = quantize_block(s.recipe, g, values, n, block_codes);
  if (s.scales_per_row()) scales[row * s.scales_per_row() + b] = scale;
  if (packed)
    KVQ_UNROLL
    for (int i = 0; i < n / 2; ++i) block_codes[i] = pack_e2m1_pair(block_codes[2 * i], block_codes[2 * i + 1]);
  io::store_bytes(code_dst, block_codes, packed ? n / 2 : n);
}

// The codes of elements [first, first + n) of block (row, b), one a byte (4-bit codes unpacked;
// first even), and the block's scale code (0 per tensor).
template <int kCap>
KVQ_HD inline std::uint8_t load_span_codes(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales,
                                           int first, int n, std::int64_t row, std::int64_t b, std::uint8_t* out) {
  const bool packed = s.packed();
  const std::int64_t element = b * s.block() + first;
  std::uint8_t raw[kCap];
  io::load_bytes(codes + row * s.code_bytes_per_row() + (packed ? element / 2 : element), packed ? n / 2 : n, raw);
  KVQ_UNROLL
  for (int i = 0; i < n; ++i) out[i] = packed ? ((i & 1) ? e2m1_odd(raw[i / 2]) : e2m1_even(raw[i / 2])) : raw[i];
  return s.scales_per_row() ? scales[row * s.scales_per_row() + b] : 0;
}
template <int kCap>
KVQ_HD inline std::uint8_t load_block_codes(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales,
                                            int n, std::int64_t row, std::int64_t b, std::uint8_t* out) {
  return load_span_codes<kCap>(s, codes, scales, 0, n, row, b, out);
}

// kCodes (8 or 4) 4-bit codes (E2M1, INT4: nibble i of `codes` is element element + i) of a
// block with scale code `scale` (0 without block scales), to elements [element, element + kCodes)
// of y: the lean decode of formats/fast_decode.hpp where no NaN can arise (nibble_scaling), else
// the general element code. The codes are loaded by the caller, so their load and the scale's
// overlap.
template <int kCodes>
KVQ_HD inline void dequantize_nibbles(const Recipe& r, std::uint32_t codes, std::uint8_t scale, float g, DType output,
                                      void* y, std::int64_t element) {
  static_assert(kCodes == 8 || kCodes == 4);
  const NibbleScaling k = nibble_scaling(r, scale, g);
  float values[8];
  if (k.lean) {
    nibble_word_values(codes, nibble_format(r.element).mag_shift, k, values);  // kCodes 4: nibbles 4-7 are 0
    io::store_values<true>(output, y, element, kCodes, values);
    return;
  }
  const float scale_value = block_scale_value(r, scale);
  KVQ_UNROLL
  for (int i = 0; i < kCodes; ++i)
    values[i] = dequantize_scaled_element(r, g, scale_value, static_cast<std::uint8_t>((codes >> (4 * i)) & 0xFu));
  io::store_values(output, y, element, kCodes, values);
}
// Eight codes: one little-endian word at `word`.
KVQ_HD inline void dequantize_nibble_word(const Recipe& r, const std::uint8_t* word, std::uint8_t scale, float g,
                                          DType output, void* y, std::int64_t element) {
  dequantize_nibbles<8>(r, io::load_word(word), scale, g, output, y, element);
}
// Four codes (two bytes at `half`): the kernels' FP32 output, 16 bytes a thread (a warp's stores
// then fill whole sectors; eight FP32 values a thread are two stores at a 32-byte lane stride).
KVQ_HD inline void dequantize_nibble_half(const Recipe& r, const std::uint8_t* half, std::uint8_t scale, float g,
                                          DType output, void* y, std::int64_t element) {
  dequantize_nibbles<4>(r, io::load_half_word(half), scale, g, output, y, element);
}

// 8-bit element codes, one a byte (dequantize_bytes, requantize_byte_span: spans of kByteSpan).
inline constexpr int kByteSpan = 16;
KVQ_HD constexpr bool byte_span_codes(FormatId element) { return element == FormatId::e4m3fn || element == FormatId::int8; }

// kCodes (8 or 4) 8-bit codes (E4M3FN, INT8; byte i of the little-endian `words` is element
// element + i) of a block with scale code `scale` (0 per tensor), to elements [element, element +
// kCodes) of y: where byte_scaling finds the span lean and no code is an E4M3 NaN, each value is
// byte_code_value * g (formats/fast_decode.hpp) and the 16-bit outputs take the paired
// conversions; else the general element code.
template <int kCodes>
KVQ_HD inline void dequantize_bytes(const Recipe& r, const std::uint32_t* words, std::uint8_t scale, float g,
                                    DType output, void* y, std::int64_t element) {
  static_assert(kCodes == 8 || kCodes == 4);
  const bool int8 = r.element == FormatId::int8;
  const ByteScaling k = byte_scaling(r, scale, g);
  bool nan_code = false;
  KVQ_UNROLL
  for (int w = 0; w < kCodes / 4; ++w) nan_code = nan_code || (!int8 && word_has_e4m3_nan(words[w]));
  float values[kCodes];
  if (k.lean && !nan_code) {
    KVQ_UNROLL
    for (int i = 0; i < kCodes; ++i) values[i] = byte_code_value(int8, words[i / 4], i % 4) * k.g;
    io::store_values<true>(output, y, element, kCodes, values);
    return;
  }
  const float scale_value = block_scale_value(r, scale);
  KVQ_UNROLL
  for (int i = 0; i < kCodes; ++i)
    values[i] = dequantize_scaled_element(r, g, scale_value, static_cast<std::uint8_t>(words[i / 4] >> (8 * (i % 4))));
  io::store_values(output, y, element, kCodes, values);
}

// Elements [first, first + n) of block (row, b): codes and scale to values of the output type.
// kN > 0 fixes n at compile time. The CPU twin decodes whole blocks (first 0, n = block); the
// kernels decode spans of kDequantizeSpan elements, a thread each, with the same element code.
template <int kN = 0>
KVQ_HD inline void dequantize_span(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                                   DType output, void* y, std::int64_t row, std::int64_t b, int first, int n_runtime) {
  constexpr int kCap = kN > 0 ? kN : kMaxBlock;
  const int n = kN > 0 ? kN : n_runtime;
  if (s.packed() && n % 8 == 0 && first % 8 == 0) {  // whole words: eight codes at a time
    const std::int64_t element = row * s.cols + b * s.block() + first;
    const std::uint8_t scale = s.scales_per_row() ? scales[row * s.scales_per_row() + b] : 0;
    for (int w = 0; w < n / 8; ++w)
      dequantize_nibble_word(s.recipe, codes + element / 2 + 4 * w, scale, g, output, y, element + 8 * w);
    return;
  }
  if (byte_span_codes(s.recipe.element) && n % 4 == 0) {  // 8-bit codes: four at a time
    const std::int64_t element = row * s.cols + b * s.block() + first;
    const std::uint8_t scale = s.scales_per_row() ? scales[row * s.scales_per_row() + b] : 0;
    for (int w = 0; w < n / 4; ++w) {
      const std::uint32_t word = io::load_word(codes + element + 4 * w);
      dequantize_bytes<4>(s.recipe, &word, scale, g, output, y, element + 4 * w);
    }
    return;
  }
  std::uint8_t span_codes[kCap];
  float values[kCap];
  const std::uint8_t scale = load_span_codes<kCap>(s, codes, scales, first, n, row, b, span_codes);
  const float scale_value = block_scale_value(s.recipe, scale);
  KVQ_UNROLL
  for (int i = 0; i < n; ++i) values[i] = dequantize_scaled_element(s.recipe, g, scale_value, span_codes[i]);
  io::store_values(output, y, row * s.cols + b * s.block() + first, n, values);
}
inline constexpr int kDequantizeSpan = 8;  // 16 bytes of BF16/FP16 output, 4 of E2M1 codes
inline constexpr int kDequantizeSpanFp32 = 4;  // 16 bytes of FP32 output
template <int kN = 0>
KVQ_HD inline void dequantize_one_block(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales,
                                        float g, DType output, void* y, std::int64_t row, std::int64_t b) {
  dequantize_span<kN>(s, codes, scales, g, output, y, row, b, 0, s.block());
}

// kWords (1 or 2) words of eight 4-bit codes (at `word`) of a block with scale code `scale`, to
// 8 * kWords workspace E4M3 codes at out: formats/fast_decode.hpp where lean
// (nibble_requant_scaling, decided once for the words), else requantize_e4m3 element by element.
// The words are loaded first, as in dequantize_nibble_word.
template <int kWords = 1>
KVQ_HD inline void requantize_nibble_words(const Recipe& r, const std::uint8_t* word, std::uint8_t scale, float factor,
                                           std::uint8_t* out) {
  static_assert(kWords == 1 || kWords == 2);
  std::uint32_t codes[kWords];
  if constexpr (kWords == 2) {
    io::load_word_pair(word, codes);
  } else {
    codes[0] = io::load_word(word);
  }
  const NibbleScaling k = nibble_requant_scaling(r, scale, factor);
  std::uint32_t words[2 * kWords] = {};
  KVQ_UNROLL
  for (int w = 0; w < kWords; ++w) {
    if (k.lean) {
      nibble_word_e4m3(codes[w], nibble_format(r.element).mag_shift, k, words + 2 * w);
    } else {
      KVQ_UNROLL
      for (int i = 0; i < 8; ++i)
        words[2 * w + i / 4] |=
            std::uint32_t{requantize_e4m3(r, scale, static_cast<std::uint8_t>((codes[w] >> (4 * i)) & 0xFu), factor)}
            << (8 * (i % 4));
    }
  }
  io::store_words(out, words, 2 * kWords);
}

// Sixteen 8-bit codes (E4M3FN, INT8) of a block with scale code `scale`, to sixteen workspace E4M3
// codes at out: formats/fast_decode.hpp's byte_words_e4m3 where lean (byte_requant_scaling, and no
// E4M3 NaN code in the span), else requantize_e4m3 element by element.
KVQ_HD inline void requantize_byte_span(const Recipe& r, const std::uint8_t* codes, std::uint8_t scale, float factor,
                                        std::uint8_t* out) {
  std::uint32_t in[4], words[4];
  io::load_four_words(codes, in);
  const ByteRequantScaling k = byte_requant_scaling(r, scale, factor);
  const bool int8 = r.element == FormatId::int8;
  const bool nan_code = !int8 && (word_has_e4m3_nan(in[0]) | word_has_e4m3_nan(in[1]) | word_has_e4m3_nan(in[2]) |
                                  word_has_e4m3_nan(in[3]));
  if (k.lean && !nan_code) {
    byte_words_e4m3(int8, in, k.g, words);
  } else {
    KVQ_UNROLL
    for (int i = 0; i < kByteSpan; ++i)
      words[i / 4] = (i % 4 ? words[i / 4] : 0u) |
                     std::uint32_t{requantize_e4m3(r, scale, static_cast<std::uint8_t>(in[i / 4] >> (8 * (i % 4))), factor)}
                         << (8 * (i % 4));
  }
  io::store_words(out, words, 4);
}

// One block (row, b): codes and scale to E4M3 workspace codes (requantize_e4m3), one byte each.
template <int kN = 0>
KVQ_HD inline void requantize_one_block(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales,
                                        float factor, std::uint8_t* out, std::int64_t row, std::int64_t b) {
  constexpr int kCap = kN > 0 ? kN : kMaxBlock;
  const int n = kN > 0 ? kN : s.block();
  if (s.packed() && n % 8 == 0) {  // whole words: sixteen codes at a time, or eight
    const std::int64_t element = row * s.cols + b * n;
    const std::uint8_t scale = s.scales_per_row() ? scales[row * s.scales_per_row() + b] : 0;
    if (n % 16 == 0) {
      for (int w = 0; w < n / 16; ++w)
        requantize_nibble_words<2>(s.recipe, codes + element / 2 + 8 * w, scale, factor, out + element + 16 * w);
    } else {
      for (int w = 0; w < n / 8; ++w)
        requantize_nibble_words(s.recipe, codes + element / 2 + 4 * w, scale, factor, out + element + 8 * w);
    }
    return;
  }
  if (byte_span_codes(s.recipe.element) && n % kByteSpan == 0) {  // E4M3 or INT8 codes: sixteen at a time
    const std::int64_t element = row * s.cols + b * n;
    const std::uint8_t scale = s.scales_per_row() ? scales[row * s.scales_per_row() + b] : 0;
    for (int w = 0; w < n / kByteSpan; ++w)
      requantize_byte_span(s.recipe, codes + element + kByteSpan * w, scale, factor, out + element + kByteSpan * w);
    return;
  }
  std::uint8_t block_codes[kCap];
  const std::uint8_t scale = load_block_codes<kCap>(s, codes, scales, n, row, b, block_codes);
  KVQ_UNROLL
  for (int i = 0; i < n; ++i) block_codes[i] = requantize_e4m3(s.recipe, scale, block_codes[i], factor);
  io::store_bytes(out + row * s.cols + b * n, block_codes, n);
}

// GPU: device pointers, an opaque cudaStream_t; returns success or the CUDA error / validation message (kernels/status.hpp).
namespace device {
bool available(std::string* why);
Status quantize(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                std::uint8_t* scales, void* stream);
Status dequantize(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                  DType output, void* y, void* stream);
Status amax(DType input, const void* x, std::int64_t count, float* result, void* stream);  // result: device
Status requantize_e4m3(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float factor,
                       std::uint8_t* out, void* stream);
// Memory, for host code that has no CUDA headers (tests, the CLI).
Status allocate(void** p, std::size_t bytes);
void release(void* p);
Status upload(void* device_dst, const void* host_src, std::size_t bytes);
Status download(void* host_dst, const void* device_src, std::size_t bytes);
Status fill(void* device_dst, std::uint8_t byte, std::size_t bytes);
Status synchronize();
}  // namespace device

}  // namespace kvq::kernels
