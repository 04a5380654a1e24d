// Block formats of the INT-vs-FP comparison (Chen et al. 2025): any element format (FP4/6/8, INT4/6/8)
// under an E8M0 block scale (OCP MX FLOOR rule) or an E4M3 block scale under an FP32 tensor scale
// (NVFP4's rule), each a Recipe that quantize_block quantizes (no second quantizer); and the
// closed-form QSNR model of docs/studies.md.
#pragma once

#include <cstdint>
#include <string_view>

#include "formats/recipes.hpp"

namespace kvq::experiments {

enum class BlockScaleKind : std::uint8_t {
  e8m0_floor,      // 2^(floor(log2 bmax) - emax(element)), elements x * 2^-e (OCP MX)
  e4m3_two_level,  // sf = e4m3((bmax/max)/g), g = amax/(448*max), elements x / (sf*g) (NVFP4 reference)
};

struct BlockFormat {
  std::string_view name;  // MXFP4, NVINT4, ...
  FormatId element;
  bool integer;           // INT element (uniform grid)
  BlockScaleKind scale;
};

// The format's recipe at block n: MX (E8M0, floor) or the NVFP4 reference rule with the tensor
// divisor 448 * max(element) (formats/recipes.hpp).
Recipe block_format_recipe(const BlockFormat& f, int n);
// One block of n values through quantize_block: element codes and the dequantized values (FP32,
// dequantize_element). g is tensor_scale(block_format_recipe(f, n), amax).
void quantize_block_format(const BlockFormat& f, float g, const float* x, int n, std::uint8_t* codes, float* y);

// The closed-form QSNR (dB) of docs/studies.md: a block of Gaussian values with crest factor kappa,
// its maximum mapped to max(element) / rho by the scale.
double model_qsnr_db(const BlockFormat& f, double rho, double kappa);
inline double model_rho(BlockScaleKind s) { return s == BlockScaleKind::e8m0_floor ? 1.5 : 1.0; }
// The smallest kappa in [1, 64] where the INT format's model QSNR falls below the FP format's; NaN if none.
double model_crossover(const BlockFormat& int_format, const BlockFormat& fp_format, double rho);

}  // namespace kvq::experiments
