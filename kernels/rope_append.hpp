// Fused RoPE + FP8 E4M3 quantize + paged KV append (system S4 of REFERENCE.md, FlashInfer's
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

#include <cstdint>
#include <string>

#include "formats/fast_paths.hpp"
#include "kernels/quantize.hpp"

namespace kvq::kernels {

enum class RopeStyle : std::uint8_t { neox, gptj };  // rotate-half pairs (i, i + rot/2) or (2j, 2j + 1)
enum class KvLayout : std::uint8_t { nhd, hnd };
enum class Attention : std::uint8_t { mha, mla };
const char* name_of(RopeStyle s);
const char* name_of(KvLayout l);
const char* name_of(Attention a);

inline constexpr int kRopeChunk = 16;  // elements one thread handles (NeoX rope: frequencies, 2x16 elements)

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

// "" when the shape (and the inputs' scales and pointers) are valid; otherwise a message naming the argument.
std::string validate(const RopeShape& s);
std::string validate(const RopeShape& s, const RopeInputs& in);
// Null pointers among the outputs and the page table ("what" names the buffer set: cache, contiguous;
// slots: its slot count, none needed when 0).
std::string validate_q(const RopeShape& s, const QOutputs& q);
std::string validate_buffers(const RopeShape& s, const KvBuffers& b, std::int64_t slots, const char* what);
std::string validate_table(const RopeShape& s, const PageTable& t);
// The index arrays (host memory): kv_indptr, kv_indices, batch_indices, positions, pos_ids, and that
// no two tokens write the same slot. The CPU twins call it; for the GPU launchers, whose arrays live
// on the device, the caller runs it on host copies (the kernels skip a token they cannot place).
std::string validate_indices(const RopeShape& s, const std::int32_t* pos_ids, const PageTable& t);

// CPU twins: the per-item code below, as the kernels run it. Return "" or an error (nothing written).
std::string rope_append_cpu(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& cache,
                            const PageTable& t);
// Unfused (a): batch_indices may be null (every token); padding tokens write nothing.
std::string rope_quantize_cpu(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& contiguous,
                              const std::int32_t* batch_indices);
// Unfused (b): copies the FP8 bytes of every non-padding token into its slot.
std::string append_paged_cpu(const RopeShape& s, const KvBuffers& contiguous, const KvBuffers& cache,
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

// ---- Work items: one (tensor, head, chunk) of one token ----
//
// A chunk is kRopeChunk contiguous elements (nope, V, GPT-J rope: 8 whole pairs), except a NeoX rope
// chunk: kRopeChunk frequencies f0.., i.e. elements [f0, f0 + n) and their partners [half + f0, ..),
// so every input element is loaded once and each cos/sin value once per item. Whole chunks run
// compile-time code (registers only, 16-byte vectors on the device); a shorter tail chunk runs
// element by element (no arrays). Both compute each element with the same operations.

enum class RopePart : std::uint8_t { q, k, v };

struct RopeItem {
  RopePart part = RopePart::q;
  bool rope = false;  // rope or nope part (V: false)
  int head = 0;
  int first = 0;      // first element (NeoX rope: first frequency) within the rope / nope / V vector
  int count = 0;      // 1..kRopeChunk elements (NeoX rope: frequencies)
};

KVQ_HD inline int chunks_of(int n) { return (n + kRopeChunk - 1) / kRopeChunk; }
// The span a rope item's `first` and `count` index: frequencies (NeoX) or elements (GPT-J; chunks start even).
KVQ_HD inline int rope_segment(const RopeShape& s) { return s.style == RopeStyle::neox ? s.rope_dim / 2 : s.rope_dim; }
KVQ_HD inline int rope_chunks(const RopeShape& s) { return chunks_of(rope_segment(s)); }
KVQ_HD inline int head_chunks(const RopeShape& s) { return rope_chunks(s) + chunks_of(s.nope_dim()); }
KVQ_HD inline int items_per_token(const RopeShape& s) {
  const int kv = s.mla() ? head_chunks(s) : s.kv_heads * (head_chunks(s) + chunks_of(s.head_dim));
  return s.q_heads * head_chunks(s) + kv;
}

// Item k (0 <= k < items_per_token) of a token: Q heads first, then K heads, then V heads.
KVQ_HD inline RopeItem rope_item(const RopeShape& s, int k) {
  RopeItem it;
  const int per_head = head_chunks(s);
  if (k < s.q_heads * per_head) {
    it.part = RopePart::q;
  } else {
    k -= s.q_heads * per_head;
    it.part = k < s.kv_heads * per_head ? RopePart::k : RopePart::v;
    if (it.part == RopePart::v) k -= s.kv_heads * per_head;
  }
  const int chunks = it.part == RopePart::v ? chunks_of(s.head_dim) : per_head;
  it.head = k / chunks;
  int c = k - it.head * chunks, length = s.head_dim;  // V: the whole head vector
  if (it.part != RopePart::v) {
    it.rope = c < rope_chunks(s);
    if (it.rope) {
      length = rope_segment(s);
    } else {
      c -= rope_chunks(s);
      length = s.nope_dim();
    }
  }
  it.first = c * kRopeChunk;
  it.count = length - it.first < kRopeChunk ? length - it.first : kRopeChunk;
  return it;
}

// n cos or sin values. Every head of a token reads the same row, so through the cache (the inputs'
// loads are streamed: read once).
KVQ_HD inline void load_cos_sin(const float* p, int n, float* out) {
#if defined(__CUDA_ARCH__)
  if (io::aligned(p, 16) && n % 4 == 0) {
    KVQ_UNROLL
    for (int k = 0; k < n / 4; ++k) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(p) + k);
      out[4 * k] = v.x;
      out[4 * k + 1] = v.y;
      out[4 * k + 2] = v.z;
      out[4 * k + 3] = v.w;
    }
    return;
  }
#endif
  KVQ_UNROLL
  for (int i = 0; i < n; ++i) out[i] = p[i];
}
KVQ_HD inline float cos_sin_at(const float* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

// The item's source: its input tensor, the first element of its head vector, its quant scale.
struct ItemSource {
  const void* src = nullptr;
  std::int64_t row = 0;
  float scale = 1.0f;
};
KVQ_HD inline ItemSource item_source(const RopeShape& s, const RopeInputs& in, std::int64_t token, const RopeItem& it) {
  const int heads = it.part == RopePart::q ? s.q_heads : s.kv_heads;
  const int dim = it.part == RopePart::v ? s.head_dim : (it.rope ? s.rope_dim : s.nope_dim());
  ItemSource r;
  r.scale = it.part == RopePart::q ? in.quant_scale_q : in.quant_scale_kv;
  r.src = it.part == RopePart::v ? in.v
          : it.part == RopePart::q ? (it.rope ? in.q_rope : in.q_nope)
                                   : (it.rope ? in.k_rope : in.k_nope);
  r.row = (token * heads + it.head) * dim;
  return r;
}

// The item's FP8 codes, written into `out` (element 0 of its rope / nope / V output vector): load,
// rotate (rope part), scale, convert. Element j of the rope vector uses frequency f = j mod rope_dim/2
// (NeoX) or j/2 (GPT-J) and the partner element of its pair. kN = kRopeChunk: a whole chunk;
// kN = 0: it.count, element by element.
template <int kN>
KVQ_HD inline void rope_quantize_chunk(const RopeShape& s, const RopeInputs& in, std::int64_t token, const RopeItem& it,
                                       std::uint8_t* out) {
  const ItemSource src = item_source(s, in, token, it);
  const int f0 = it.first;
  if (!it.rope) {
    if constexpr (kN > 0) {
      float x[kN];
      std::uint8_t codes[kN];
      io::load_values(s.input, src.src, src.row + f0, kN, x);
      KVQ_UNROLL
      for (int i = 0; i < kN; ++i) codes[i] = quantize_e4m3(x[i], src.scale);
      io::store_bytes(out + f0, codes, kN);
    } else {
      for (int i = f0; i < f0 + it.count; ++i) out[i] = quantize_e4m3(load_value(s.input, src.src, src.row + i), src.scale);
    }
    return;
  }
  const int half = s.rope_dim / 2;
  const float* cos_sin = in.cos_sin_cache + static_cast<std::int64_t>(in.pos_ids[token]) * s.rope_dim;
  if (s.style == RopeStyle::neox) {  // element f (first half) pairs with half + f, both at frequency f
    if constexpr (kN > 0) {
      float lo[kN], hi[kN], c[kN], sn[kN];
      std::uint8_t codes_lo[kN], codes_hi[kN];
      io::load_values(s.input, src.src, src.row + f0, kN, lo);
      io::load_values(s.input, src.src, src.row + half + f0, kN, hi);
      load_cos_sin(cos_sin + f0, kN, c);
      load_cos_sin(cos_sin + half + f0, kN, sn);
      KVQ_UNROLL
      for (int i = 0; i < kN; ++i) {
        codes_lo[i] = quantize_e4m3(rope_rotate(lo[i], hi[i], c[i], sn[i], true), src.scale);
        codes_hi[i] = quantize_e4m3(rope_rotate(hi[i], lo[i], c[i], sn[i], false), src.scale);
      }
      io::store_bytes(out + f0, codes_lo, kN);
      io::store_bytes(out + half + f0, codes_hi, kN);
    } else {
      for (int f = f0; f < f0 + it.count; ++f) {
        const float lo = load_value(s.input, src.src, src.row + f);
        const float hi = load_value(s.input, src.src, src.row + half + f);
        const float c = cos_sin_at(cos_sin + f), sn = cos_sin_at(cos_sin + half + f);
        out[f] = quantize_e4m3(rope_rotate(lo, hi, c, sn, true), src.scale);
        out[half + f] = quantize_e4m3(rope_rotate(hi, lo, c, sn, false), src.scale);
      }
    }
    return;
  }
  if constexpr (kN > 0) {  // GPT-J: elements (2j, 2j + 1) at frequency j
    float x[kN], c[kN / 2], sn[kN / 2];
    std::uint8_t codes[kN];
    io::load_values(s.input, src.src, src.row + f0, kN, x);
    load_cos_sin(cos_sin + f0 / 2, kN / 2, c);
    load_cos_sin(cos_sin + half + f0 / 2, kN / 2, sn);
    KVQ_UNROLL
    for (int i = 0; i < kN; ++i)
      codes[i] = quantize_e4m3(rope_rotate(x[i], x[i ^ 1], c[i / 2], sn[i / 2], (i & 1) == 0), src.scale);
    io::store_bytes(out + f0, codes, kN);
  } else {
    for (int e = f0; e < f0 + it.count; e += 2) {
      const float x0 = load_value(s.input, src.src, src.row + e);
      const float x1 = load_value(s.input, src.src, src.row + e + 1);
      const float c = cos_sin_at(cos_sin + e / 2), sn = cos_sin_at(cos_sin + half + e / 2);
      out[e] = quantize_e4m3(rope_rotate(x0, x1, c, sn, true), src.scale);
      out[e + 1] = quantize_e4m3(rope_rotate(x1, x0, c, sn, false), src.scale);
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

// Element 0 of a K/V item's output vector (its rope / nope / V part). MHA K is [rope | nope]; MLA
// K-rope goes to kpe, K-nope to ckv.
KVQ_HD inline std::uint8_t* kv_destination(const RopeShape& s, const KvBuffers& b, std::int64_t vector,
                                           const RopeItem& it) {
  if (s.mla()) return it.rope ? b.kpe + vector * s.rope_dim : b.ckv + vector * s.nope_dim();
  if (it.part == RopePart::v) return b.v + vector * s.head_dim;
  return b.k + vector * s.head_dim + (it.rope ? 0 : s.rope_dim);
}
KVQ_HD inline std::uint8_t* q_destination(const RopeShape& s, const QOutputs& q, std::int64_t token, const RopeItem& it) {
  const int dim = it.rope ? s.rope_dim : s.nope_dim();
  return (it.rope ? q.q_rope : q.q_nope) + (token * s.q_heads + it.head) * dim;
}

// One item of the fused kernel, or (paged = false) of the unfused RoPE + quantize kernel.
KVQ_HD inline void rope_item_work(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& out,
                                  const PageTable& t, bool paged, std::int64_t token, const RopeItem& it) {
  if (!token_rotates(s, in, t.batch_indices, token)) return;
  std::int64_t page = token, entry = 0;
  if (paged && !token_slot(s, t, token, &page, &entry)) return;  // padding: no K/V and no Q either
  std::uint8_t* dst = it.part == RopePart::q ? q_destination(s, q, token, it)
                                             : kv_destination(s, out, kv_vector(s, paged, page, entry, it.head), it);
  if (it.count == kRopeChunk) {
    rope_quantize_chunk<kRopeChunk>(s, in, token, it, dst);
  } else {
    rope_quantize_chunk<0>(s, in, token, it, dst);
  }
}

// count bytes from src to dst: one 16-byte vector on the device when whole and aligned.
KVQ_HD inline void copy_span(const std::uint8_t* src, std::uint8_t* dst, int count) {
#if defined(__CUDA_ARCH__)
  if (count == 16 && io::aligned(src, 16) && io::aligned(dst, 16)) {
    __stcs(reinterpret_cast<uint4*>(dst), __ldcs(reinterpret_cast<const uint4*>(src)));
    return;
  }
#endif
  for (int i = 0; i < count; ++i) dst[i] = src[i];
}

// Unfused (b): item k (0 <= k < items_per_token, K/V items only) copies its bytes into the cache
// (a NeoX rope item: its two spans).
KVQ_HD inline void append_item_work(const RopeShape& s, const KvBuffers& contiguous, const KvBuffers& cache,
                                    const PageTable& t, std::int64_t token, const RopeItem& it) {
  std::int64_t page = 0, entry = 0;
  if (it.part == RopePart::q || !token_slot(s, t, token, &page, &entry)) return;
  const std::uint8_t* src = kv_destination(s, contiguous, kv_vector(s, false, token, 0, it.head), it);
  std::uint8_t* dst = kv_destination(s, cache, kv_vector(s, true, page, entry, it.head), it);
  copy_span(src + it.first, dst + it.first, it.count);
  if (it.rope && s.style == RopeStyle::neox) copy_span(src + s.rope_dim / 2 + it.first, dst + s.rope_dim / 2 + it.first, it.count);
}

// GPU: device pointers, an opaque cudaStream_t; "" or the CUDA / validation error. The index arrays
// are not read on the host (validate_indices checks host copies).
namespace device {
std::string rope_append(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& cache,
                        const PageTable& t, void* stream);
std::string rope_quantize(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& contiguous,
                          const std::int32_t* batch_indices, void* stream);
std::string append_paged(const RopeShape& s, const KvBuffers& contiguous, const KvBuffers& cache, const PageTable& t,
                         void* stream);
}  // namespace device

}  // namespace kvq::kernels
