// Raw bits of host floats, on host and device; and the FP32/FP64 entry points of the codec.
#pragma once

#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

#include "formats/codec.hpp"

namespace kvq {

KVQ_HD inline std::uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return std::bit_cast<std::uint32_t>(x);
#endif
}
KVQ_HD inline std::uint64_t bits_of(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  return std::bit_cast<std::uint64_t>(x);
#endif
}
KVQ_HD inline float float_from_bits(std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  return std::bit_cast<float>(b);
#endif
}
KVQ_HD inline double double_from_bits(std::uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(b));
#else
  return std::bit_cast<double>(b);
#endif
}

// PTX prmt.b32 in its default mode: byte k of the result is byte (s >> 4k) & 7 of the pair
// (a: bytes 0-3, b: bytes 4-7), or, where (s >> 4k) & 8, that byte's top bit in all eight bits.
// One instruction on the device (__byte_perm has no sign mode).
KVQ_HD inline std::uint32_t byte_permute(std::uint32_t a, std::uint32_t b, std::uint32_t s) {
#if defined(__CUDA_ARCH__)
  std::uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
  return r;
#else
  const std::uint64_t pair = (std::uint64_t{b} << 32) | a;
  std::uint32_t r = 0;
  for (int k = 0; k < 4; ++k) {
    const std::uint32_t select = (s >> (4 * k)) & 0xFu;
    std::uint32_t byte = static_cast<std::uint32_t>(pair >> (8 * (select & 7u))) & 0xFFu;
    if (select & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    r |= byte << (8 * k);
  }
  return r;
#endif
}

// FP32's largest finite value: |x| <= kFp32Max is finite and not NaN (NaN compares false).
inline constexpr float kFp32Max = 3.4028235e38f;
// The canonical NaN (quiet, sign clear) that GPU arithmetic writes and kvq's contract uses
// wherever a NaN is produced (docs/recipes.md).
inline constexpr std::uint32_t kCanonicalNanBits = 0x7fc00000u;
KVQ_HD inline float canonical_nan() { return float_from_bits(kCanonicalNanBits); }

// FP32 or FP64 input, rounded once (FP64 never goes through FP32).
KVQ_HD inline std::uint64_t encode_float(Format f, const Conversion& c, float x, std::uint32_t random_bits = 0) {
  return encode(f, c, unpack(kFP32, bits_of(x)), random_bits);
}
KVQ_HD inline std::uint64_t encode_double(Format f, const Conversion& c, double x, std::uint32_t random_bits = 0) {
  return encode(f, c, unpack(kFP64, bits_of(x)), random_bits);
}
// Exact decode (every kvq format below FP64 widens exactly).
KVQ_HD inline float decode_float(Format f, std::uint64_t code) {
  return float_from_bits(static_cast<std::uint32_t>(widen(f, code, kFP32)));
}
KVQ_HD inline double decode_double(Format f, std::uint64_t code) { return double_from_bits(widen(f, code, kFP64)); }

}  // namespace kvq
