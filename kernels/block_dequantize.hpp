// The per-block dequantize and workspace (requantize to E4M3) code of the CPU twin and the kernels
// (kernels/quantize.hpp): a block's codes and scale loaded, decoded through formats/fast_decode.hpp
// where a span is NaN-free (else the general element code), and stored.
#pragma once

#include <cstdint>

#include "formats/fast_decode.hpp"
#include "formats/packing.hpp"
#include "formats/recipes.hpp"
#include "kernels/io.hpp"
#include "kernels/quantize_layout.hpp"

namespace kvq::kernels {

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
// of y: the NaN-free decode of formats/fast_decode.hpp where no NaN can arise (nibble_scaling), else
// the general element code. The codes are loaded by the caller, so their load and the scale's
// overlap.
template <int kCodes>
KVQ_HD inline void dequantize_nibbles(const Recipe& r, std::uint32_t codes, std::uint8_t scale, float g, DType output,
                                      void* y, std::int64_t element) {
  static_assert(kCodes == 8 || kCodes == 4);
  const NibbleScaling k = nibble_scaling(r, scale, g);
  float values[8];
  if (k.nan_free) {
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
// 8-bit element codes, one a byte (dequantize_bytes, requantize_byte_span: spans of kByteSpan, one
// vector of codes).
inline constexpr int kByteSpan = io::kVectorBytes;
KVQ_HD constexpr bool byte_span_codes(FormatId element) { return element == FormatId::e4m3fn || element == FormatId::int8; }

// kCodes (8 or 4) 8-bit codes (E4M3FN, INT8; byte i of the little-endian `words` is element
// element + i) of a block with scale code `scale` (0 per tensor), to elements [element, element +
// kCodes) of y: where byte_scaling finds the span NaN-free and no code is an E4M3 NaN, each value is
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
  if (k.nan_free && !nan_code) {
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

// kWords (1 or 2) words of eight 4-bit codes of a block with scale code `scale`, to 8 * kWords
// workspace E4M3 codes (little-endian words, code i in byte i): formats/fast_decode.hpp where
// NaN-free (nibble_requant_scaling, decided once for the words), else requantize_e4m3 element by
// element.
template <int kWords = 1>
KVQ_HD inline void requantize_nibble_codes(const Recipe& r, const std::uint32_t* codes, std::uint8_t scale, float factor,
                                           std::uint32_t* words) {
  static_assert(kWords == 1 || kWords == 2);
  const NibbleScaling k = nibble_requant_scaling(r, scale, factor);
  KVQ_UNROLL
  for (int w = 0; w < kWords; ++w) {
    if (k.nan_free) {
      nibble_word_e4m3(codes[w], nibble_format(r.element).mag_shift, k, words + 2 * w);
    } else {
      words[2 * w] = words[2 * w + 1] = 0;
      KVQ_UNROLL
      for (int i = 0; i < 8; ++i)
        words[2 * w + i / 4] |=
            std::uint32_t{requantize_e4m3(r, scale, static_cast<std::uint8_t>((codes[w] >> (4 * i)) & 0xFu), factor)}
            << (8 * (i % 4));
    }
  }
}
// The same from the words at `word` to the codes at out. The words are loaded first, as in
// dequantize_nibble_word.
template <int kWords = 1>
KVQ_HD inline void requantize_nibble_words(const Recipe& r, const std::uint8_t* word, std::uint8_t scale, float factor,
                                           std::uint8_t* out) {
  std::uint32_t codes[kWords];
  if constexpr (kWords == 2) {
    io::load_word_pair(word, codes);
  } else {
    codes[0] = io::load_word(word);
  }
  std::uint32_t words[2 * kWords];
  requantize_nibble_codes<kWords>(r, codes, scale, factor, words);
  io::store_words(out, words, 2 * kWords);
}

// Sixteen 8-bit codes (E4M3FN, INT8) of a block with scale code `scale`, to sixteen workspace E4M3
// codes at out: formats/fast_decode.hpp's byte_words_e4m3 where NaN-free (byte_requant_scaling, and no
// E4M3 NaN code in the span), else requantize_e4m3 element by element.
KVQ_HD inline void requantize_byte_span(const Recipe& r, const std::uint8_t* codes, std::uint8_t scale, float factor,
                                        std::uint8_t* out) {
  std::uint32_t in[4], words[4];
  io::load_four_words(codes, in);
  const ByteRequantScaling k = byte_requant_scaling(r, scale, factor);
  const bool int8 = r.element == FormatId::int8;
  const bool nan_code = !int8 && (word_has_e4m3_nan(in[0]) | word_has_e4m3_nan(in[1]) | word_has_e4m3_nan(in[2]) |
                                  word_has_e4m3_nan(in[3]));
  if (k.nan_free && !nan_code) {
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

}  // namespace kvq::kernels
