// Memory access for every kernel family (quantize, dequantize, paged stores, RoPE, MLA): the
// input/output value types, one value <-> FP32, and the io:: vector loads and stores with their
// cache policy. Every global load or store the kernels make with a vector type or a cache hint is
// written here (docs/performance.md gives the reason for each policy).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#include "formats/fast_decode.hpp"  // bf16x2_rne_finite, fp16x2_rne_finite
#include "formats/fast_paths.hpp"

namespace kvq::kernels {

enum class DType : std::uint8_t { fp32, bf16, fp16 };
const char* name_of(DType d);
KVQ_HD constexpr int bytes_of(DType d) { return d == DType::fp32 ? 4 : 2; }

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

// Vector loads and stores: 16-byte (or 8-, 4-byte) vectors on the device where the span is aligned
// and a whole number of vectors, element by element otherwise (and on the host). The cache
// policies: streamed (ld.global.cs / st.global.cs: touched once, evict first; the default), the
// default policy, cached in L1 (ld.global.ca, after a prefetch), and read-only through the
// texture path (ld.global.nc: a row that many threads read, as RoPE's cos/sin).
namespace io {

// The widest vector a thread loads or stores (uint4): the kernels size their spans and chunks by it.
inline constexpr int kVectorBytes = 16;

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

// n values of type t from element `first` of x, as FP32. kStreamed (the default): the device's
// streaming loads and stores (ld.global.cs, st.global.cs: read or written once); else the default
// cache policy. kAligned: the span is whole 16-byte vectors aligned to 16, or ends in one 8-byte
// vector (the caller knows it: no run-time test, no element fallback in the code).
template <bool kStreamed = true, bool kAligned = false>
KVQ_HD inline void load_values(DType t, const void* x, std::int64_t first, int n, float* out) {
#if defined(__CUDA_ARCH__)
  const int bytes = bytes_of(t), per_word = 4 / bytes;
  const auto* base = static_cast<const unsigned char*>(x) + first * bytes;
  if (kAligned || (aligned(base, 16) && (n * bytes) % 16 == 0)) {
    KVQ_UNROLL
    for (int v = 0; v < n * bytes / 16; ++v) {
      const uint4* p = reinterpret_cast<const uint4*>(base) + v;
      const uint4 w = kStreamed ? __ldcs(p) : *p;
      unpack_word(t, w.x, out + (4 * v + 0) * per_word);
      unpack_word(t, w.y, out + (4 * v + 1) * per_word);
      unpack_word(t, w.z, out + (4 * v + 2) * per_word);
      unpack_word(t, w.w, out + (4 * v + 3) * per_word);
    }
    if (kAligned && n * bytes % 16 == 8) {  // a last 8-byte vector
      const uint2* p = reinterpret_cast<const uint2*>(base + n * bytes / 16 * 16);
      const uint2 w = kStreamed ? __ldcs(p) : *p;
      unpack_word(t, w.x, out + (n * bytes / 16 * 4) * per_word);
      unpack_word(t, w.y, out + (n * bytes / 16 * 4 + 1) * per_word);
    }
    return;
  }
  if constexpr (!kAligned)
#endif
  {
    KVQ_UNROLL
    for (int i = 0; i < n; ++i) out[i] = load_value(t, x, first + i);
  }
}

// One FP32 value, or n of them, read only and through the cache (device: ld.global.nc, 16-byte
// vectors where kAligned, or p aligned to 16 and n % 4 == 0): a row that many threads read, as
// RoPE's cos/sin cache.
KVQ_HD inline float load_readonly(const float* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}
template <bool kAligned = false>
KVQ_HD inline void load_readonly_floats(const float* p, int n, float* out) {
#if defined(__CUDA_ARCH__)
  if (kAligned || (aligned(p, 16) && n % 4 == 0)) {
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
  if constexpr (!kAligned)
#endif
  {
    KVQ_UNROLL
    for (int i = 0; i < n; ++i) out[i] = load_readonly(p + i);
  }
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

// kFinite: no value is NaN (the same bits, fewer instructions); kAligned: the span is whole 16-byte
// vectors aligned to 16 (the caller knows it: no run-time test).
template <bool kFinite = false, bool kAligned = false>
KVQ_HD inline void store_values(DType t, void* y, std::int64_t first, int n, const float* v) {
#if defined(__CUDA_ARCH__)
  const int bytes = bytes_of(t), per_word = 4 / bytes;
  auto* base = static_cast<unsigned char*>(y) + first * bytes;
  if (kAligned || (aligned(base, 16) && (n * bytes) % 16 == 0)) {
    KVQ_UNROLL
    for (int k = 0; k < n * bytes / 16; ++k) {
      const uint4 w{pack_word<kFinite>(t, v + (4 * k + 0) * per_word), pack_word<kFinite>(t, v + (4 * k + 1) * per_word),
                    pack_word<kFinite>(t, v + (4 * k + 2) * per_word), pack_word<kFinite>(t, v + (4 * k + 3) * per_word)};
      __stcs(reinterpret_cast<uint4*>(base) + k, w);
    }
    return;
  }
  if constexpr (!kAligned)
#endif
  {
    KVQ_UNROLL
    for (int i = 0; i < n; ++i) store_value(t, y, first + i, v[i]);
  }
}

KVQ_HD inline void load_bytes(const std::uint8_t* src, int count, std::uint8_t* out) {
#if defined(__CUDA_ARCH__)
  if (aligned(src, 16) && count % 16 == 0) {
    KVQ_UNROLL
    for (int k = 0; k < count / 16; ++k) {
      const uint4 w = __ldcs(reinterpret_cast<const uint4*>(src) + k);
      const std::uint32_t words[4] = {w.x, w.y, w.z, w.w};
      KVQ_UNROLL
      for (int v = 0; v < 4; ++v)
        KVQ_UNROLL
        for (int i = 0; i < 4; ++i) out[16 * k + 4 * v + i] = static_cast<std::uint8_t>(words[v] >> (8 * i));
    }
    return;
  }
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

// Four code bytes as a little-endian word (the first byte lowest); kStreamed as load_values;
// kAligned: src is 4-byte aligned (no run-time test).
template <bool kStreamed = true, bool kAligned = false>
KVQ_HD inline std::uint32_t load_word(const std::uint8_t* src) {
#if defined(__CUDA_ARCH__)
  if (kAligned || aligned(src, 4)) {
    const auto* p = reinterpret_cast<const unsigned int*>(src);
    return kStreamed ? __ldcs(p) : *p;
  }
  if constexpr (kAligned) return 0;  // not reached
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

// Sixteen code bytes as four little-endian words (one 16-byte load where aligned; kAligned: the
// caller knows src is).
template <bool kAligned = false>
KVQ_HD inline void load_four_words(const std::uint8_t* src, std::uint32_t* w) {
#if defined(__CUDA_ARCH__)
  if (kAligned || aligned(src, 16)) {
    const uint4 v = __ldcs(reinterpret_cast<const uint4*>(src));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    return;
  }
  if constexpr (!kAligned)
#endif
  {
    KVQ_UNROLL
    for (int i = 0; i < 4; ++i) w[i] = load_word(src + 4 * i);
  }
}

// Eight code bytes as two little-endian words (one 8-byte load where aligned; kAligned: the
// caller knows src is).
template <bool kAligned = false>
KVQ_HD inline void load_word_pair(const std::uint8_t* src, std::uint32_t* w) {
#if defined(__CUDA_ARCH__)
  if (kAligned || aligned(src, 8)) {
    const uint2 v = __ldcs(reinterpret_cast<const uint2*>(src));
    w[0] = v.x, w[1] = v.y;
    return;
  }
  if constexpr (!kAligned)
#endif
  {
    w[0] = load_word(src), w[1] = load_word(src + 4);
  }
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

// Words whose little-endian bytes are the bytes to store (packed 4-bit codes, E4M3 codes four a
// word); kStreamed as load_values; kAlign: an alignment of dst the caller knows (no test up to it;
// a span shorter than kAlign is aligned to its own size).
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
  if (kAlign >= 4 || aligned(dst, 4)) {
    KVQ_UNROLL
    for (int k = 0; k < count; ++k) put(reinterpret_cast<unsigned int*>(dst) + k, words[k]);
    return;
  }
  if constexpr (kAlign < 4)
#endif
  {
    KVQ_UNROLL
    for (int i = 0; i < 4 * count; ++i) dst[i] = static_cast<std::uint8_t>(words[i / 4] >> (8 * (i % 4)));
  }
}

// count bytes from src to dst, streamed: 16-byte vectors (count 16 or 32) or one 8-byte vector on
// the device where both are aligned, else byte by byte.
KVQ_HD inline void copy_bytes(const std::uint8_t* src, std::uint8_t* dst, int count) {
#if defined(__CUDA_ARCH__)
  if ((count == 16 || count == 32) && aligned(src, 16) && aligned(dst, 16)) {
    const auto* from = reinterpret_cast<const uint4*>(src);
    auto* to = reinterpret_cast<uint4*>(dst);
    if (count == 32) {
      const uint4 a = __ldcs(from), b = __ldcs(from + 1);
      __stcs(to, a);
      __stcs(to + 1, b);
    } else {
      __stcs(to, __ldcs(from));
    }
    return;
  }
  if (count == 8 && aligned(src, 8) && aligned(dst, 8)) {
    __stcs(reinterpret_cast<uint2*>(dst), __ldcs(reinterpret_cast<const uint2*>(src)));
    return;
  }
#endif
  for (int i = 0; i < count; ++i) dst[i] = src[i];
}

}  // namespace io

}  // namespace kvq::kernels
