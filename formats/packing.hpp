// E2M1 pairs in one byte: element 2i in the low nibble, 2i+1 in the high nibble
// (every engine agrees; PTX cvt.rn.satfinite.e2m1x2.f32 d, a, b puts a in the HIGH nibble).
#pragma once

#include <cstdint>

#include "formats/host_device.hpp"

namespace kvq {

KVQ_HD constexpr std::uint8_t pack_e2m1_pair(std::uint8_t even, std::uint8_t odd) {
  return static_cast<std::uint8_t>((even & 0xF) | ((odd & 0xF) << 4));
}
KVQ_HD constexpr std::uint8_t e2m1_even(std::uint8_t packed) { return packed & 0xF; }  // element 2i
KVQ_HD constexpr std::uint8_t e2m1_odd(std::uint8_t packed) { return packed >> 4; }    // element 2i+1

// INT4/INT8 codes (formats/format.hpp: sign-magnitude) to and from two's complement, the way
// INT kernels store them. -0 becomes 0; the two's complement -2^(b-1) has no code and reads as -max.
KVQ_HD constexpr std::uint8_t int_code_to_twos_complement(int bits, std::uint8_t code) {
  const int sign_bit = 1 << (bits - 1), mask = (1 << bits) - 1;
  const int k = (code & sign_bit) ? -(code & (sign_bit - 1)) : (code & (sign_bit - 1));
  return static_cast<std::uint8_t>(k & mask);
}
KVQ_HD constexpr std::uint8_t int_code_from_twos_complement(int bits, std::uint8_t twos) {
  const int sign_bit = 1 << (bits - 1);
  int k = (twos & sign_bit) ? static_cast<int>(twos) - (1 << bits) : static_cast<int>(twos);
  if (k < -(sign_bit - 1)) k = -(sign_bit - 1);
  return static_cast<std::uint8_t>(k < 0 ? sign_bit | -k : k);
}

static_assert(int_code_to_twos_complement(4, 0b1'1'11) == 0b1001 && int_code_to_twos_complement(4, 0b1'0'00) == 0);
static_assert(int_code_from_twos_complement(4, 0b1001) == 0b1'1'11 && int_code_from_twos_complement(4, 0b1000) == 0b1'1'11);
static_assert(int_code_to_twos_complement(8, 0x81) == 0xFF && int_code_from_twos_complement(8, 0x80) == 0xFF);

static_assert(pack_e2m1_pair(0b0'01'1, 0b1'11'1) == 0xF3);  // 1.5 low, -6 high
static_assert(e2m1_even(0xF3) == 0x3 && e2m1_odd(0xF3) == 0xF);

}  // namespace kvq
