// Fused RoPE + FP8 E4M3 quantize + paged KV append (docs/rope.md; FlashInfer's
// paged-append semantics), and the unfused pair that must equal it byte for byte: RoPE + quantize
// into contiguous FP8 buffers, then a byte copy of K/V into the paged cache. Contract: docs/rope.md.
//
// Layouts (row-major, no padding; "heads" = q_heads for Q, kv_heads for K/V):
// - q_rope, k_rope [tokens, heads, rope_dim]; q_nope, k_nope [tokens, heads, nope_dim]; v (MHA)
//   [tokens, kv_heads, head_dim]; FP32 or BF16/FP16 bit patterns. head_dim = rope_dim + nope_dim.
// - cos_sin_cache [max_pos, rope_dim] FP32: cos of frequency f at column f, sin at rope_dim/2 + f.
// - Q outputs: q_rope_out [tokens, q_heads, rope_dim], q_nope_out [tokens, q_heads, nope_dim], E4M3.
// - MHA cache: k and v, [pages, page_size, kv_heads, head_dim] (NHD) or [pages, kv_heads, page_size,
//   head_dim] (HND), E4M3; a K head vector is [rope | nope]. MLA (kv_heads = 1): ckv [pages, page_size,
//   nope_dim] holds K-nope, kpe [pages, page_size, rope_dim] holds K-rope; no V.
// - The unfused pair's contiguous intermediate is the cache with one slot per token: MHA k, v
//   [tokens, kv_heads, head_dim]; MLA ckv [tokens, nope_dim], kpe [tokens, rope_dim].
// Token i of request b = batch_indices[i] (< 0: padding, nothing written, Q included) goes to
// page_iter, entry = divmod(kv_indptr[b] * page_size + positions[i], page_size), physical page
// kv_indices[page_iter]; it is rotated by the angles of row pos_ids[i] of the cache.
#pragma once

#include <bit>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "formats/fast_paths.hpp"
#include "kernels/quantize.hpp"
#include "kernels/status.hpp"

namespace kvq::kernels {

enum class RopeStyle : std::uint8_t { neox, gptj };  // rotate-half pairs (i, i + rot/2) or (2j, 2j + 1)
enum class KvLayout : std::uint8_t { nhd, hnd };
enum class Attention : std::uint8_t { mha, mla };
const char* name_of(RopeStyle s);
const char* name_of(KvLayout l);
const char* name_of(Attention a);

struct RopeShape {
  Attention attention = Attention::mha;
  DType input = DType::bf16;
  RopeStyle style = RopeStyle::neox;
  KvLayout layout = KvLayout::nhd;
  std::int64_t tokens = 0;            // nnz
  std::int64_t batch = 0;             // requests: kv_indptr has batch + 1 entries
  int q_heads = 0;
  int kv_heads = 0;                   // 1 for MLA
  int head_dim = 0;                   // rope_dim + nope_dim (MLA: 64 + 512); V's head dim (MHA)
  int rope_dim = 0;                   // rotated dimensions = cos_sin_cache columns (MLA: the kpe dim)
  std::int64_t max_pos = 0;           // cos_sin_cache rows
  int page_size = 0;
  std::int64_t num_pages = 0;         // pages the cache holds
  std::int64_t num_page_indices = 0;  // entries of kv_indices

  KVQ_HD bool mla() const { return attention == Attention::mla; }
  KVQ_HD int nope_dim() const { return head_dim - rope_dim; }
  KVQ_HD std::int64_t q_rope_bytes() const { return tokens * q_heads * rope_dim; }
  KVQ_HD std::int64_t q_nope_bytes() const { return tokens * q_heads * nope_dim(); }
  // Bytes of each cache buffer holding `slots` slots (pages * page_size, or tokens for the intermediate).
  KVQ_HD std::int64_t k_bytes(std::int64_t slots) const { return mla() ? 0 : slots * kv_heads * head_dim; }
  KVQ_HD std::int64_t v_bytes(std::int64_t slots) const { return k_bytes(slots); }
  KVQ_HD std::int64_t ckv_bytes(std::int64_t slots) const { return mla() ? slots * nope_dim() : 0; }
  KVQ_HD std::int64_t kpe_bytes(std::int64_t slots) const { return mla() ? slots * rope_dim : 0; }
  KVQ_HD std::int64_t cache_slots() const { return num_pages * page_size; }
};

struct RopeInputs {
  const void* q_rope = nullptr;
  const void* q_nope = nullptr;  // may be null when nope_dim = 0
  const void* k_rope = nullptr;
  const void* k_nope = nullptr;
  const void* v = nullptr;       // MHA only
  const float* cos_sin_cache = nullptr;
  const std::int32_t* pos_ids = nullptr;
  float quant_scale_q = 1.0f;    // E4M3 code = cvt_rn_satfinite(value * quant_scale)
  float quant_scale_kv = 1.0f;
};

struct QOutputs {
  std::uint8_t* q_rope = nullptr;
  std::uint8_t* q_nope = nullptr;
};

// A KV cache or the unfused pair's contiguous intermediate: MHA uses k, v; MLA uses ckv, kpe.
struct KvBuffers {
  std::uint8_t* k = nullptr;
  std::uint8_t* v = nullptr;
  std::uint8_t* ckv = nullptr;
  std::uint8_t* kpe = nullptr;
};

struct PageTable {
  const std::int32_t* kv_indptr = nullptr;      // [batch + 1]
  const std::int32_t* kv_indices = nullptr;     // [num_page_indices]
  const std::int32_t* batch_indices = nullptr;  // [tokens], < 0 = padding
  const std::int32_t* positions = nullptr;      // [tokens]
};

// Success when the shape (and the inputs' scales and pointers) are valid; otherwise a message naming the argument.
Status validate(const RopeShape& s);
Status validate(const RopeShape& s, const RopeInputs& in);
// Null pointers among the outputs and the page table ("what" names the buffer set: cache, contiguous;
// slots: its slot count, none needed when 0).
Status validate_q(const RopeShape& s, const QOutputs& q);
Status validate_buffers(const RopeShape& s, const KvBuffers& b, std::int64_t slots, const char* what);
Status validate_table(const RopeShape& s, const PageTable& t);
// The index arrays (host memory): kv_indptr, kv_indices, batch_indices, positions, pos_ids, and that
// no two tokens write the same slot. The CPU twins call it; for the GPU launchers, whose arrays live
// on the device, the caller runs it on host copies (the kernels skip a token they cannot place).
Status validate_indices(const RopeShape& s, const std::int32_t* pos_ids, const PageTable& t);

// CPU twins: the per-token and per-group code below, as the kernels run it. Return success, or an error with nothing written.
Status rope_append_cpu(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& cache,
                       const PageTable& t);
// Unfused (a): batch_indices may be null (every token); padding tokens write nothing.
Status rope_quantize_cpu(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& contiguous,
                         const std::int32_t* batch_indices);
// Unfused (b): copies the FP8 bytes of every non-padding token into its slot.
Status append_paged_cpu(const RopeShape& s, const KvBuffers& contiguous, const KvBuffers& cache,
                        const PageTable& t);

// ---- Per-element arithmetic (the FP32 model of docs/rope.md), identical on host and device ----

// IEEE binary32 operations rounded to nearest even, never contracted into an FMA.
KVQ_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;  // host: -ffp-contract=off, SSE arithmetic
#endif
}
KVQ_HD inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
KVQ_HD inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// One rotated element: RN(RN(x*c) - RN(partner*s)) for the first of a pair, RN(RN(x*c) + RN(partner*s))
// for the second. No FMA (FlashInfer's default build may contract; kvq's contract does not).
KVQ_HD inline float rope_rotate(float x, float partner, float c, float s, bool first_of_pair) {
  const float a = mul_rn(x, c), b = mul_rn(partner, s);
  return first_of_pair ? sub_rn(a, b) : add_rn(a, b);
}
KVQ_HD inline std::uint8_t quantize_e4m3(float value, float scale) { return e4m3_satfinite_fast(mul_rn(value, scale)); }

// ---- Work groups: what one thread does for one token ----
//
// A token's work is five parts, each a sequence of groups: Q rope (q_heads x rope groups), Q nope,
// K rope (kv_heads x rope groups), K nope (kv_heads x nope groups), V (MHA). A rope group rotates
// kRopePairs pairs (16 elements) at frequencies p0..: NeoX pairs (p, rope_dim/2 + p), GPT-J pairs
// (2p, 2p + 1), so every input element and each cos/sin value is loaded once per group. A plain group
// (nope, V) scales and converts rope_quant_span contiguous elements. A part whose heads lie contiguous
// in the input and in the output alike (Q nope; MLA K nope; V except in a paged HND cache) is one flat
// span of heads * dim elements (head 0): its groups may straddle heads, only its last group is short.
// A whole group runs compile-time code (registers only; on the device 16-byte loads and FP8 codes
// converted two per instruction into 16-, 8- or 4-byte stores; a NeoX group converted in two halves
// of 4 pairs, for registers, its 16-bit halves loaded and stored whole); a short group runs element
// by element (no arrays). Both compute each element with the same operations, so the bytes do not
// depend on the split. When every group of a launch is whole and aligned (rope_groups_whole) the
// kWhole code has neither tails nor alignment tests.

inline constexpr int kRopeQuantSpan = 32;  // elements of a nope / V group from 16-bit input: two 16-byte FP8 stores
// Elements of a nope / V group from input t: 32, or 16 from FP32 (one 16-byte store of codes, so that
// a warp's stores are contiguous across its lanes: from FP32, whose loads are twice as wide, two
// stores a lane at a lane stride of twice their width cost 12-14 points of copy; docs/performance.md).
KVQ_HD constexpr int rope_quant_span(DType t) { return t == DType::fp32 ? kRopeQuantSpan / 2 : kRopeQuantSpan; }
inline constexpr int kRopePairs = 8;       // rotation pairs of a rope group: 16 elements

enum class RopePart : std::uint8_t { q, k, v };

struct RopeGroup {
  RopePart part = RopePart::q;
  bool rope = false;  // rope or nope part (V: false)
  int head = 0;       // 0 in a flat part
  int first = 0;      // first element (rope: first pair) within the head vector or the flat span
  int count = 0;      // 1..rope_quant_span elements, or 1..kRopePairs pairs
};

// A token's parts, in order: Q rope, Q nope, K rope, K nope, V. A part is `heads` vectors of
// `length` elements (rope: pairs), `per_head` groups each. `paged`: the fused kernel and the append,
// whose V is per head in an HND cache; the contiguous intermediate's V is flat.
struct RopePartShape {
  int heads = 0, per_head = 0, length = 0;
  int span = 0;  // elements (rope: pairs) of a whole group
  int shift = -1;  // log2(per_head) when a power of two (rope parts of rope_dim 16, 32, 64, 128, 256), else -1
  KVQ_HD int groups() const { return heads * per_head; }
};
struct RopeParts {
  RopePartShape q_rope, q_nope, k_rope, k_nope, v;  // v: no groups for MLA
};

// log2(n) when n > 0 is a power of two, else -1.
KVQ_HD inline int exact_log2(int n) {
  if (n <= 0 || (n & (n - 1)) != 0) return -1;
#if defined(__CUDA_ARCH__)
  return __popc(n - 1);
#else
  return std::popcount(static_cast<unsigned>(n - 1));
#endif
}

KVQ_HD inline RopePartShape rope_part(int heads, int length, int span) {
  const int per_head = (length + span - 1) / span;
  return {heads, per_head, length, span, exact_log2(per_head)};
}
// `span`: the plain groups' elements, rope_quant_span(s.input) for the kernels that read the input;
// the append (append_parts), which copies FP8 codes, takes kRopeQuantSpan whatever the input was.
KVQ_HD inline RopeParts rope_parts(const RopeShape& s, bool paged, int span) {
  const int pairs = s.rope_dim / 2;
  const bool v_flat = !paged || s.layout == KvLayout::nhd;
  RopeParts p;
  p.q_rope = rope_part(s.q_heads, pairs, kRopePairs);
  p.q_nope = rope_part(1, s.q_heads * s.nope_dim(), span);
  p.k_rope = rope_part(s.kv_heads, pairs, kRopePairs);
  p.k_nope = rope_part(s.kv_heads, s.nope_dim(), span);
  if (!s.mla()) p.v = v_flat ? rope_part(1, s.kv_heads * s.head_dim, span) : rope_part(s.kv_heads, s.head_dim, span);
  return p;
}
KVQ_HD inline RopeParts rope_parts(const RopeShape& s, bool paged) { return rope_parts(s, paged, rope_quant_span(s.input)); }
// The append's parts (paged): 32-byte plain groups of codes (measured faster than 16 bytes a lane).
KVQ_HD inline RopeParts append_parts(const RopeShape& s) { return rope_parts(s, true, kRopeQuantSpan); }

// Group k (0 <= k < p.groups()) of a part; one head (a flat part, MLA K) or a power-of-two number of
// groups a head needs no division.
template <RopePart kPart, bool kRope>
KVQ_HD inline RopeGroup part_group(const RopePartShape& p, int k) {
  const int span = kRope ? kRopePairs : p.span;
  RopeGroup it;
  it.part = kPart;
  it.rope = kRope;
  it.head = p.heads == 1   ? 0
            : p.shift >= 0 ? k >> p.shift
                           : static_cast<int>(static_cast<unsigned>(k) / static_cast<unsigned>(p.per_head));
  it.first = (k - it.head * p.per_head) * span;
  it.count = p.length - it.first < span ? p.length - it.first : span;
  return it;
}

// The E4M3 codes of the kN scaled values y at dst, four a word, streamed (kAligned: dst is aligned
// to 16 bytes, or to its size when kN < 16; not checked).
template <int kN, bool kAligned>
KVQ_HD inline void store_e4m3(std::uint8_t* dst, const float* y) {
  if constexpr (kN % 4 == 0) {
    std::uint32_t words[kN / 4];
    KVQ_UNROLL
    for (int k = 0; k < kN / 4; ++k) words[k] = e4m3x4_satfinite_fast(y + 4 * k);
    io::store_words<true, kAligned ? 16 : 1>(dst, words, kN / 4);
  } else {
    KVQ_UNROLL
    for (int i = 0; i < kN; ++i) dst[i] = e4m3_satfinite_fast(y[i]);
  }
}

// The group's source: element 0 of its head vector in its input tensor (a flat part: of the token's
// heads) and its quant scale. The offset is the token's (the same for all its groups) plus the head's.
struct GroupSource {
  const void* src = nullptr;
  float scale = 1.0f;
};
KVQ_HD inline GroupSource group_source(const RopeShape& s, const RopeInputs& in, std::int64_t token,
                                       const RopeGroup& it) {
  const int heads = it.part == RopePart::q ? s.q_heads : s.kv_heads;
  const int dim = it.part == RopePart::v ? s.head_dim : (it.rope ? s.rope_dim : s.nope_dim());
  GroupSource r;
  r.scale = it.part == RopePart::q ? in.quant_scale_q : in.quant_scale_kv;
  const void* tensor = it.part == RopePart::v ? in.v
                       : it.part == RopePart::q ? (it.rope ? in.q_rope : in.q_nope)
                                                : (it.rope ? in.k_rope : in.k_nope);
  const int bytes = bytes_of(s.input);
  r.src = static_cast<const unsigned char*>(tensor) + token * (std::int64_t{heads} * dim * bytes) +
          std::int64_t{it.head} * dim * bytes;
  return r;
}

// A plain group's FP8 codes: E4M3(RN(x * scale)) of elements [first, first + kN) of src into out[0..kN);
// kN = 0: count elements, one by one. kAligned: as io::load_values and store_e4m3.
template <int kN, bool kAligned>
KVQ_HD inline void quantize_group(DType t, const void* src, std::int64_t first, int count, float scale,
                                  std::uint8_t* out) {
  if constexpr (kN > 0) {
    float y[kN];
    io::load_values<true, kAligned>(t, src, first, kN, y);
    KVQ_UNROLL
    for (int i = 0; i < kN; ++i) y[i] = mul_rn(y[i], scale);
    store_e4m3<kN, kAligned>(out, y);
  } else {
    for (int i = 0; i < count; ++i) out[i] = quantize_e4m3(load_value(t, src, first + i), scale);
  }
}

// A rope group's FP8 codes, written into `out` (element 0 of its rope output vector): load, rotate,
// scale, convert. Pair p (frequency p) is (p, rope_dim/2 + p) for NeoX, (2p, 2p + 1) for GPT-J.
// kN = kRopePairs: a whole group; kN = 0: it.count pairs, one by one. kAligned: as io::load_values and
// store_e4m3.
template <int kN, bool kAligned>
KVQ_HD inline void rotate_group(const RopeShape& s, const GroupSource& src, const float* cos_sin, const RopeGroup& it,
                                std::uint8_t* out) {
  const int half = s.rope_dim / 2, p0 = it.first;
  if (s.style == RopeStyle::neox) {
    if constexpr (kN > 0) {
      // Each half's kN codes in one 8-byte store and, with 16-bit input, its kN values in one 16-byte
      // load, so that a warp's accesses are contiguous across its lanes (halves of kSub pairs stored
      // and loaded at a time left every access a lane stride of twice its width: docs/performance.md).
      // FP32 halves load kSub values at a time (16 bytes, a lane's widest load).
      constexpr int kSub = kN / 2;  // pairs converted at a time (registers)
      static_assert(kSub == 4);
      std::uint32_t lo_words[kN / 2], hi_words[kN / 2], lo_codes[kN / 4], hi_codes[kN / 4];
      if (s.input != DType::fp32) {
        io::load_pair_words<kN, kAligned>(src.src, p0, lo_words);
        io::load_pair_words<kN, kAligned>(src.src, half + p0, hi_words);
      }
      KVQ_UNROLL
      for (int q = 0; q < kN; q += kSub) {
        float lo[kSub], hi[kSub], c[kSub], sn[kSub], y_lo[kSub], y_hi[kSub];
        if (s.input != DType::fp32) {
          io::unpack_pair_words<kSub>(s.input, lo_words + q / 2, lo);
          io::unpack_pair_words<kSub>(s.input, hi_words + q / 2, hi);
        } else {
          io::load_values<true, kAligned>(s.input, src.src, p0 + q, kSub, lo);
          io::load_values<true, kAligned>(s.input, src.src, half + p0 + q, kSub, hi);
        }
        io::load_readonly_floats<kAligned>(cos_sin + p0 + q, kSub, c);
        io::load_readonly_floats<kAligned>(cos_sin + half + p0 + q, kSub, sn);
        KVQ_UNROLL
        for (int i = 0; i < kSub; ++i) {
          y_lo[i] = mul_rn(rope_rotate(lo[i], hi[i], c[i], sn[i], true), src.scale);
          y_hi[i] = mul_rn(rope_rotate(hi[i], lo[i], c[i], sn[i], false), src.scale);
        }
        lo_codes[q / kSub] = e4m3x4_satfinite_fast(y_lo);
        hi_codes[q / kSub] = e4m3x4_satfinite_fast(y_hi);
      }
      io::store_words<true, kAligned ? 8 : 1>(out + p0, lo_codes, kN / 4);
      io::store_words<true, kAligned ? 8 : 1>(out + half + p0, hi_codes, kN / 4);
    } else {
      for (int p = p0; p < p0 + it.count; ++p) {
        const float lo = load_value(s.input, src.src, p);
        const float hi = load_value(s.input, src.src, half + p);
        const float c = io::load_readonly(cos_sin + p), sn = io::load_readonly(cos_sin + half + p);
        out[p] = quantize_e4m3(rope_rotate(lo, hi, c, sn, true), src.scale);
        out[half + p] = quantize_e4m3(rope_rotate(hi, lo, c, sn, false), src.scale);
      }
    }
    return;
  }
  if constexpr (kN > 0) {
    float x[2 * kN], c[kN], sn[kN], y[2 * kN];
    io::load_values<true, kAligned>(s.input, src.src, 2 * p0, 2 * kN, x);
    io::load_readonly_floats<kAligned>(cos_sin + p0, kN, c);
    io::load_readonly_floats<kAligned>(cos_sin + half + p0, kN, sn);
    KVQ_UNROLL
    for (int i = 0; i < kN; ++i) {
      y[2 * i] = mul_rn(rope_rotate(x[2 * i], x[2 * i + 1], c[i], sn[i], true), src.scale);
      y[2 * i + 1] = mul_rn(rope_rotate(x[2 * i + 1], x[2 * i], c[i], sn[i], false), src.scale);
    }
    store_e4m3<2 * kN, kAligned>(out + 2 * p0, y);
  } else {
    for (int p = p0; p < p0 + it.count; ++p) {
      const float x0 = load_value(s.input, src.src, 2 * p);
      const float x1 = load_value(s.input, src.src, 2 * p + 1);
      const float c = io::load_readonly(cos_sin + p), sn = io::load_readonly(cos_sin + half + p);
      out[2 * p] = quantize_e4m3(rope_rotate(x0, x1, c, sn, true), src.scale);
      out[2 * p + 1] = quantize_e4m3(rope_rotate(x1, x0, c, sn, false), src.scale);
    }
  }
}

// ---- Where a token's K/V go ----

// The slot of token i in the paged cache, or false: padding, or an index the kernel cannot honour
// (validate_indices rejects those on the host; the kernel skips them rather than write out of bounds).
// page_iter = kv_indptr[b] + positions[i] / page_size, entry = positions[i] % page_size: the divmod of
// kv_indptr[b] * page_size + positions[i] (positions >= 0), in 32-bit division.
KVQ_HD inline bool token_slot(const RopeShape& s, const PageTable& t, std::int64_t i, std::int64_t* page,
                              std::int64_t* entry) {
  const std::int32_t b = t.batch_indices[i], position = t.positions[i];
  if (b < 0 || b >= s.batch || position < 0) return false;
  const std::int32_t start = t.kv_indptr[b];
  const std::int64_t page_iter = std::int64_t{start} + position / s.page_size;
  if (start < 0 || page_iter >= t.kv_indptr[b + 1] || page_iter >= s.num_page_indices) return false;
  *page = t.kv_indices[page_iter];
  *entry = position % s.page_size;
  return *page >= 0 && *page < s.num_pages;
}

// A token writes its Q only when it is not padding and its pos_id is a row of the cache.
KVQ_HD inline bool token_rotates(const RopeShape& s, const RopeInputs& in, const std::int32_t* batch_indices,
                                 std::int64_t i) {
  return (batch_indices == nullptr || batch_indices[i] >= 0) && in.pos_ids[i] >= 0 && in.pos_ids[i] < s.max_pos;
}

// The head vector index of (slot, head): paged (NHD or HND), or (paged = false, page = token) [tokens, kv_heads].
KVQ_HD inline std::int64_t kv_vector(const RopeShape& s, bool paged, std::int64_t page, std::int64_t entry, int head) {
  if (!paged) return page * s.kv_heads + head;
  if (s.layout == KvLayout::nhd) return (page * s.page_size + entry) * s.kv_heads + head;
  return (page * s.kv_heads + head) * s.page_size + entry;
}

// Element 0 of a K/V group's output vector (its rope / nope / V part; a flat part: of the slot's
// heads). MHA K is [rope | nope]; MLA K-rope goes to kpe, K-nope to ckv.
// The vector index is vector + head_vectors (a slot's first head and the head's distance from it).
KVQ_HD inline std::uint8_t* kv_destination(const RopeShape& s, const KvBuffers& b, std::int64_t vector,
                                           const RopeGroup& it, std::int64_t head_vectors = 0) {
  const int dim = s.mla() ? (it.rope ? s.rope_dim : s.nope_dim()) : s.head_dim;
  std::uint8_t* base =
      s.mla() ? (it.rope ? b.kpe : b.ckv) : it.part == RopePart::v ? b.v : b.k + (it.rope ? 0 : s.rope_dim);
  return base + vector * dim + head_vectors * dim;
}
KVQ_HD inline std::uint8_t* q_destination(const RopeShape& s, const QOutputs& q, std::int64_t token,
                                          const RopeGroup& it) {
  const int dim = it.rope ? s.rope_dim : s.nope_dim();
  return (it.rope ? q.q_rope : q.q_nope) + token * (std::int64_t{s.q_heads} * dim) + std::int64_t{it.head} * dim;
}

// Where one token goes: false for padding or an index the kernel cannot honour (nothing written, Q
// included); else its K/V vectors kv_vector(slot, head) = vector + head * head_stride (paged = false:
// the contiguous intermediate, slot = token) and its cos/sin row.
struct TokenTarget {
  std::int64_t vector = 0;
  int head_stride = 1;
  const float* cos_sin = nullptr;
};
KVQ_HD inline bool token_target(const RopeShape& s, const RopeInputs& in, const PageTable& t, bool paged,
                                std::int64_t token, TokenTarget* at) {
  if (!token_rotates(s, in, t.batch_indices, token)) return false;
  std::int64_t page = token, entry = 0;
  if (paged && !token_slot(s, t, token, &page, &entry)) return false;
  at->vector = kv_vector(s, paged, page, entry, 0);
  at->head_stride = paged && s.layout == KvLayout::hnd ? s.page_size : 1;
  at->cos_sin = in.cos_sin_cache + static_cast<std::int64_t>(in.pos_ids[token]) * s.rope_dim;
  return true;
}

// True when every group is whole and its vector loads and stores aligned (NeoX half codes: 8 bytes):
// rope_dim and head_dim multiples of 32 (so nope_dim too: whole plain groups) and
// every buffer 16-byte aligned. The kernels and the CPU twins then run the kWhole code: no tail
// groups, no alignment tests.
inline bool rope_groups_whole(const RopeShape& s, std::initializer_list<const void*> buffers) {
  if (s.rope_dim % kRopeQuantSpan != 0 || s.head_dim % kRopeQuantSpan != 0) return false;
  for (const void* b : buffers)
    if (reinterpret_cast<std::uintptr_t>(b) % 16 != 0) return false;
  return true;
}

inline bool rope_groups_whole(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& out) {
  return rope_groups_whole(s, {in.q_rope, in.q_nope, in.k_rope, in.k_nope, in.v, in.cos_sin_cache, q.q_rope, q.q_nope,
                               out.k, out.v, out.ckv, out.kpe});
}

// One group of the fused kernel, or (the contiguous intermediate's target) of the unfused RoPE +
// quantize kernel. kWhole: rope_groups_whole held.
template <bool kWhole>
KVQ_HD inline void rope_group_work(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& out,
                                   std::int64_t token, const TokenTarget& at, const RopeGroup& it) {
  const GroupSource src = group_source(s, in, token, it);
  std::uint8_t* dst = it.part == RopePart::q
                          ? q_destination(s, q, token, it)
                          : kv_destination(s, out, at.vector, it, std::int64_t{at.head_stride} * it.head);
  if (!it.rope) {
    if (s.input == DType::fp32 && (kWhole || it.count == rope_quant_span(DType::fp32))) {
      quantize_group<rope_quant_span(DType::fp32), kWhole>(s.input, src.src, it.first, it.count, src.scale, dst + it.first);
    } else if (s.input != DType::fp32 && (kWhole || it.count == kRopeQuantSpan)) {
      quantize_group<kRopeQuantSpan, kWhole>(s.input, src.src, it.first, it.count, src.scale, dst + it.first);
    } else {
      quantize_group<0, false>(s.input, src.src, it.first, it.count, src.scale, dst + it.first);
    }
  } else if (kWhole || it.count == kRopePairs) {
    rotate_group<kRopePairs, kWhole>(s, src, at.cos_sin, it, dst);
  } else {
    rotate_group<0, false>(s, src, at.cos_sin, it, dst);
  }
}

// Groups lane, lane + lanes, ... of each part of one token: the token's warps' lanes on the device
// (lanes = 32 x rope_warps_per_token), all of them on the host (lane 0, lanes 1). Each part is its own loop, so a loop's group code is
// either a rope or a plain group's, known at compile time.
template <RopePart kPart, bool kRope, bool kWhole>
KVQ_HD inline void rope_part_work(const RopeShape& s, const RopePartShape& p, const RopeInputs& in, const QOutputs& q,
                                  const KvBuffers& out, std::int64_t token, const TokenTarget& at, int lane,
                                  int lanes) {
  for (int k = lane; k < p.groups(); k += lanes)
    rope_group_work<kWhole>(s, in, q, out, token, at, part_group<kPart, kRope>(p, k));
}
template <bool kWhole>
KVQ_HD inline void rope_token_work(const RopeShape& s, const RopeParts& p, const RopeInputs& in, const QOutputs& q,
                                   const KvBuffers& out, const PageTable& t, bool paged, std::int64_t token, int lane,
                                   int lanes) {
  TokenTarget at;
  if (!token_target(s, in, t, paged, token, &at)) return;
  rope_part_work<RopePart::q, true, kWhole>(s, p.q_rope, in, q, out, token, at, lane, lanes);
  rope_part_work<RopePart::q, false, kWhole>(s, p.q_nope, in, q, out, token, at, lane, lanes);
  rope_part_work<RopePart::k, true, kWhole>(s, p.k_rope, in, q, out, token, at, lane, lanes);
  rope_part_work<RopePart::k, false, kWhole>(s, p.k_nope, in, q, out, token, at, lane, lanes);
  rope_part_work<RopePart::v, false, kWhole>(s, p.v, in, q, out, token, at, lane, lanes);
}

// Unfused (b): a K/V group (paged groups) copies its bytes from the contiguous intermediate into the
// cache.
KVQ_HD inline void append_group_work(const RopeShape& s, const KvBuffers& contiguous, const KvBuffers& cache,
                                     std::int64_t token, std::int64_t page, std::int64_t entry, const RopeGroup& it) {
  const std::uint8_t* src = kv_destination(s, contiguous, kv_vector(s, false, token, 0, it.head), it);
  std::uint8_t* dst = kv_destination(s, cache, kv_vector(s, true, page, entry, it.head), it);
  // A rope group of pairs [first, first + count) copies bytes [2 first, 2 (first + count)) in either
  // style: the rope groups of a vector tile it alike, and the copy moves bytes, not pairs (NeoX's
  // pairs would be two spans of count bytes, half the vector apart).
  if (it.rope) {
    io::copy_bytes(src + 2 * it.first, dst + 2 * it.first, 2 * it.count);
  } else {
    io::copy_bytes(src + it.first, dst + it.first, it.count);
  }
}

// The K/V groups of one token (paged parts), lanes as in rope_token_work but over the three parts in
// one sequence, so a warp's lanes are not left idle by a short part (MLA: 4 K rope + 16 K nope groups
// in one round); padding writes nothing.
KVQ_HD inline int append_groups(const RopeParts& p) { return p.k_rope.groups() + p.k_nope.groups() + p.v.groups(); }
KVQ_HD inline RopeGroup append_group(const RopeParts& p, int k) {  // k < append_groups(p)
  const int rope_end = p.k_rope.groups(), nope_end = rope_end + p.k_nope.groups();
  return k < rope_end   ? part_group<RopePart::k, true>(p.k_rope, k)
         : k < nope_end ? part_group<RopePart::k, false>(p.k_nope, k - rope_end)
                        : part_group<RopePart::v, false>(p.v, k - nope_end);
}
KVQ_HD inline void append_token_groups(const RopeShape& s, const RopeParts& p, const KvBuffers& contiguous,
                                       const KvBuffers& cache, std::int64_t token, std::int64_t page, std::int64_t entry,
                                       int lane, int lanes) {
  for (int k = lane; k < append_groups(p); k += lanes) append_group_work(s, contiguous, cache, token, page, entry, append_group(p, k));
}
// The same, the token's slot looked up first (the CPU twin; the kernel looks up the slots of
// several tokens at once, a lane each, and then runs append_group_work on their groups).
KVQ_HD inline void append_token_work(const RopeShape& s, const RopeParts& p, const KvBuffers& contiguous,
                                     const KvBuffers& cache, const PageTable& t, std::int64_t token, int lane,
                                     int lanes) {
  std::int64_t page = 0, entry = 0;
  if (token_slot(s, t, token, &page, &entry)) append_token_groups(s, p, contiguous, cache, token, page, entry, lane, lanes);
}

// The rope kernel's warps a token (2, 4 or 8 of a block's 8), for `tokens` tokens on a GPU of `sms`
// SMs: the fewest that still give the grid one wave of 4 blocks an SM. Two warps a token keep a
// lane's rounds few on large batches; a small batch gets more warps a token, hence more blocks,
// instead of leaving SMs idle (docs/rope.md "Speed").
inline int rope_warps_per_token(std::int64_t tokens, int sms) {
  const std::int64_t wanted = std::int64_t{sms > 0 ? sms : 1} * 4;
  for (const int warps : {2, 4})
    if ((tokens * warps + 7) / 8 >= wanted) return warps;
  return 8;
}

// GPU: device pointers, an opaque cudaStream_t; a Status: success or the CUDA / validation error. The index arrays
// are not read on the host (validate_indices checks host copies).
// warps_per_token: 0 lets rope_warps_per_token choose; 2, 4 or 8 force it (the property suite runs each).
namespace device {
Status rope_append(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& cache,
                   const PageTable& t, void* stream, int warps_per_token = 0);
Status rope_quantize(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& contiguous,
                     const std::int32_t* batch_indices, void* stream, int warps_per_token = 0);
Status append_paged(const RopeShape& s, const KvBuffers& contiguous, const KvBuffers& cache, const PageTable& t,
                    void* stream);
}  // namespace device

}  // namespace kvq::kernels
