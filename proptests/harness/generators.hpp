// Input generators: raw FP32/FP64 bit patterns weighted toward the places where
// conversions break (specials, zeros, subnormals, exact codes, ties, tie +- 1 ulp,
// overflow and underflow edges). RapidCheck's float generator yields none of these.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "formats/format.hpp"
#include "proptests/harness/mix32.hpp"

namespace kvq::props {

struct Fp32 {  // an FP32 input, shown as its bits and value
  std::uint32_t bits;
};
struct Fp64 {
  std::uint64_t bits;
};
void showValue(Fp32 x, std::ostream& os);
void showValue(Fp64 x, std::ostream& os);

// FP32 inputs that sit on the target's edges: every exact value, every midpoint of
// two neighbours (and the step past max), each +- 1 FP32 ulp, both signs. Formats <= 16 bits.
std::vector<std::uint32_t> edge_inputs_fp32(Format target);
// FP64 traps for double rounding: midpoints +- 1 and +- 2^29 FP64 ulps (the latter
// survive a trip through FP32 as exact ties).
std::vector<std::uint64_t> edge_inputs_fp64(Format target);
// The 2^16 BF16 bit patterns and the 2^16 FP16 values, as FP32 bits (exact).
std::vector<std::uint32_t> bf16_and_fp16_inputs();
// Every FP32 special and extreme: +-0, +-inf, NaNs with several payloads, +-max, +-min normal/subnormal.
std::vector<std::uint32_t> fp32_specials();

rc::Gen<Fp32> gen_fp32(Format target);
rc::Gen<Fp64> gen_fp64(Format target);
// FP64 inputs for a target of any width: for FP32 (too wide to enumerate) adds FP64 values at
// and around FP32 midpoints (+- 1 and +- 2^20 FP64 ulps), both signs.
rc::Gen<Fp64> gen_fp64_for(Format target);

// What an input is, for RC_CLASSIFY-style coverage reports.
std::string classify(Format target, Fp32 x);



}  // namespace kvq::props
