// The recipes computed by the oracle: each FP32 operation a recipe performs is done
// exactly on rationals and rounded once (IEEE RNE, specials included), elements and
// scales are rounded by the oracle's enumerated search, power-of-two exponents come
// from exact logarithms. Nothing here calls the codec.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/recipes.hpp"
#include "oracle/oracle.hpp"

namespace kvq::oracle {

// An exact signed value as a Real (zero is +0).
Real finite_real(const Exact& signed_value);
// FP32 arithmetic, exact then rounded once.
Real fp32(const Real& x);
Real fp32_multiply(const Real& a, const Real& b);
Real fp32_divide(const Real& a, const Real& b);
std::uint32_t fp32_bits(const Real& x);
// PTX rcp.approx.ftz.f32 on sm_90: the correctly rounded reciprocal of x, or its other neighbour
// where the measured table (formats/reciprocal.hpp) says so; subnormal inputs and results flushed.
Real rcp_approx_ftz(const Real& x);

struct QuantizedBlock {
  std::uint8_t scale = 0;
  std::vector<std::uint8_t> codes;
};

float recipe_tensor_scale(const Recipe& r, float amax);
QuantizedBlock recipe_quantize_block(const Recipe& r, float g, const std::vector<float>& x);
std::uint32_t recipe_dequantize_element(const Recipe& r, float g, std::uint8_t scale, std::uint8_t code);
// E4M3 code of the exact element * scale * factor (the prefill workspace), rounded once, or as a
// port rounds it (WorkspaceRounding: FP32 products, BF16, a non-saturating cast).
std::uint8_t recipe_requantize_e4m3(const Recipe& r, std::uint8_t scale, std::uint8_t code, float factor,
                                    WorkspaceRounding w = {});

}  // namespace kvq::oracle
