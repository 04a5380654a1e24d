// The per-block quantize code of the CPU twin and the kernels (kernels/quantize.hpp): one block of
// a [rows, cols] tensor loaded, quantized under its recipe and stored (the 4-bit blocks from their
// 16-bit pair words, the 8-bit blocks four codes a word, the per-tensor recipes in spans).
#pragma once

#include <cstdint>
#include <type_traits>

#include "formats/packed_quantize.hpp"
#include "formats/recipes.hpp"
#include "kernels/io.hpp"
#include "kernels/quantize_layout.hpp"

namespace kvq::kernels {

// Where the per-block code puts a block's codes and scale: a byte pointer (kvq's layout), or an
// object that acts on what would be stored (the device comparator's CompareSink,
// kernels/port_compare.hpp: offset by +, store_words / store_bytes / store_byte members).
template <bool kStreamed = true, class Out>
KVQ_HD inline void put_words(Out dst, const std::uint32_t* words, int count) {
  if constexpr (std::is_pointer_v<Out>) {
    io::store_words<kStreamed>(dst, words, count);
  } else {
    dst.store_words(words, count);
  }
}
template <class Out>
KVQ_HD inline void put_bytes(Out dst, const std::uint8_t* bytes, int count) {
  if constexpr (std::is_pointer_v<Out>) {
    io::store_bytes(dst, bytes, count);
  } else {
    dst.store_bytes(bytes, count);
  }
}
template <class Out>
KVQ_HD inline void put_byte(Out dst, std::int64_t index, std::uint8_t byte) {
  if constexpr (std::is_pointer_v<Out>) {
    dst[index] = byte;
  } else {
    dst.store_byte(index, byte);
  }
}

// The block (row, b) of kN elements from its 16-bit values' pair words (as loaded:
// io::load_pair_words), input BF16 or FP16: quantize, store its codes and scale. kPacked: a 4-bit
// recipe, quantize_block_packed's 16-bit form (the block max and signs from the words); else 8-bit
// codes by quantize_block. quantize_one_block's 16-bit path; the kernels may load the words ahead
// (a pipelined loop).
template <int kN, bool kPacked, class Codes, class Scales>
KVQ_HD KVQ_KERNEL_INLINE void quantize_pair_words(const QuantizeShape& s, DType input, const GlobalTerms& t,
                                                   const std::uint32_t* pairs, Codes codes, Scales scales,
                                                   std::int64_t row, std::int64_t b) {
  float values[kN];
  io::unpack_pair_words<kN>(input, pairs, values);
  std::uint8_t scale = 0;
  if constexpr (kPacked) {
    std::uint32_t words[kN / 8];
    scale = input == DType::bf16 ? quantize_block_packed<kN, PairWords::bf16>(s.recipe, t, values, words, pairs)
                                 : quantize_block_packed<kN, PairWords::fp16>(s.recipe, t, values, words, pairs);
    put_words(codes + row * s.code_bytes_per_row() + b * (kN / 2), words, kN / 8);
  } else {
    std::uint8_t block_codes[kN];
    scale = quantize_block(s.recipe, t.g, values, kN, block_codes);
    put_bytes(codes + row * s.code_bytes_per_row() + b * kN, block_codes, kN);
  }
  if (s.scales_per_row()) put_byte(scales, row * s.scales_per_row() + b, scale);
}

// kN scaled values q of an 8-bit recipe to their codes, four a little-endian word: E4M3 half to
// even four at a time (what encode_element does: e4m3x4_satfinite_fast, then for triton_clamp
// tl.clamp's NaN -> +max on its NaN codes; e4m3x4_nonsaturating_fast for PyTorch's cast), else
// encode_element.
template <int kN>
KVQ_HD inline void encode_byte_words(const Recipe& r, const float* q, std::uint32_t* words) {
  static_assert(kN % 4 == 0);
  if (r.element == FormatId::e4m3fn && r.element_rounding == Rounding::nearest_even && !r.element_input_bf16) {
    if (r.element_cast == ElementCast::satfinite || r.element_cast == ElementCast::triton_clamp) {
      KVQ_UNROLL
      for (int w = 0; w < kN / 4; ++w) {
        words[w] = e4m3x4_satfinite_fast(q + 4 * w);
        // tl.clamp's NaN -> +448 after the cast: satfinite turns NaN, and only NaN, into a NaN code.
        if (r.element_cast == ElementCast::triton_clamp) words[w] = e4m3_nan_codes_to_max(words[w]);
      }
      return;
    }
    if (r.element_cast == ElementCast::nonsaturating) {
      KVQ_UNROLL
      for (int w = 0; w < kN / 4; ++w) words[w] = e4m3x4_nonsaturating_fast(q + 4 * w);
      return;
    }
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
// The elements of quantize_block's per-tensor case: plan_block's rule for g (x / g by the recipe's
// division, x * (1/g), or x * 0 where g = 0), then encode_byte_words; elements [first, first +
// kSpan) of the row-major tensor. Engine variants too (their casts: encode_element).
// kStreamed: the memory access policy (io::load_values); the kernel streams dividing spans only:
// each policy is the faster for its op (docs/performance.md).
KVQ_HD constexpr int kTensorSpanOf(DType input) { return input == DType::fp32 ? 4 : 8; }
// tensor_code_words: the codes of kN values under g's plan p, four a word (also the FP8 paged
// store's chunk, kernels/paged_store.hpp). E4M3 codes of IEEE quotients x / g take
// divide_for_e4m3_code (formats/reciprocal.hpp: a multiply and four FMAs from the plan's RN(1/g),
// where a division is a reciprocal, five FMAs and a range test with its branch an element) where
// every |x| < g * 2^126 (x finite, x / g below 2^126: the test is one comparison an element, made
// before the quotients so the values are not held twice); other spans divide.
template <int kN>
KVQ_HD inline bool quotients_by_reciprocal(const Recipe& r, const BlockPlan& p, const float* x) {
  if (!(p.op == ElementOp::divide && r.element == FormatId::e4m3fn && r.scale == BlockScale::tensor_only &&
        r.division != Division::full_approx && divides_for_e4m3_codes(p.by)))  // divide()'s IEEE `/`
    return false;
  const float limit = p.by * kE4m3QuotientLimit;
  bool below = true;
  KVQ_UNROLL
  for (int i = 0; i < kN; ++i) below &= fabsf(x[i]) < limit;
  return below;
}
template <int kN>
KVQ_HD inline void tensor_code_words(const Recipe& r, const BlockPlan& p, const float* x, std::uint32_t* words) {
  float q[kN];
  if (quotients_by_reciprocal<kN>(r, p, x)) {
    KVQ_UNROLL
    for (int i = 0; i < kN; ++i) q[i] = divide_for_e4m3_code(x[i], p.by, p.reciprocal);
  } else {
    KVQ_UNROLL
    for (int i = 0; i < kN; ++i) q[i] = p.op == ElementOp::divide ? recipe_detail::divide(r, x[i], p.by) : x[i] * p.by;
  }
  encode_byte_words<kN>(r, q, words);
}
template <int kSpan, bool kStreamed = true, class Codes = std::uint8_t*>
KVQ_HD inline void quantize_tensor_span(const Recipe& r, const BlockPlan& p, DType input, const void* x,
                                        std::int64_t first, Codes codes) {
  static_assert(kSpan % 4 == 0);
  float q[kSpan];
  io::load_values<kStreamed>(input, x, first, kSpan, q);
  std::uint32_t words[kSpan / 4];
  tensor_code_words<kSpan>(r, p, q, words);
  put_words<kStreamed>(codes + first, words, kSpan / 4);
}

// One block (row, b) of the tensor: load, quantize, store its scale, pack its codes. The whole
// per-block work of both the CPU twin and the kernel; kN > 0 fixes the block size at compile time,
// and then 4-bit blocks run quantize_block_packed (formats/packed_quantize.hpp: the same codes).
// kMayPack = false: the caller knows the elements are 8-bit (keeps the packed path out of the code).
// t: global_terms(g, table), computed once for all blocks (the kernels: the table in shared memory).
template <int kN = 0, bool kMayPack = true, class Codes = std::uint8_t*, class Scales = std::uint8_t*>
KVQ_HD KVQ_KERNEL_INLINE void quantize_one_block(const QuantizeShape& s, DType input, const void* x, const GlobalTerms& t,
                                                  Codes codes, Scales scales, std::int64_t row, std::int64_t b) {
  const float g = t.g;
  constexpr int kCap = kN > 0 ? kN : kMaxBlock;
  const int n = kN > 0 ? kN : s.block();
  float values[kCap];
  const bool packed = s.packed();
  const Codes code_dst = codes + row * s.code_bytes_per_row() + b * (packed ? n / 2 : n);
  std::uint8_t scale = 0;
  if constexpr (kMayPack && kN > 0 && kN % 8 == 0) {
    if (packed) {
      if (input != DType::fp32) {  // 16-bit input: its pair words (BF16: the packed quantizer's BF16 form)
        std::uint32_t pairs[kN / 2];
        io::load_pair_words<kN>(x, row * s.cols + b * n, pairs);
        quantize_pair_words<kN, true>(s, input, t, pairs, codes, scales, row, b);
        return;
      }
      std::uint32_t words[kN / 8];
      io::load_values(input, x, row * s.cols + b * n, n, values);
      scale = quantize_block_packed<kN>(s.recipe, t, values, words);
      put_words(code_dst, words, kN / 8);
      if (s.scales_per_row()) put_byte(scales, row * s.scales_per_row() + b, scale);
      return;
    }
  }
  if constexpr (kN > 0 && kN % 8 == 0) {
    if (!packed && input != DType::fp32) {  // 16-bit input, 8-bit codes: from its pair words
      std::uint32_t pairs[kN / 2];
      io::load_pair_words<kN>(x, row * s.cols + b * n, pairs);
      quantize_pair_words<kN, false>(s, input, t, pairs, codes, scales, row, b);
      return;
    }
  }
  io::load_values(input, x, row * s.cols + b * n, n, values);
  std::uint8_t block_codes[kCap];
  scale = quantize_block(s.recipe, g, values, n, block_codes);
  if (s.scales_per_row()) put_byte(scales, row * s.scales_per_row() + b, scale);
  if (packed)
    KVQ_UNROLL
    for (int i = 0; i < n / 2; ++i) block_codes[i] = pack_e2m1_pair(block_codes[2 * i], block_codes[2 * i + 1]);
  put_bytes(code_dst, block_codes, packed ? n / 2 : n);
}

}  // namespace kvq::kernels
