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

static_assert(pack_e2m1_pair(0b0'01'1, 0b1'11'1) == 0xF3);  // 1.5 low, -6 high
static_assert(e2m1_even(0xF3) == 0x3 && e2m1_odd(0xF3) == 0xF);

}  // namespace kvq
