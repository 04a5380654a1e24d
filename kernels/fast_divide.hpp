// Division of 32-bit unsigned integers by a divisor fixed for a whole launch, by a multiply-high
// and a shift (Granlund and Montgomery, "Division by invariant integers using multiplication",
// 1994, figure 4.1): a GPU has no integer divide instruction, and a 32-bit `/` by a runtime value
// is a reciprocal-and-correct sequence of about 20 instructions. Exact for every numerator
// n < 2^32 and divisor 1 <= d < 2^32: with l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1
// (m < 2^32), n / d = (mulhi(m, n) + n) >> l, the sum taken in 64 bits.
#pragma once

#include <cstdint>

#include "formats/host_device.hpp"

namespace kvq::kernels {

struct FastDivide32 {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 1;
  std::uint32_t shift = 0;

  FastDivide32() = default;
  // Computed once per launch on the host (a 64-bit division), then passed to the kernel.
  KVQ_HD explicit FastDivide32(std::uint32_t d) : divisor(d) {
    while (shift < 32 && (std::uint64_t{1} << shift) < d) ++shift;
    multiplier = static_cast<std::uint32_t>((((std::uint64_t{1} << shift) - d) << 32) / d + 1);
  }
  KVQ_HD std::uint32_t quotient(std::uint32_t n) const {
#if defined(__CUDA_ARCH__)
    // The sum's two words shifted by a funnel shift (clamped at 32): a 32-bit result nvcc does not
    // widen again (from the 64-bit shift it kept the high word, and indexing by the quotient took
    // six instructions for one).
    const std::uint64_t sum = std::uint64_t{__umulhi(multiplier, n)} + n;
    return __funnelshift_rc(static_cast<std::uint32_t>(sum), static_cast<std::uint32_t>(sum >> 32), shift);
#else
    const auto high = static_cast<std::uint32_t>((std::uint64_t{multiplier} * n) >> 32);
    return static_cast<std::uint32_t>((std::uint64_t{high} + n) >> shift);
#endif
  }
  // n / divisor and n % divisor.
  KVQ_HD void divide(std::uint32_t n, std::uint32_t* q, std::uint32_t* r) const {
    *q = quotient(n);
    *r = n - *q * divisor;
  }
};

}  // namespace kvq::kernels
