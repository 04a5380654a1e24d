// 4-bit blocks (E2M1 with RNE, INT4) quantized straight into packed words with the operations a
// GPU issues cheaply: the same scale code and element codes as quantize_block (formats/recipes.hpp)
// for every input, packed as the kernels store them.
//
// quantize_block converts one element at a time through compares and selects, which on Hopper
// share the half-rate integer pipe: the E2M1 kernels ran out of issue slots, not bandwidth. Here
// each element costs three FMAs and three minimums (e2m1_magnitude_magic), its code and sign move
// to its nibble with integer multiply-adds, and the IEEE division of
// the reference recipe becomes a reciprocal per block and two FMA corrections per element
// (divide_by_reciprocal, formats/reciprocal.hpp). Blocks that are not plain (a NaN or inf element; rules or variants with
// no fast form here) run quantize_block itself, so the results never differ.
#pragma once

#include <cstdint>

#include "formats/recipes.hpp"

namespace kvq {


// The reference two-level rule (recipe_detail::two_level_plan) divides three times a block:
// (bmax / divisor) / g for the scale, and (1/g) / sf for a multiplier. The lean plans compute the
// scale's quotients by divide_by_reciprocal instead, with the divisor's reciprocal known ahead:
// RN(1/6) a constant, RN(1/g) once for all blocks of a g; every operand and quotient then stays far
// inside FP32's normal range (g and bmax within [kLeanScaleMin, kLeanScaleMax]), where the quotients
// are the IEEE ones: the fast-paths/scale-quotient-* sweeps check them over all 2^32 dividends.
// The multiplier depends on g and the scale code alone: a table (CodeTerms) holds it.
inline constexpr float kLeanScaleMin = 0x1p-40f, kLeanScaleMax = 0x1p40f;

// What the reference two-level rule derives from g and a block's scale code alone, for the 128
// non-negative codes (the only ones a scale takes where g > 0): the multiplier by = (1/g)/sf of its
// multiply plans (IEEE, rg = 1/g; inf for code 0, which no such plan uses: a zero scale makes the
// zero plan) and s2 = RN(S * S), S = RN(sf * g), for the four_over_six error estimate. Computed
// once for a g (kernels: once a thread block, in shared memory, a thread an entry).
inline constexpr int kE4m3Codes = 128;
struct alignas(8) CodeTerms {
  float by = 0.0f, s2 = 0.0f;
};
KVQ_HD inline CodeTerms code_terms(float g, float rg, int code) {
  const float sf = e4m3_value_fast(static_cast<std::uint8_t>(code)), s = sf * g;
  return {rg / sf, s * s};
}
struct CodeTable {
  CodeTerms at[kE4m3Codes];
};

// The four-over-six package's rules (TwoLevel::amax_encode and four_over_six_amax, whose tensor
// parameter g is amax itself): their plans (recipe_detail::amax_encode_plan) derive from amax and a
// code the multiplier by = 1/(dec * sf), dec = RN(1/enc), enc = RN(D/amax), and their error
// estimate the square s2 = RN(RN(dec * sf)^2) (docs/recipes.md "Fast routes"). A table of these
// takes the place of code_terms' for those rules (recipe_code_terms).
KVQ_HD constexpr bool fouroversix_package_rule(const Recipe& r) {
  return r.scale == BlockScale::e4m3_two_level &&
         (r.two_level == TwoLevel::amax_encode || r.two_level == TwoLevel::four_over_six_amax);
}
// The package's divisors D whose lean plans hold (packed_detail::amax_lean_scale): within [1, 2^20].
KVQ_HD constexpr bool lean_tensor_divisor(const Recipe& r) { return r.tensor_divisor >= 1.0f && r.tensor_divisor <= 0x1p20f; }
KVQ_HD inline CodeTerms amax_code_terms(float dec, int code) {
  const float s = dec * e4m3_value_fast(static_cast<std::uint8_t>(code));
  return {1.0f / s, s * s};
}
// Entry `code` of the table of recipe r's plans for tensor parameter g (rg = 1/g): the package's
// rules' amax_code_terms, every other rule's code_terms.
KVQ_HD inline CodeTerms recipe_code_terms(const Recipe& r, float g, float rg, int code) {
  if (fouroversix_package_rule(r)) return amax_code_terms(1.0f / (r.tensor_divisor / g), code);
  return code_terms(g, rg, code);
}
inline CodeTable code_table(const Recipe& r, float g) {
  CodeTable t;
  for (int c = 0; c < kE4m3Codes; ++c) t.at[c] = recipe_code_terms(r, g, 1.0f / g, c);
  return t;
}

// g and what the reference two-level rule derives from g alone, computed once for many blocks.
struct GlobalTerms {
  float g = 0.0f, rg = 0.0f;          // rg = 1/g, IEEE
  const CodeTerms* codes = nullptr;   // code_terms of every code for this g; null: the plans divide
  bool lean = false;                  // codes, and g within [kLeanScaleMin, kLeanScaleMax] (so is rg)
};
// Whether a g (with its table) is lean: within [kLeanScaleMin, kLeanScaleMax].
KVQ_HD inline bool lean_global_scale(float g) { return g >= kLeanScaleMin && g <= kLeanScaleMax; }
// With the table (codes of this g, or null) and rg = 1/g, computed once for many g (the paged store's K and V).
KVQ_HD inline GlobalTerms global_terms(float g, float rg, const CodeTerms* codes) {
  return {g, rg, codes, codes != nullptr && lean_global_scale(g)};
}
KVQ_HD inline GlobalTerms global_terms(float g, const CodeTerms* codes) { return global_terms(g, 1.0f / g, codes); }
KVQ_HD inline GlobalTerms global_terms(float g) { return global_terms(g, nullptr); }

// Which 16-bit inputs a block's pair words (element 2i in the low half) hold, where the caller
// has them as loaded: none (FP32 input), BF16 or FP16.
enum class PairWords : std::uint8_t { none, bf16, fp16 };

namespace packed_detail {

// max(m, a) with NaN propagating (PTX max.NaN.f32): one pass over a block tells a finite block
// (the result is then its max |x|, as quantize_block's) from one with NaN or inf.
KVQ_HD inline float max_nan(float m, float a) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(m), "f"(a));
  return r;
#else
  return (m != m || a != a) ? float_from_bits(0x7fffffffu) : (a > m ? a : m);
#endif
}

// Which magnitude code the words hold: E2M1 half to even (e2m1_below_7: for blocks whose every
// |q| is below 7, e2m1_magnitude_magic_below_7, one minimum fewer), E2M1 half away
// (nearest_away), E2M1 half toward zero (nearest_toward_zero), INT4.
enum class Magnitude : std::uint8_t { e2m1, e2m1_below_7, e2m1_away, e2m1_toward_zero, int4 };
template <Magnitude kM>
inline constexpr std::uint32_t kMagicBitsOf = kM == Magnitude::e2m1_away ? 0x4affffffu : 0x4b000000u;  // code 0

// The magnitude code of element q as the bits of its magic (kMagicBitsOf<kM> + code).
template <Magnitude kM>
KVQ_HD inline std::uint32_t magic_bits(float q) {
  if constexpr (kM == Magnitude::int4) return bits_of(int4_magnitude_magic(fabsf(q)));
  if constexpr (kM == Magnitude::e2m1_away) return bits_of(e2m1_magnitude_magic_away(fabsf(q)));
  if constexpr (kM == Magnitude::e2m1_toward_zero) return bits_of(e2m1_magnitude_magic_toward_zero(fabsf(q)));
  if constexpr (kM == Magnitude::e2m1_below_7) return bits_of(e2m1_magnitude_magic_below_7(fabsf(q)));
  return bits_of(e2m1_magnitude_magic(fabsf(q)));
}

// The sign nibbles of eight elements x[k] (8 in nibble k where x is negative): eight instructions.
// A sign is the top bit of byte 3; byte_permute copies it into a whole byte (S_k, 0 or 0xFF),
// gathering the even elements' [S0, S2, S4, S6] and the odd ones' [S1, S3, S5, S7] (three each),
// and byte j of the word takes bit 3 from S_2j and bit 7 from S_2j+1.
KVQ_HD inline std::uint32_t sign_nibbles(const float* x) {
  constexpr std::uint32_t kSigns = 0xFBFBu, kHalves = 0x7610u;  // [S_a, S_b, S_a, S_b]; [lo.0, lo.1, hi.2, hi.3]
  const std::uint32_t even = byte_permute(byte_permute(bits_of(x[0]), bits_of(x[2]), kSigns),
                                          byte_permute(bits_of(x[4]), bits_of(x[6]), kSigns), kHalves);
  const std::uint32_t odd = byte_permute(byte_permute(bits_of(x[1]), bits_of(x[3]), kSigns),
                                         byte_permute(bits_of(x[5]), bits_of(x[7]), kSigns), kHalves);
  return (even & 0x08080808u) | (odd & 0x80808080u);
}

// The sign nibbles of eight 16-bit elements (BF16 or FP16) from their four pair words (element
// 2i's sign is bit 15 of word i, element 2i+1's bit 31): six instructions. byte_permute copies the
// signs into whole bytes, [S0, S2, S1, S3] from words 0 and 1 and [S4, S6, S5, S7] from words 2
// and 3, then gathers the even and the odd ones, as sign_nibbles.
KVQ_HD inline std::uint32_t sign_nibbles_pairs(const std::uint32_t* pairs) {
  constexpr std::uint32_t kPairSigns = 0xFBD9u;  // [a.1, b.1, a.3, b.3], each byte's top bit in all eight
  const std::uint32_t a = byte_permute(pairs[0], pairs[1], kPairSigns), b = byte_permute(pairs[2], pairs[3], kPairSigns);
  const std::uint32_t even = byte_permute(a, b, 0x5410u), odd = byte_permute(a, b, 0x7632u);
  return (even & 0x08080808u) | (odd & 0x80808080u);
}

// max(|a|, |b|) of each half of two pair words of 16-bit floats (kType: BF16 or FP16), NaN if
// either is (PTX max.NaN.xorsign.abs.bf16x2 or .f16x2: the maximum magnitude, its sign the XOR of
// the two, which the block max drops; the host compares the magnitude bits as integers, which
// order either type's numbers as their values and put every NaN above them). Exact: the result
// is one of the inputs' magnitudes.
template <PairWords kType>
KVQ_HD inline std::uint32_t pair_max_magnitude(std::uint32_t a, std::uint32_t b) {
  static_assert(kType != PairWords::none);
#if defined(__CUDA_ARCH__)
  std::uint32_t r;
  if constexpr (kType == PairWords::bf16) {
    asm("max.NaN.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  } else {
    asm("max.NaN.xorsign.abs.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  }
  return r;
#else
  std::uint32_t r = 0;
  for (int h = 0; h < 2; ++h) {
    const std::uint32_t ma = (a >> (16 * h)) & 0x7fffu, mb = (b >> (16 * h)) & 0x7fffu;
    r |= (ma > mb ? ma : mb) << (16 * h);
  }
  return r;
#endif
}

// A block's sign nibbles (one word per eight elements) and its max |x| (NaN where any element
// is NaN: max_nan); kPairs: the inputs are BF16 or FP16 and `pairs` their kN/2 words (element 2i
// in the low half): both from the words (the signs are bits 15 and 31 of either type), the max
// from kN/2 - 1 paired maxima and one maximum of the last pair's halves (FP16: of their magnitude
// bits as integers, NaN above every number, then widened exactly).
template <int kN, PairWords kPairs>
KVQ_HD inline float block_signs_and_max(const float* x, const std::uint32_t* pairs, std::uint32_t* signs) {
  if constexpr (kPairs != PairWords::none) {
    KVQ_UNROLL
    for (int w = 0; w < kN / 8; ++w) signs[w] = sign_nibbles_pairs(pairs + 4 * w);
    std::uint32_t m = pairs[0];
    KVQ_UNROLL
    for (int i = 1; i < kN / 2; ++i) m = pair_max_magnitude<kPairs>(m, pairs[i]);
    if constexpr (kPairs == PairWords::bf16) {
      return max_nan(fabsf(float_from_bits(m << 16)), fabsf(float_from_bits(m & 0xffff0000u)));
    } else {
      const std::uint32_t lo = m & 0x7fffu, hi = (m >> 16) & 0x7fffu;
      return fp16_value(static_cast<std::uint16_t>(lo > hi ? lo : hi));
    }
  } else {
    KVQ_UNROLL
    for (int w = 0; w < kN / 8; ++w) signs[w] = sign_nibbles(x + 8 * w);
    float m = 0.0f;
    KVQ_UNROLL
    for (int i = 0; i < kN; ++i) m = max_nan(m, fabsf(x[i]));
    return m;
  }
}

// Eight scaled elements q (their signs, `signs`, from the unscaled x: a scale is positive, and
// x * 0 keeps the sign as quantize_block's x * 0 does) to one word: element k in bits 4k..4k+3.
// The nibbles add up as sum((magic_bits_k - kMagicBitsOf + 8 * sign_k) * 16^k), exact in 32-bit
// wrapping arithmetic: integer multiply-adds (IMAD, the FMA pipe), the magic subtracted once.
template <Magnitude kM>
KVQ_HD inline std::uint32_t pack_eight(const float* q, std::uint32_t signs) {
  constexpr std::uint32_t kMagicSum = kMagicBitsOf<kM> * 0x11111111u;  // sum of the code-0 bits * 16^k, wrapped
  std::uint32_t word = signs - kMagicSum;
  KVQ_UNROLL
  for (int k = 0; k < 8; ++k) word += magic_bits<kM>(q[k]) * (1u << (4 * k));
  return word;
}

// The magnitude code of a finite block of a recipe with a packed fast form (has_packed_fast_form),
// whose max |x| is m, scaled by y (or divided by 1/y): INT4, E2M1 half away or toward zero, or E2M1 half to even,
// without its saturation where m * y < 6.9. Every |q| is at most the block max's product or
// quotient (rounding is monotonic), within 2^-22 of m * y, so below 7 there: usually about 6.
// The E8M0 rules that leave m * y anywhere in [4, 8) (floor) or up to 7 (even) take the saturating
// code for every block: chosen block by block, nearly every warp of 32 blocks split between the two
// loops and ran both (docs/performance.md "On an H200"); the others' blocks lie below 7 by their rule
// (ceil, rceil, the two-level rules: about 6 at most) and take one loop a warp.
KVQ_HD inline Magnitude block_magnitude(const Recipe& r, float m, float y) {
  if (r.element == FormatId::int4) return Magnitude::int4;
  if (r.element_rounding == Rounding::nearest_away) return Magnitude::e2m1_away;
  if (r.element_rounding == Rounding::nearest_toward_zero) return Magnitude::e2m1_toward_zero;
  if (r.scale == BlockScale::e8m0_pow2 && (r.pow2 == Pow2Rule::floor || r.pow2 == Pow2Rule::even) &&
      r.element_cast != ElementCast::e2m1_by_rounding)  // that rounding has no saturating loop: below 7 or none
    return Magnitude::e2m1;
  return m * y < 6.9f ? Magnitude::e2m1_below_7 : Magnitude::e2m1;
}

// The words of a block: q = x * y, or x / d from y = 1/d (kDivide); one loop per case.
template <int kN, bool kDivide, Magnitude kM>
KVQ_HD inline void encode_words(const float* x, const std::uint32_t* signs, float d, float y, std::uint32_t* words) {
  KVQ_UNROLL
  for (int w = 0; w < kN / 8; ++w) {
    float q[8];
    KVQ_UNROLL
    for (int k = 0; k < 8; ++k) q[k] = kDivide ? divide_by_reciprocal(x[8 * w + k], d, y) : x[8 * w + k] * y;
    words[w] = pack_eight<kM>(q, signs[w]);
  }
}
template <int kN, bool kDivide>
KVQ_HD inline void encode_words(Magnitude m, const float* x, const std::uint32_t* signs, float d, float y,
                                std::uint32_t* words) {
  if (m == Magnitude::int4) {
    encode_words<kN, kDivide, Magnitude::int4>(x, signs, d, y, words);
  } else if (m == Magnitude::e2m1_below_7) {
    encode_words<kN, kDivide, Magnitude::e2m1_below_7>(x, signs, d, y, words);
  } else if (m == Magnitude::e2m1_away) {
    encode_words<kN, kDivide, Magnitude::e2m1_away>(x, signs, d, y, words);
  } else if (m == Magnitude::e2m1_toward_zero) {
    encode_words<kN, kDivide, Magnitude::e2m1_toward_zero>(x, signs, d, y, words);
  } else {
    encode_words<kN, kDivide, Magnitude::e2m1>(x, signs, d, y, words);
  }
}

// The E2M1 magnitude of a code k times 2^-126, from its magic's bits (e2m1_magnitude_magic): the
// FP32 with bits k << 22 (one integer multiply; 0x4b000000 << 22 wraps to 0). E2M1 has FP32's
// pattern at the bottom of its range with one mantissa bit: k = 0 is 0, k = 1 the subnormal 2^-127,
// and k >= 2 is 2^((k >> 1) - 127) * (1 + (k & 1) / 2), each exactly the code's value times 2^-126.
// Times 2^126 (kTinyToE2m1) in an FMA it is exact again: the builds keep subnormals (no ftz).
KVQ_HD inline float e2m1_tiny_of_magic(std::uint32_t bits) { return float_from_bits(bits * (1u << 22)); }
inline constexpr float kTinyToE2m1 = 0x1p126f;

// The E2M1 magnitude magic of |q| from the pieces its range needs (formats/fast_paths.hpp):
// kTo4_5 = |q| <= 4.5 (the /4 candidate of a small block, a block-uniform test), else every piece.
template <bool kTo4_5>
KVQ_HD inline std::uint32_t e2m1_magic_bits_within(float q) {
  if constexpr (kTo4_5) return bits_of(e2m1_magnitude_magic_to_4_5(fabsf(q)));
  return bits_of(e2m1_magnitude_magic(fabsf(q)));
}

// Between nibble k of a word (a magnitude code) and the bits code << 22 of its E2M1 value times
// 2^-126 (e2m1_tiny_of_magic, e2m1_round_below_7): one shift each way (with the add: LEA, LEA.HI).
KVQ_HD constexpr std::uint32_t nibble_of_tiny(std::uint32_t tiny_bits, int k) {
  return 4 * k >= 22 ? tiny_bits << (4 * k - 22) : tiny_bits >> (22 - 4 * k);
}
KVQ_HD constexpr std::uint32_t tiny_of_nibble(std::uint32_t word, int k) {
  return (4 * k <= 22 ? word << (22 - 4 * k) : word >> (4 * k - 22)) & (7u << 22);
}

// One candidate of the four_over_six rule: the words of q = x * y (signs: sign_nibbles) and the
// candidate's squared error in units of its scale S = sf * g, E = sum((|q| - v)^2) with FMAs
// (v the code's E2M1 magnitude; |q| - v is exact), for estimate_error. kSmall: |q| < 7 for /6
// (e2m1_round_below_7: v itself, nine instructions an element with q and the error) and |q| <= 4.5
// for /4 (the two-piece magic: eight), a block-uniform test; else the magic's every piece.
template <int kN, bool kSmall, bool kSix>
KVQ_HD inline float encode_words_with_error(const float* x, float y, const std::uint32_t* signs, std::uint32_t* words) {
  constexpr bool kRound = kSmall && kSix;
  constexpr std::uint32_t kMagicSum = kRound ? 0u : kMagicBitsOf<Magnitude::e2m1> * 0x11111111u;
  float sum = 0.0f;
  KVQ_UNROLL
  for (int w = 0; w < kN / 8; ++w) {
    std::uint32_t word = signs[w] - kMagicSum;
    KVQ_UNROLL
    for (int k = 0; k < 8; ++k) {
      const float a = fabsf(x[8 * w + k] * y);
      float e;
      if constexpr (kRound) {
        const E2m1Rounded r = e2m1_round_below_7(a);
        word += nibble_of_tiny(bits_of(r.tiny), k);
        e = a - r.value;
      } else {
        const std::uint32_t magic = e2m1_magic_bits_within<kSmall>(a);  // kSmall here: the /4 candidate
        word += magic * (1u << (4 * k));
        e = fmaf(e2m1_tiny_of_magic(magic), -kTinyToE2m1, a);  // |q| - v
      }
      sum = fmaf(e, e, sum);
    }
    words[w] = word;
  }
  return sum;
}

// The exact FP32 squared error of a candidate's words with block scale sf: the operations and order
// of recipe_detail::two_level_squared_error. A code's sign is x's, and x - (+-v * sf) * g equals
// +-(|x| - (v * sf) * g) exactly (round to nearest is symmetric), so magnitudes give the same square.
template <int kN>
KVQ_HD inline float squared_error_of_words(const float* x, const std::uint32_t* words, float sf, float g) {
  float sum = 0.0f;
  KVQ_UNROLL
  for (int i = 0; i < kN; ++i) {
    const float v = float_from_bits(tiny_of_nibble(words[i / 8], i % 8)) * kTinyToE2m1;
    const float d = fabsf(x[i]) - (v * sf) * g;
    const float square = d * d;
    sum = sum + square;
  }
  return sum;
}

// The exact FP32 squared error of a candidate's words with block scale sf under the four-over-six
// package's rules: the operations and order of recipe_detail::amax_squared_error. As
// squared_error_of_words, magnitudes give the same squares: the package's value f has x's sign, or
// is +-0, whose term is x^2 either way.
template <int kN>
KVQ_HD inline float amax_squared_error_of_words(const Recipe& r, const float* x, const std::uint32_t* words, float sf,
                                                float amax) {
  float terms[kN];
  KVQ_UNROLL
  for (int i = 0; i < kN; ++i) {
    const float v = float_from_bits(tiny_of_nibble(words[i / 8], i % 8)) * kTinyToE2m1;
    terms[i] = recipe_detail::amax_error_term(r, amax, fabsf(x[i]), sf, v);
  }
  return recipe_detail::torch_row_sum(terms, kN);
}

// A candidate's exact FP32 squared error err (two_level_squared_error) lies within `bound` of
// `value` = E * S^2, from its scaled error E (encode_words_with_error), for blocks of
// n <= 32 elements with |q| < 7, multiplier y = RN(RN(1/g)/sf), S = RN(sf * g) and s2 = RN(S * S)
// in [2^-100, 2^100] (S within about [2^-50, 2^50]).
// The derivation (docs/recipes.md, 4over6): |err - E S^2| <= S^2 u (72 E + 69 sqrt(n E) + n/4096),
// u = 2^-24; sqrt(n E) <= 16 E + n/64 (AM-GM), and the bound below has twice that with FP32 slack.
// The four-over-six package's error (amax_squared_error, y = by and s2 of amax_code_terms: S =
// sf * amax / D) lies within S^2 u (75 E + 95 sqrt(n E) + n/4096) of E S^2 (docs/recipes.md), which
// the same bound holds with less slack.
struct ErrorEstimate {
  float value, bound;
};
KVQ_HD inline ErrorEstimate estimate_error(float scaled, float s2, int n) {
  return {scaled * s2, s2 * fmaf(scaled, 0x1p-13f, static_cast<float>(n) * 0x1p-23f)};  // u (2048 E + 2n)
}
inline constexpr float kEstimateSquareMin = 0x1p-100f, kEstimateSquareMax = 0x1p100f;
KVQ_HD inline bool estimable(float s2) { return s2 >= kEstimateSquareMin && s2 <= kEstimateSquareMax; }

// The comparison of two candidates' exact errors from their estimates, where it is certain: the
// difference d = v6 - v4 of the values against m = b6 + b4 + 2^-21 (v6 + v4), the two bounds and
// 2^-21 of the values for the rounding of d and of m itself. four_wins: err4 < err6; certain:
// |d| > m (else the caller compares exactly).
struct Decision {
  bool four_wins, certain;
};
KVQ_HD inline Decision decide_by_estimates(float scaled6, float s2_6, float scaled4, float s2_4, int n) {
  const ErrorEstimate e6 = estimate_error(scaled6, s2_6, n), e4 = estimate_error(scaled4, s2_4, n);
  const float m = fmaf(e6.value + e4.value, 0x1p-21f, e6.bound + e4.bound);
  const float d = e6.value - e4.value;
  return {d > m, fabsf(d) > m};
}

// RN(RN(sf * g)^2) of a scale code: the table's, or computed.
KVQ_HD inline float scale_square(const GlobalTerms& t, std::uint8_t code) {
  if (t.codes != nullptr) return t.codes[code & 0x7f].s2;  // the sign squares away
  const float s = e4m3_value_fast(code) * t.g;
  return s * s;
}

// The two plans of four_over_six (divisors 6 and 4) with their scale_square; fast: both multiply
// by y > 0 and both squares are estimable (four_over_six_plans).
struct FourOverSixPlans {
  BlockPlan six, four;
  float s2_six, s2_four;
  bool fast;
};

// Both candidates: the /4 words where its squared error is lower, else the /6 words (ties keep /6).
// Small blocks whose scales allow it decide on the error estimates where they differ by more than
// their bounds (the usual case: a few instructions an element fewer than the exact errors), the
// others on the exact FP32 errors, computed from the words (the codes are the same either way).
// The exact errors are the rule's: four_over_six's (squared_error_of_words), or the four-over-six
// package's (amax_squared_error_of_words; g is amax).
template <int kN, bool kSmall>
KVQ_HD inline std::uint8_t pick_four_over_six(const Recipe& r, const float* x, const std::uint32_t* signs, float g,
                                              const FourOverSixPlans& p, std::uint32_t* words) {
  const BlockPlan &six = p.six, &four = p.four;
  std::uint32_t six_words[kN / 8];
  const float scaled6 = encode_words_with_error<kN, kSmall, true>(x, six.by, signs, six_words);
  const float scaled4 = encode_words_with_error<kN, kSmall, false>(x, four.by, signs, words);
  bool four_wins = false, certain = false;
  if (kSmall && kN <= 32) {
    if (p.fast || (six.by > 0.0f && four.by > 0.0f && estimable(p.s2_six) && estimable(p.s2_four))) {
      const Decision d = decide_by_estimates(scaled6, p.s2_six, scaled4, p.s2_four, kN);
      four_wins = d.four_wins, certain = d.certain;
    }
  }
  if (!certain) {
    const float sf6 = e4m3_value_fast(six.scale_code), sf4 = e4m3_value_fast(four.scale_code);
    four_wins = fouroversix_package_rule(r)
                    ? amax_squared_error_of_words<kN>(r, x, words, sf4, g) < amax_squared_error_of_words<kN>(r, x, six_words, sf6, g)
                    : squared_error_of_words<kN>(x, words, sf4, g) < squared_error_of_words<kN>(x, six_words, sf6, g);
  }
  if (four_wins) return four.scale_code;
  KVQ_UNROLL
  for (int w = 0; w < kN / 8; ++w) words[w] = six_words[w];
  return six.scale_code;
}

// A plan whose elements the packed words can take: a finite multiplier (an inf one makes
// 0 * inf = NaN, which quantize_block codes without its sign), or a divisor where
// divide_by_reciprocal is exact; positive (+0 included), as the words take each sign from x (a
// negative g can make torchao's clamped-scale multiplier negative).
KVQ_HD inline bool packable(const BlockPlan& p) {
  return (p.op == ElementOp::multiply && (bits_of(p.by) >> 31) == 0u && p.by <= kFp32Max) ||
         (p.op == ElementOp::divide && p.by >= kDivideByReciprocalMin && p.by <= kDivideByReciprocalMax);
}

// How a cast signs a zero value v = +-0 on a finite block: with x's sign (the satfinite cast: x * by
// keeps it), always + (casts_zero_unsigned), or always - (ElementCast::satfinite_negative_zero:
// ModelOpt's MXFP4 writes every zero 0x8); zero_sign_of says which.
enum class ZeroSign : std::uint8_t { of_x, plus, minus };

// For a cast that signs a zero value its own way (ZeroSign plus or minus): the sign nibbles of the
// elements whose value is 0 set to that sign. Under a zero plan (x * 0) that is every element; else
// the elements x = +-0, where every nonzero x gives v != 0: the block's smallest nonzero |x| gives
// |v| >= 2^-126, and rounding is monotonic. False where it does not (a block spanning more than
// 2^126 or so): the caller runs quantize_block.
template <int kN>
KVQ_HD inline bool sign_zeros(const float* x, const BlockPlan& p, ZeroSign z, std::uint32_t* signs) {
  if (p.op == ElementOp::multiply && p.by == 0.0f) {
    KVQ_UNROLL
    for (int w = 0; w < kN / 8; ++w) signs[w] = z == ZeroSign::minus ? 0x88888888u : 0u;
    return true;
  }
  std::uint32_t least = 0xFFFFFFFFu;  // the smallest nonzero magnitude's bits - 1 (a zero wraps)
  KVQ_UNROLL
  for (int w = 0; w < kN / 8; ++w) {
    KVQ_UNROLL
    for (int k = 0; k < 8; ++k) {
      const std::uint32_t a = bits_of(x[8 * w + k]) & 0x7fffffffu;
      least = a - 1u < least ? a - 1u : least;
      const std::uint32_t zero = static_cast<std::uint32_t>(a == 0u) << (4 * k + 3);
      signs[w] = z == ZeroSign::minus ? signs[w] | zero : signs[w] & ~zero;
    }
  }
  if (least == 0xFFFFFFFFu) return true;  // every element zero
  const float smallest = float_from_bits(least + 1u);
  return (p.op == ElementOp::divide ? smallest / p.by : smallest * p.by) >= 0x1p-126f;
}

// The paired signed minimum of two words' 16-bit halves (PTX min.s16x2, sm_90; the host compares
// each half with its sign bit flipped, which orders two's complement as unsigned).
KVQ_HD inline std::uint32_t min_s16x2(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  std::uint32_t r;
  asm("min.s16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  std::uint32_t r = 0;
  for (int h = 0; h < 2; ++h) {
    const std::uint32_t x = (a >> (16 * h)) & 0xffffu, y = (b >> (16 * h)) & 0xffffu;
    r |= ((x ^ 0x8000u) < (y ^ 0x8000u) ? x : y) << (16 * h);
  }
  return r;
#endif
}

// The smallest nonzero magnitude of a 16-bit input (BF16's subnormal 2^-133, FP16's 2^-24) and the
// plans under which no such input has a zero value: its product by `by`, or quotient by it, at least
// 2^-149, FP32's smallest subnormal (rounding is monotonic, so no nonzero |x| rounds below it;
// docs/recipes.md, the variant_plan route).
template <PairWords kPairs>
inline constexpr float kSmallestPairMagnitude = kPairs == PairWords::bf16 ? 0x1p-133f : 0x1p-24f;
template <PairWords kPairs>
KVQ_HD inline bool keeps_nonzero_pairs(const BlockPlan& p) {
  constexpr float kMultiplierMin = 0x1p-149f / kSmallestPairMagnitude<kPairs>;  // exact: powers of two
  constexpr float kDivisorMax = 1.0f / kMultiplierMin;
  return p.op == ElementOp::divide ? p.by <= kDivisorMax : p.by >= kMultiplierMin;
}

// sign_zeros for BF16 or FP16 values from their pair words (kPairs; element 2i in the low half of
// pairs[i]), with the same result, writing every sign nibble (the caller's are not read). Each
// half's magnitude bits m less one, ((m | 0x8000) - 1) in 32-bit arithmetic (no borrow crosses a
// half), has its top bit set exactly where m is nonzero; bits 15 and 31 are what sign_nibbles_pairs
// reads, so x's sign bits ANDed with it are the signs with the zeros' cleared (ZeroSign::plus), and
// ORed with its complement the signs with the zeros' set (minus). Where the plan keeps every nonzero
// input nonzero (keeps_nonzero_pairs: the usual block) that is all; else the smallest nonzero
// magnitude decides, from a paired signed minimum of the same words (a zero's 0x7FFF is above every
// nonzero's, which are negative as 16-bit integers and order as the magnitudes: the magnitude bits
// of either type order as the values).
template <int kN, PairWords kPairs>
KVQ_HD inline bool sign_zeros_of_pairs(const std::uint32_t* pairs, const BlockPlan& p, ZeroSign z,
                                       std::uint32_t* signs) {
  static_assert(kPairs != PairWords::none);
  if (p.op == ElementOp::multiply && p.by == 0.0f) {
    KVQ_UNROLL
    for (int w = 0; w < kN / 8; ++w) signs[w] = z == ZeroSign::minus ? 0x88888888u : 0u;
    return true;
  }
  std::uint32_t nonzero[kN / 2], signed_pairs[kN / 2];
  KVQ_UNROLL
  for (int i = 0; i < kN / 2; ++i) {
    nonzero[i] = (pairs[i] | 0x80008000u) - 0x00010001u;
    signed_pairs[i] = z == ZeroSign::minus ? pairs[i] | ~nonzero[i] : pairs[i] & nonzero[i];
  }
  KVQ_UNROLL
  for (int w = 0; w < kN / 8; ++w) signs[w] = sign_nibbles_pairs(signed_pairs + 4 * w);
  if (keeps_nonzero_pairs<kPairs>(p)) return true;
  std::uint32_t least = 0x7FFF7FFFu;
  KVQ_UNROLL
  for (int i = 0; i < kN / 2; ++i) least = min_s16x2(least, nonzero[i]);
  const std::uint32_t lo = least & 0xffffu, hi = least >> 16;
  const std::uint32_t m = ((lo ^ 0x8000u) < (hi ^ 0x8000u) ? lo : hi) ^ 0x8000u;  // the smaller as signed; m - 1 unsigned
  if (m == 0xffffu) return true;  // every element zero (0x7FFF ^ 0x8000)
  const float smallest = kPairs == PairWords::bf16 ? float_from_bits((m + 1u) << 16)
                                                   : fp16_value(static_cast<std::uint16_t>(m + 1u));
  return (p.op == ElementOp::divide ? smallest / p.by : smallest * p.by) >= 0x1p-126f;
}
// sign_zeros from the pair words where the caller has them (kPairs), else from the values.
template <int kN, PairWords kPairs>
KVQ_HD inline bool sign_zeros_of(const float* x, const std::uint32_t* pairs, const BlockPlan& p, ZeroSign z,
                                 std::uint32_t* signs) {
  if constexpr (kPairs != PairWords::none) {
    return sign_zeros_of_pairs<kN, kPairs>(pairs, p, z, signs);
  } else {
    return sign_zeros<kN>(x, p, z, signs);
  }
}

// Whether two_level_plan_lean gives a block with max |x| = bmax its plan: a lean g, and bmax 0
// or within [kLeanScaleMin, kLeanScaleMax].
KVQ_HD inline bool lean_block(const GlobalTerms& t, float bmax) {
  return t.lean && bmax <= kLeanScaleMax && (bmax >= kLeanScaleMin || bmax == 0.0f);
}

// (1/g)/sf from the table of g's code terms.
struct TableMultiplier {
  const CodeTerms* codes;
  KVQ_HD float operator()(std::uint8_t sf8, float) const { return codes[sf8 & 0x7f].by; }
};

// bmax / divisor for a lean_block by reciprocal (see kLeanScaleMin): divisor 4 exactly, another
// constant by a folded RN(1/divisor).
KVQ_HD inline float lean_over_divisor(float bmax, float divisor) {
  return divisor == 4.0f ? bmax * 0.25f : divide_by_reciprocal(bmax, divisor, 1.0f / divisor);
}

// The block decode scale (bmax / divisor) / g of a lean_block by reciprocals.
KVQ_HD inline float lean_scale(const GlobalTerms& t, float bmax, float divisor) {
  return divide_by_reciprocal(lean_over_divisor(bmax, divisor), t.g, t.rg);
}

// recipe_detail::two_level_decode_scale for a lean_block, the rule's divisions by g and by the
// constant divisor by reciprocal (the same quotients: lean_scale's, Markstein's theorem in the lean
// range); the reference rule's is lean_scale. An engine variant's (has_packed_variant_form) keeps
// its own steps: bmax * RN(1/divisor) for Division::constant_reciprocal, the ratio rounded to its
// scale dtype, (bmax / m) * e for an encode parameter, and ModelOpt's bmax / (m * g) one IEEE
// division.
KVQ_HD inline float lean_decode_scale(const Recipe& r, const GlobalTerms& t, float bmax, float divisor) {
  if (r.scale_form == ScaleForm::over_product) return bmax / (divisor * t.g);
  const float over =
      r.division == Division::constant_reciprocal ? bmax * (1.0f / divisor) : lean_over_divisor(bmax, divisor);
  const float ratio = recipe_detail::in_scale_dtype(r, over);
  return r.tensor_param == TensorParam::encode ? ratio * t.g : divide_by_reciprocal(ratio, t.g, t.rg);
}

// recipe_detail::two_level_plan(r, g, bmax, divisor) for a lean_block: the same plan, its
// quotients by reciprocal and its multiplier (1/g)/sf from the table (an encode parameter's g/sf:
// the rule's own division). Not for Division::full_approx (no packed form takes it).
KVQ_HD inline BlockPlan two_level_plan_lean(const Recipe& r, const GlobalTerms& t, float bmax, float divisor) {
  const float s = lean_decode_scale(r, t, bmax, divisor);
  if (r.tensor_param == TensorParam::encode)
    return recipe_detail::two_level_plan_from(r, t.g, bmax, s, recipe_detail::RuleMultiplier{r, t.g});
  return recipe_detail::two_level_plan_from(r, t.g, bmax, s, TableMultiplier{t.codes});
}

// Whether the rule is the reference two-level one (or four_over_six's), whose plans have a lean form.
KVQ_HD inline bool reference_two_level(const Recipe& r) {
  return r.scale == BlockScale::e4m3_two_level &&
         (r.two_level == TwoLevel::reference || r.two_level == TwoLevel::four_over_six);
}
// Whether plan_of takes the lean plan (two_level_plan_lean) for a block with max |x| = bmax.
KVQ_HD inline bool lean_plan_of(const Recipe& r, const GlobalTerms& t, float bmax) {
  return reference_two_level(r) && lean_block(t, bmax);
}
// The plan of a finite block, lean where it can be (the reference and four_over_six rules' /6).
KVQ_HD inline BlockPlan plan_of(const Recipe& r, const GlobalTerms& t, float bmax, float divisor) {
  if (lean_plan_of(r, t, bmax)) return two_level_plan_lean(r, t, bmax, divisor);
  if (reference_two_level(r)) return recipe_detail::two_level_plan(r, t.g, bmax, divisor);
  return plan_block(r, t.g, bmax, false);
}

// Both plans of four_over_six (E2M1: divisors 6 and 4) from both lean scales at once, one paired
// conversion to their codes and the table's terms, for a g with its table (t.lean), computed for any
// bmax without a branch; fast: they are the rule's plans (bmax within [kLeanScaleMin, kLeanScaleMax],
// and the /6 code not 0, so neither is: RN(bmax/6) <= bmax/4, and each later step is monotonic).
// No guard of the rule applies there (bmax > 0, and sf * g >= 2^-49 > 0 for every code but 0), and
// every s2 is estimable (S in [2^-49, 2^49]). For other bmax (NaN included) the codes are whatever
// the conversion gives, within the table's 128 entries.
// Whether four_over_six_lean_plans may give a rule's plans: a g with its table, E2M1 elements that
// multiply.
KVQ_HD inline bool lean_plans_apply(const Recipe& r, const GlobalTerms& t) {
  return t.lean && r.apply != Apply::divide && r.element == FormatId::e2m1;
}
KVQ_HD inline FourOverSixPlans four_over_six_lean_plans(const Recipe& r, const GlobalTerms& t, float bmax) {
  static_assert(kE4m3Codes == 128, "the codes index the table by their low seven bits");
  const float s6 = recipe_detail::clamped_scale(r, lean_scale(t, bmax, 6.0f));
  const float s4 = recipe_detail::clamped_scale(r, lean_scale(t, bmax, 4.0f));
  const std::uint16_t codes = e4m3x2_satfinite_fast(s6, s4);
  const auto c6 = static_cast<std::uint8_t>(codes & 0x7F), c4 = static_cast<std::uint8_t>((codes >> 8) & 0x7F);
  const CodeTerms six = t.codes[c6], four = t.codes[c4];
  const bool fast = bmax >= kLeanScaleMin && bmax <= kLeanScaleMax && c6 != 0;
  return {{c6, ElementOp::multiply, six.by}, {c4, ElementOp::multiply, four.by}, six.s2, four.s2, fast};
}

// The two plans of four_over_six (divisors 6 and 4) for a finite block with max |x| = bmax: in the
// usual case (lean g with its table, a multiplying E2M1 rule, four_over_six_lean_plans fast) the
// lean plans; else plan_of's plans, which may also divide or be zero.
KVQ_HD inline FourOverSixPlans four_over_six_plans(const Recipe& r, const GlobalTerms& t, float bmax) {
  if (lean_plans_apply(r, t)) {
    const FourOverSixPlans p = four_over_six_lean_plans(r, t, bmax);
    if (p.fast) return p;
  }
  const BlockPlan six = plan_of(r, t, bmax, element_max(r)), four = plan_of(r, t, bmax, 4.0f);
  return {six, four, scale_square(t, six.scale_code), scale_square(t, four.scale_code), false};
}

// four_over_six (recipe_detail::quantize_two_level) on a finite block with max |x| = bmax, for
// E2M1 half-to-even elements when both candidates multiply (else false: the caller runs
// quantize_block): the /4 candidate's words and scale where its squared error is lower, else the
// /6 candidate's (ties keep /6).
template <int kN>
KVQ_HD inline bool four_over_six_words(const Recipe& r, const GlobalTerms& t, const float* x, const std::uint32_t* signs,
                                       float bmax, std::uint32_t* words, std::uint8_t* scale) {
  if (r.element != FormatId::e2m1 || r.element_rounding != Rounding::nearest_even) return false;
  const FourOverSixPlans p = four_over_six_plans(r, t, bmax);
  const BlockPlan &six = p.six, &four = p.four;
  if (!p.fast &&
      (six.op != ElementOp::multiply || four.op != ElementOp::multiply || !packable(six) || !packable(four)))
    return false;
  if (six.scale_code == four.scale_code) {  // the same scale: the same codes and errors, and ties keep /6
    encode_words<kN, false, Magnitude::e2m1>(x, signs, six.by, six.by, words);
    *scale = six.scale_code;
    return true;
  }
  // |q| <= |bmax * y| for every element (rounding is monotonic): usually about 6 and 4.
  const bool small = fabsf(bmax * six.by) < 7.0f && fabsf(bmax * four.by) <= 4.5f;
  *scale = small ? pick_four_over_six<kN, true>(r, x, signs, t.g, p, words)
                 : pick_four_over_six<kN, false>(r, x, signs, t.g, p, words);
  return true;
}

// four_over_six on the usual block in one test (kernels: no branch but that test and the uncertain
// estimates'): a lean g with its table, a multiplying rule, four_over_six_lean_plans fast, and both
// candidates small. There four_over_six_words takes the same plans and pick_four_over_six<kN, true>,
// or, where both codes are equal (saturated), one pass: the same words and scale as the pick's,
// whose candidates are then the same and whose tie keeps /6. The plans are computed before the
// test, for every block (bmax NaN or out of range: codes the test drops); false: the caller decides.
template <int kN>
KVQ_HD inline bool four_over_six_usual(const Recipe& r, const GlobalTerms& t, const float* x, const std::uint32_t* signs,
                                       float bmax, std::uint32_t* words, std::uint8_t* scale) {
  if (r.element_rounding != Rounding::nearest_even || !lean_plans_apply(r, t)) return false;
  const FourOverSixPlans p = four_over_six_lean_plans(r, t, bmax);
  // |q| <= bmax * y for every element (rounding is monotonic; y > 0): usually about 6 and 4.
  if (!(p.fast && bmax * p.six.by < 7.0f && bmax * p.four.by <= 4.5f)) return false;
  *scale = pick_four_over_six<kN, true>(r, x, signs, t.g, p, words);
  return true;
}

// The four-over-six package's cast of a block scale to E4M3 (RNE, no saturation: 0x7F, NaN, from
// 464 up, whose tie rounds to 448's even code) equals the satfinite cast below this.
inline constexpr float kE4m3UnsaturatedBelow = 464.0f;

// The package's block scale s = (bmax / 6) * enc, enc = D / amax (recipe_detail::amax_encode_plan),
// for a lean g = amax and a lean_block bmax: both quotients by reciprocal, the IEEE ones (D / amax
// as lean_scale's quotients by g: Markstein's theorem, for lean_tensor_divisor).
KVQ_HD inline float amax_lean_scale(const Recipe& r, const GlobalTerms& t, float bmax) {
  return lean_over_divisor(bmax, element_max(r)) * divide_by_reciprocal(r.tensor_divisor, t.g, t.rg);
}

// The package's one-candidate plan (TwoLevel::amax_encode, recipe_detail::amax_encode_plan) for a
// lean_block, from amax_lean_scale and g's table (amax_code_terms); false where the unsaturated cast
// may differ (s from kE4m3UnsaturatedBelow up): the caller takes the rule's own plan.
KVQ_HD inline bool amax_encode_plan_lean(const Recipe& r, const GlobalTerms& t, float bmax, BlockPlan* plan) {
  const float s = amax_lean_scale(r, t, bmax);
  if (!(s < kE4m3UnsaturatedBelow)) return false;
  const std::uint8_t code = e4m3_satfinite_fast(s);
  *plan = {code, ElementOp::multiply, code == 0 ? 0.0f : t.codes[code].by};  // a zero scale: +0 elements
  return true;
}

// Both plans of the package's two-candidate rule (TwoLevel::four_over_six_amax): s6 =
// amax_lean_scale, s4 = s6 * 1.5, one paired conversion, the table's multipliers and squares
// (amax_code_terms), for a g with its table, computed for any bmax without a branch. fast: they are
// the rule's plans and both squares are estimable: bmax lean, s4 below kE4m3UnsaturatedBelow (so
// is s6), and the /6 code not 0 (nor then the /4 one: every step from s6 to s4's code is monotonic).
KVQ_HD inline FourOverSixPlans amax_lean_plans(const Recipe& r, const GlobalTerms& t, float bmax) {
  const float s6 = amax_lean_scale(r, t, bmax), s4 = s6 * 1.5f;
  const std::uint16_t codes = e4m3x2_satfinite_fast(s6, s4);
  const auto c6 = static_cast<std::uint8_t>(codes & 0x7F), c4 = static_cast<std::uint8_t>((codes >> 8) & 0x7F);
  const CodeTerms six = t.codes[c6], four = t.codes[c4];
  const bool fast = bmax >= kLeanScaleMin && bmax <= kLeanScaleMax && s4 < kE4m3UnsaturatedBelow && c6 != 0 &&
                    estimable(six.s2) && estimable(four.s2);
  return {{c6, ElementOp::multiply, six.by}, {c4, ElementOp::multiply, four.by}, six.s2, four.s2, fast};
}

// The package's two-candidate rule (recipe_detail::quantize_two_level_amax) on the usual block, in
// one test: a lean amax with its table, amax_lean_plans fast, both candidates small (|q| < 7 and
// <= 4.5, where the package's rounding is the half-to-even cast: e2m1_by_rounding_value), and the
// zero inputs' signs cleared (sign_zeros_of with the /4 plan's smaller multiplier: no nonzero x
// gives a zero value under either). There pick_four_over_six<kN, true> computes what the package
// does, the estimates' bound holding for its error (estimate_error). False: the caller decides.
template <int kN, PairWords kPairs>
KVQ_HD inline bool four_over_six_amax_usual(const Recipe& r, const GlobalTerms& t, const float* x,
                                            const std::uint32_t* pairs, std::uint32_t* signs, float bmax,
                                            std::uint32_t* words, std::uint8_t* scale) {
  if (!t.lean) return false;
  const FourOverSixPlans p = amax_lean_plans(r, t, bmax);
  if (!(p.fast && bmax * p.six.by < 7.0f && bmax * p.four.by <= 4.5f &&
        sign_zeros_of<kN, kPairs>(x, pairs, p.four, ZeroSign::plus, signs)))
    return false;
  *scale = pick_four_over_six<kN, true>(r, x, signs, t.g, p, words);
  return true;
}

}  // namespace packed_detail

// The routes by which quantize_block_packed reaches a block's words, in the order it tries them
// (docs/recipes.md "Fast routes"). Its properties (packed/*/equals-quantize-block) record the route
// of every case and fail where one that the recipe can take got none.
enum class PackedRoute : std::uint8_t {
  four_over_six_usual,  // packed_detail::four_over_six_usual: lean g with its table, both candidates small
  four_over_six_words,  // packed_detail::four_over_six_words: another finite 4over6 block whose plans multiply
  lean_plan,            // a finite block, one plan from g's code table by reciprocals (two_level_plan_lean)
  plan,                 // a finite block, one plan by IEEE division (two_level_plan, plan_block)
  variant_lean_plan,    // an engine variant's finite block (has_packed_variant_form), lean: two_level_plan_lean
  variant_plan,         // another finite block of such a variant: its rule's plan (variant_plan)
  four_over_six_amax_usual,  // the four-over-six package's two-candidate rule on its usual block
                             // (packed_detail::four_over_six_amax_usual)
  quantize_block,       // quantize_block itself: no fast form, a NaN or inf block, or an unpackable plan
};
inline constexpr const char* kPackedRouteNames[] = {"four_over_six_usual", "four_over_six_words", "lean_plan",
                                                    "plan",                "variant_lean_plan",   "variant_plan",
                                                    "four_over_six_amax_usual", "quantize_block"};
inline const char* name_of(PackedRoute route) { return kPackedRouteNames[static_cast<int>(route)]; }

// Whether quantize_block_packed has a fast form for the recipe's elements (else it runs
// quantize_block for every block): 4-bit elements rounded half to even, or E2M1 half away.
KVQ_HD constexpr bool has_packed_fast_form(const Recipe& r) {
  const bool four_bit = r.element == FormatId::e2m1 || r.element == FormatId::int4;
  const bool rounding = r.element_rounding == Rounding::nearest_even ||
                        (r.element == FormatId::e2m1 && r.element_rounding == Rounding::nearest_away);
  return four_bit && rounding && !is_engine_variant(r);
}

// The element casts that write +0 for a zero value v = +-0 and are satfinite otherwise on a finite
// block (no NaN value there): ModelOpt's and compressed-tensors' sign from v < 0, block-FP4's count,
// and the four-over-six package's rounding while |v| < 7 (has_packed_variant_form).
KVQ_HD constexpr bool casts_zero_unsigned(const Recipe& r) {
  return r.element_cast == ElementCast::satfinite_unsigned_zero || r.element_cast == ElementCast::bounds_count ||
         r.element_cast == ElementCast::e2m1_by_rounding;
}
// How the recipe's cast signs a zero value on a finite block (packed_detail::ZeroSign).
KVQ_HD constexpr packed_detail::ZeroSign zero_sign_of(const Recipe& r) {
  if (casts_zero_unsigned(r)) return packed_detail::ZeroSign::plus;
  if (r.element_cast == ElementCast::satfinite_negative_zero) return packed_detail::ZeroSign::minus;
  return packed_detail::ZeroSign::of_x;
}

// Engine variants whose finite blocks quantize_block_packed packs (PackedRoute::variant_plan): E2M1
// elements, half to even (or half away or toward zero under a power-of-two scale), under the reference two-level
// rule (torchao, ModelOpt, compressed-tensors; elements divided IEEE or multiplied), the
// four-over-six package's one-candidate rule (TwoLevel::amax_encode) or a power-of-two rule with
// FP32 elements (block-FP4, ModelOpt's MXFP4), whose plan the recipe's own arithmetic gives
// (variant_plan), cast satfinite on a finite block (torchao's cast differs for a NaN value alone)
// but for a zero's sign (zero_sign_of). The package's rounding (e2m1_by_rounding, half to even) is that cast
// below 7 (7 rounds to 8 there): a block whose values may reach 7 goes to quantize_block.
KVQ_HD constexpr bool has_packed_variant_form(const Recipe& r) {
  const bool two_level = r.scale == BlockScale::e4m3_two_level &&
                         (r.two_level == TwoLevel::reference || r.two_level == TwoLevel::amax_encode) &&
                         r.division != Division::full_approx && r.element_rounding == Rounding::nearest_even;
  const bool pow2 = r.scale == BlockScale::e8m0_pow2 && r.scale_dtype == FormatId::fp32 &&
                    (r.element_rounding == Rounding::nearest_even ||
                     ((r.element_rounding == Rounding::nearest_away || r.element_rounding == Rounding::nearest_toward_zero) &&
                      r.element_cast != ElementCast::e2m1_by_rounding));
  return is_engine_variant(r) && r.element == FormatId::e2m1 && (two_level || pow2) && !r.element_input_bf16 &&
         (r.element_cast == ElementCast::satfinite || r.element_cast == ElementCast::torchao_e2m1 ||
          zero_sign_of(r) != packed_detail::ZeroSign::of_x);
}
// The plan of a finite block (max |x| = m, no NaN) of a recipe with has_packed_variant_form (g: the
// tensor parameter, amax itself for amax_encode).
KVQ_HD inline BlockPlan variant_plan(const Recipe& r, float g, float m) {
  if (r.scale == BlockScale::e8m0_pow2) return recipe_detail::pow2_plan(r, m);
  if (r.two_level == TwoLevel::amax_encode) return recipe_detail::amax_encode_plan(r, g, m, false);
  return recipe_detail::two_level_plan(r, g, m, element_max(r));
}

// The four-over-six package's two-candidate rule (TwoLevel::four_over_six_amax, its own rounding
// e2m1_by_rounding), whose usual blocks quantize_block_packed packs
// (PackedRoute::four_over_six_amax_usual), with a lean_tensor_divisor.
KVQ_HD constexpr bool has_packed_four_over_six_amax_form(const Recipe& r) {
  return r.scale == BlockScale::e4m3_two_level && r.two_level == TwoLevel::four_over_six_amax &&
         r.element == FormatId::e2m1 && r.element_cast == ElementCast::e2m1_by_rounding && !r.element_input_bf16 &&
         lean_tensor_divisor(r);
}

namespace packed_detail {

// The plan of a finite block of a recipe with has_packed_variant_form; lean: from g's table
// (two_level_plan_lean for the reference rule's variants, amax_encode_plan_lean for the package's
// one-candidate rule), else variant_plan.
KVQ_HD inline BlockPlan variant_plan_of(const Recipe& r, const GlobalTerms& t, float bmax, bool* lean) {
  BlockPlan p{};
  if (r.scale == BlockScale::e4m3_two_level && r.two_level == TwoLevel::amax_encode && lean_block(t, bmax) &&
      lean_tensor_divisor(r) && amax_encode_plan_lean(r, t, bmax, &p)) {
    *lean = true;
    return p;
  }
  *lean = lean_plan_of(r, t, bmax);
  return *lean ? two_level_plan_lean(r, t, bmax, element_max(r)) : variant_plan(r, t.g, bmax);
}

// A plan's words from the block's signs: q = x * by, or x / by by its reciprocal. False (nothing
// written) for the four-over-six package's rounding where some |q| may reach 7.
template <int kN>
KVQ_HD inline bool encode_plan_words(const Recipe& r, const BlockPlan& p, float m, const float* x,
                                     const std::uint32_t* signs, std::uint32_t* words) {
  const bool divide = p.op == ElementOp::divide;
  const float y = divide ? 1.0f / p.by : p.by;
  const Magnitude magnitude = block_magnitude(r, m, y);
  if (r.element_cast == ElementCast::e2m1_by_rounding && magnitude != Magnitude::e2m1_below_7) return false;
  if (divide) {
    encode_words<kN, true>(magnitude, x, signs, p.by, y, words);
  } else {
    encode_words<kN, false>(magnitude, x, signs, p.by, y, words);
  }
  return true;
}

}  // namespace packed_detail

// Unpacked 4-bit codes (one a byte) to words, element 8w + k in bits 4k..4k+3 of word w.
KVQ_HD inline void pack_codes(const std::uint8_t* codes, int n, std::uint32_t* words) {
  KVQ_UNROLL
  for (int w = 0; w < n / 8; ++w) {
    std::uint32_t word = 0;
    KVQ_UNROLL
    for (int k = 0; k < 8; ++k) word |= static_cast<std::uint32_t>(codes[8 * w + k] & 0xFu) << (4 * k);
    words[w] = word;
  }
}

// One block of kN values (a multiple of 8) of a 4-bit recipe: kN / 8 words (their little-endian
// bytes are the packed pairs, element 2i in the low nibble) and the scale code, always equal to
// quantize_block's codes packed.
// t: global_terms(g, codes), which kernels compute once for all their blocks (the table of g's code
// terms in shared memory); without a table the two-level plans divide (the same results).
// kPairs: x are BF16 or FP16 values and `pairs` their kN/2 words as loaded (element 2i in the low
// half; the kernels' 16-bit inputs): the block max and the signs from paired 16-bit operations
// (packed_detail::block_signs_and_max), the same results.
// route: where not null, the route the block took (the properties; kernels pass none, and the
// stores fold away).
template <int kN, PairWords kPairs = PairWords::none>
KVQ_HD KVQ_KERNEL_INLINE std::uint8_t quantize_block_packed(const Recipe& r, const GlobalTerms& t, const float* x,
                                                 std::uint32_t* words, const std::uint32_t* pairs = nullptr,
                                                 PackedRoute* route = nullptr) {
  static_assert(kN % 8 == 0 && kN <= kMaxRecipeBlock, "whole words");
  const auto took = [route](PackedRoute taken) {
    if (route != nullptr) *route = taken;
  };
  if (has_packed_fast_form(r)) {
    std::uint32_t signs[kN / 8];
    const float m = packed_detail::block_signs_and_max<kN, kPairs>(x, pairs, signs);
    if (r.scale == BlockScale::e4m3_two_level && r.two_level == TwoLevel::four_over_six) {
      std::uint8_t scale = 0;
      if (packed_detail::four_over_six_usual<kN>(r, t, x, signs, m, words, &scale)) {
        took(PackedRoute::four_over_six_usual);
        return scale;
      }
    }
    if (m <= kFp32Max) {  // finite: m is the block max, and no element is NaN
      if (r.scale == BlockScale::e4m3_two_level && r.two_level == TwoLevel::four_over_six) {
        std::uint8_t scale = 0;
        if (packed_detail::four_over_six_words<kN>(r, t, x, signs, m, words, &scale)) {
          took(PackedRoute::four_over_six_words);
          return scale;
        }
      } else {
        const BlockPlan p = packed_detail::plan_of(r, t, m, element_max(r));
        if (packed_detail::packable(p) && packed_detail::encode_plan_words<kN>(r, p, m, x, signs, words)) {
          took(packed_detail::lean_plan_of(r, t, m) ? PackedRoute::lean_plan : PackedRoute::plan);
          return p.scale_code;
        }
      }
    }
  } else if (has_packed_variant_form(r)) {
    std::uint32_t signs[kN / 8];
    const float m = packed_detail::block_signs_and_max<kN, kPairs>(x, pairs, signs);
    if (m <= kFp32Max) {  // finite: no element is NaN
      bool lean = false;  // the two-level variants', with g's table
      const BlockPlan p = packed_detail::variant_plan_of(r, t, m, &lean);
      const packed_detail::ZeroSign zero = zero_sign_of(r);
      if (packed_detail::packable(p) &&
          (zero == packed_detail::ZeroSign::of_x || packed_detail::sign_zeros_of<kN, kPairs>(x, pairs, p, zero, signs)) &&
          packed_detail::encode_plan_words<kN>(r, p, m, x, signs, words)) {
        took(lean ? PackedRoute::variant_lean_plan : PackedRoute::variant_plan);
        return p.scale_code;
      }
    }
  } else if (has_packed_four_over_six_amax_form(r)) {
    std::uint32_t signs[kN / 8];
    const float m = packed_detail::block_signs_and_max<kN, kPairs>(x, pairs, signs);
    std::uint8_t scale = 0;
    if (packed_detail::four_over_six_amax_usual<kN, kPairs>(r, t, x, pairs, signs, m, words, &scale)) {
      took(PackedRoute::four_over_six_amax_usual);
      return scale;
    }
  }
  // quantize_block on a copy of x: the engine variants' rules run out of line (KVQ_VARIANT_NOINLINE)
  // and take the values' address, which, given x itself, kept the kernels' values in local memory
  // on every route (a 64-byte store a block: docs/performance.md).
  float copy[kN];
  KVQ_UNROLL
  for (int i = 0; i < kN; ++i) copy[i] = x[i];
  std::uint8_t codes[kN];
  const std::uint8_t scale = quantize_block(r, t.g, copy, kN, codes);
  pack_codes(codes, kN, words);
  took(PackedRoute::quantize_block);
  return scale;
}

template <int kN>
KVQ_HD inline std::uint8_t quantize_block_packed(const Recipe& r, float g, const float* x, std::uint32_t* words,
                                                 PackedRoute* route = nullptr) {
  return quantize_block_packed<kN>(r, global_terms(g), x, words, nullptr, route);
}

}  // namespace kvq
