#include "ports/mutants.hpp"

#include "formats/recipe_names.hpp"

namespace kvq::ports {
namespace {

Recipe named(std::string_view name) { return recipe_from_name(name)->recipe; }

template <typename Change>
Mutant mutant(std::string_view name, std::string_view bug_class, std::string_view base, Change change) {
  Mutant m{name, bug_class, base, named(base), named(base)};
  change(m);
  return m;
}

// 0x7F / 0xFF as the 480 an unchecked exponent-and-mantissa decode gives.
float e4m3_value_nan_as_number(std::uint8_t code) {
  if ((code & 0x7F) == 0x7F) return (code & 0x80) ? -480.0f : 480.0f;
  return e4m3_value_fast(code);
}

// The dequantize of a decode-path bug: kernels/quantize.hpp's layout, the mutant's value rule.
std::string dequantize_with_bug(const Mutant& m, const QuantizeShape& s, const std::uint8_t* codes,
                                const std::uint8_t* scales, float g, kernels::DType output, void* y) {
  if (auto e = kernels::validate(s); !e.empty()) return e;
  const Recipe& r = m.dequantize_recipe;
  for (std::int64_t row = 0; row < s.rows; ++row)
    for (std::int64_t j = 0; j < s.cols; ++j) {
      const std::uint8_t code = kernels::code_at(s, codes + row * s.code_bytes_per_row(), j);
      const std::uint8_t scale = s.scales_per_row() ? scales[row * s.scales_per_row() + j / s.block()] : 0;
      float v = 0;
      if (m.decode == DecodeBug::ignores_block_scale) {
        v = element_value(r, code) * g;
      } else {  // nan_as_number: the E4M3 block scale (two-level) or E4M3 element read without its NaN check
        const float element = r.element == FormatId::e4m3fn ? e4m3_value_nan_as_number(code) : element_value(r, code);
        if (r.scale == BlockScale::e4m3_two_level) v = (element * e4m3_value_nan_as_number(scale)) * g;
        else if (r.scale == BlockScale::tensor_only) v = element * g;
        else v = scale == 0xFF ? float_from_bits(0x7fc00000u) : element * pow2_float(static_cast<int>(scale) - 127);
      }
      kernels::store_value(output, y, row * s.cols + j, v);
    }
  return {};
}

std::vector<Mutant> build() {
  std::vector<Mutant> all;
  all.push_back(mutant("nvfp4-ties-up", "ties rounded up instead of to even", "nvfp4",
                       [](Mutant& m) { m.quantize_recipe.element_rounding = Rounding::nearest_away; }));
  all.push_back(mutant("nvfp4-double-rounding-bf16", "double rounding through bf16", "nvfp4",
                       [](Mutant& m) { m.quantize_recipe.element_input_bf16 = true; }));
  all.push_back(mutant("nvfp4-workspace-through-fp32", "double rounding through float (from the exact product)", "nvfp4",
                       [](Mutant& m) { m.workspace_through_fp32 = true; }));
  all.push_back(mutant("nvfp4-reciprocal-for-divide", "reciprocal-multiply vs divide changing codes", "nvfp4",
                       [](Mutant& m) { m.quantize_recipe.apply = Apply::multiply_reciprocal; }));
  all.push_back(mutant("fp8-tensor-reciprocal-for-divide", "reciprocal-multiply vs divide changing codes",
                       "fp8-e4m3-tensor", [](Mutant& m) { m.quantize_recipe.apply = Apply::multiply_reciprocal; }));
  all.push_back(mutant("mxfp4-ceil-for-floor", "E8M0 scale off by one (floor vs ceil)", "mxfp4-floor",
                       [](Mutant& m) { m.quantize_recipe.pow2 = Pow2Rule::ceil; }));
  all.push_back(mutant("mxfp4-bias-125", "E8M0 scale off by one (bias 125 vs 127)", "mxfp4-floor",
                       [](Mutant& m) { m.quantize_recipe.e8m0_bias = 125; }));
  all.push_back(mutant("nvfp4-zero-block-unguarded", "all-zero block giving inf/NaN scales or codes", "nvfp4",
                       [](Mutant& m) { m.quantize_recipe.zero_guard = ZeroGuard::none; }));
  all.push_back(mutant("nvfp4-zero-tensor-nan-scale", "inf global scale / NaN scale 0x7F from an all-zero tensor",
                       "nvfp4", [](Mutant& m) { m.quantize_recipe.zero_guard = ZeroGuard::rounded_scale; }));
  all.push_back(mutant("nvfp4-factor-6", "factor-6 global-scale mismatch between kernels", "nvfp4",
                       [](Mutant& m) { m.dequantize_g_factor = 6.0f; }));
  all.push_back(mutant("nvfp4-nibble-swap", "nibble order swapped", "nvfp4", [](Mutant& m) { m.swap_nibbles = true; }));
  all.push_back(mutant("nvfp4-decode-ignores-block-scale", "decode path ignoring block scales", "nvfp4",
                       [](Mutant& m) { m.decode = DecodeBug::ignores_block_scale; }));
  all.push_back(mutant("nvfp4-nan-scale-decoded-as-480", "NaN decoded as +-480", "nvfp4",
                       [](Mutant& m) { m.decode = DecodeBug::nan_as_number; }));
  all.push_back(mutant("fp8-tensor-nan-decoded-as-480", "NaN decoded as +-480", "fp8-e4m3-tensor",
                       [](Mutant& m) { m.decode = DecodeBug::nan_as_number; }));
  return all;
}

}  // namespace

const std::vector<Mutant>& mutants() {
  static const std::vector<Mutant> all = build();
  return all;
}

PortKernel twin_kernel(std::string name, const Recipe& r) {
  PortKernel k{std::move(name), r, {}, {}, {}};
  k.quantize = [](const QuantizeShape& s, kernels::DType t, const void* x, float g, std::uint8_t* c, std::uint8_t* sc) {
    return kernels::quantize_cpu(s, t, x, g, c, sc);
  };
  k.dequantize = [](const QuantizeShape& s, const std::uint8_t* c, const std::uint8_t* sc, float g, kernels::DType t,
                    void* y) { return kernels::dequantize_cpu(s, c, sc, g, t, y); };
  k.requantize_e4m3 = [](const QuantizeShape& s, const std::uint8_t* c, const std::uint8_t* sc, float f, std::uint8_t* o) {
    return kernels::requantize_e4m3_cpu(s, c, sc, f, o);
  };
  return k;
}

PortKernel mutant_kernel(const Mutant& m) {
  PortKernel k = twin_kernel(std::string(m.name), named(m.base));
  k.quantize = [m](const QuantizeShape& shape, kernels::DType t, const void* x, float g, std::uint8_t* codes,
                   std::uint8_t* scales) {
    QuantizeShape s = shape;
    s.recipe = m.quantize_recipe;
    const std::string e = kernels::quantize_cpu(s, t, x, g, codes, scales);
    if (e.empty() && m.swap_nibbles && s.packed())
      for (std::int64_t i = 0; i < s.code_bytes(); ++i) codes[i] = static_cast<std::uint8_t>(codes[i] << 4 | codes[i] >> 4);
    return e;
  };
  k.dequantize = [m](const QuantizeShape& shape, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                     kernels::DType t, void* y) {
    QuantizeShape s = shape;
    s.recipe = m.dequantize_recipe;
    if (m.decode != DecodeBug::none) return dequantize_with_bug(m, s, codes, scales, g * m.dequantize_g_factor, t, y);
    return kernels::dequantize_cpu(s, codes, scales, g * m.dequantize_g_factor, t, y);
  };
  if (m.workspace_through_fp32)
    k.requantize_e4m3 = [m](const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float factor,
                            std::uint8_t* out) {
      if (auto e = kernels::validate(s); !e.empty()) return e;
      const Recipe& r = m.dequantize_recipe;
      for (std::int64_t row = 0; row < s.rows; ++row)
        for (std::int64_t j = 0; j < s.cols; ++j) {
          const std::uint8_t code = kernels::code_at(s, codes + row * s.code_bytes_per_row(), j);
          const std::uint8_t scale = s.scales_per_row() ? scales[row * s.scales_per_row() + j / s.block()] : 0;
          const float value = dequantize_element(r, 1.0f, scale, code);  // element * scale in FP32 (exact here)
          out[row * s.cols + j] = e4m3_satfinite_fast(value * factor);   // the product rounded to FP32, then E4M3
        }
      return std::string();
    };
  return k;
}

}  // namespace kvq::ports
