#include "experiments/block_formats.hpp"

#include <cmath>
#include <limits>

#include "formats/recipes.hpp"

namespace kvq::experiments {
namespace {

int emax_of(Format f) { return static_cast<int>(f.max_finite_code() >> f.mantissa_bits) - f.bias; }

}  // namespace

Recipe block_format_recipe(const BlockFormat& f, int n) {
  Recipe r;
  r.element = f.element;
  r.block = n;
  if (f.scale == BlockScaleKind::e8m0_floor) {
    r.scale = BlockScale::e8m0_pow2;
    r.pow2 = Pow2Rule::floor;
  } else {
    r.scale = BlockScale::e4m3_two_level;
    r.tensor_divisor = 448.0f * element_max(r);
  }
  return r;
}

void quantize_block_format(const BlockFormat& f, float g, const float* x, int n, std::uint8_t* codes, float* y) {
  const Recipe r = block_format_recipe(f, n);
  const std::uint8_t scale = quantize_block(r, g, x, n, codes);
  for (int i = 0; i < n; ++i) y[i] = dequantize_element(r, g, scale, codes[i]);
}

double model_qsnr_db(const BlockFormat& f, double rho, double kappa) {
  const Format e = format_of(f.element);
  if (f.integer) {  // uniform grid: noise step^2/12 for every element, step = max / (2^(b-1) - 1)
    const double levels = std::ldexp(1.0, e.bits() - 1) - 1.0;
    return 10.0 * std::log10(12.0 * levels * levels / (rho * rho * kappa * kappa));
  }
  // FP: u ~ N(0, sigma^2) in element units, sigma = max / (rho kappa); in binade [2^k, 2^(k+1)) the step
  // is 2^(k-M), below the smallest normal 2^(kmin-M); the top binade takes the tail.
  const double sigma = max_finite(e) / (rho * kappa);
  const int kmin = e.min_exponent(), kmax = emax_of(e), m = e.mantissa_bits;
  auto below = [&](double t) { return std::erf(t / (sigma * std::sqrt(2.0))); };  // P(|u| < t)
  double noise = below(std::ldexp(1.0, kmin)) * std::ldexp(1.0, 2 * (kmin - m)) / 12.0;
  for (int k = kmin; k <= kmax; ++k) {
    const double p = (k == kmax ? 1.0 : below(std::ldexp(1.0, k + 1))) - below(std::ldexp(1.0, k));
    noise += p * std::ldexp(1.0, 2 * (k - m)) / 12.0;
  }
  return 10.0 * std::log10(sigma * sigma / noise);
}

double model_crossover(const BlockFormat& int_format, const BlockFormat& fp_format, double rho) {
  auto gap = [&](double k) { return model_qsnr_db(int_format, rho, k) - model_qsnr_db(fp_format, rho, k); };
  const double step = 1.0 / 64;
  for (double lo = 1.0; lo < 64.0; lo += step) {
    if (gap(lo) > 0 && gap(lo + step) <= 0) {
      double a = lo, b = lo + step;
      for (int i = 0; i < 60; ++i) {
        const double mid = 0.5 * (a + b);
        (gap(mid) > 0 ? a : b) = mid;
      }
      return 0.5 * (a + b);
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace kvq::experiments
