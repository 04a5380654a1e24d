// Block formats of the INT-vs-FP comparison (Chen et al. 2025): any element format (FP4/6/8, INT4/6/8)
// under an E8M0 block scale (OCP MX FLOOR rule) or an E4M3 block scale under an FP32 tensor scale
// (NVFP4's rule), quantized with the one codec; and the closed-form QSNR model of docs/studies.md.
// The FP6 and INT6 elements live here, not in FormatId: only this study uses them.
#pragma once

#include <cstdint>
#include <string_view>

#include "formats/format.hpp"

namespace kvq::experiments {

//                                       e  m  bias specials          signed has_zero
inline constexpr Format kE2M3{           2, 3,    1, Specials::none,   true,  true};  // s.ee.mmm, max 7.5 (OCP FP6)
inline constexpr Format kE3M2{           3, 2,    3, Specials::none,   true,  true};  // s.eee.mm, max 28 (OCP FP6)
inline constexpr Format kINT6{           1, 4,    1, Specials::none,   true,  true};  // k/16, |k| <= 31 (INT6 as E1M4)
static_assert(max_finite(kE2M3) == 7.5 && max_finite(kE3M2) == 28.0 && max_finite(kINT6) == 31.0 / 16);
static_assert(min_subnormal(kE2M3) == 0.125 && min_subnormal(kE3M2) == 0.0625 && min_subnormal(kINT6) == 1.0 / 16);

enum class BlockScaleKind : std::uint8_t {
  e8m0_floor,      // 2^(floor(log2 bmax) - emax(element)), elements x * 2^-e (OCP MX)
  e4m3_two_level,  // sf = e4m3((bmax/max)/g), g = amax/(448*max), elements x / (sf*g) (NVFP4 reference)
};

struct BlockFormat {
  std::string_view name;  // MXFP4, NVINT4, ...
  Format element;
  bool integer;           // INT element (uniform grid)
  BlockScaleKind scale;
};

// One block of n values: element codes and the dequantized values (FP32, as the recipes dequantize).
// g is the tensor decode scale (amax / (448 * max element)) for e4m3_two_level, unused otherwise.
void quantize_block_format(const BlockFormat& f, float g, const float* x, int n, std::uint8_t* codes, float* y);
float block_format_tensor_scale(const BlockFormat& f, float amax);

// The closed-form QSNR (dB) of docs/studies.md: a block of Gaussian values with crest factor kappa,
// its maximum mapped to max(element) / rho by the scale.
double model_qsnr_db(const BlockFormat& f, double rho, double kappa);
inline double model_rho(BlockScaleKind s) { return s == BlockScaleKind::e8m0_floor ? 1.5 : 1.0; }
// The smallest kappa in [1, 64] where the INT format's model QSNR falls below the FP format's; NaN if none.
double model_crossover(const BlockFormat& int_format, const BlockFormat& fp_format, double rho);

}  // namespace kvq::experiments
