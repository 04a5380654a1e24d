// Named recipes: a few lines of data each (see formats/recipes.hpp for what the fields mean).
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "formats/recipes.hpp"

namespace kvq {

struct NamedRecipe {
  std::string_view name;
  Recipe recipe;
  std::string_view scales;  // which scale is stored, in which convention
};

namespace recipe_names_detail {
constexpr Recipe nvfp4{};
constexpr Recipe nvfp4_torchao{FormatId::e2m1, 16, BlockScale::e4m3_two_level, Pow2Rule::floor, 448.0f * 6.0f,
                               Apply::multiply_reciprocal, ZeroGuard::rounded_scale, true};  // zero blocks: 0x08
constexpr Recipe mx(FormatId element, Pow2Rule rule, int block = 32) {
  return Recipe{element, block, BlockScale::e8m0_pow2, rule, 1.0f};
}
constexpr Recipe blockfp4(Rounding rounding) {
  Recipe r = mx(FormatId::e2m1, Pow2Rule::ceil_ratio, 16);
  r.element_rounding = rounding;
  return r;
}
constexpr Recipe fp8_tensor(Apply apply) {
  return Recipe{FormatId::e4m3fn, 0, BlockScale::tensor_only, Pow2Rule::floor, 448.0f, apply};
}
}  // namespace recipe_names_detail

inline constexpr std::array<NamedRecipe, 11> kRecipes{{
    {"nvfp4", recipe_names_detail::nvfp4,
     "E4M3 block decode scale RNE(bmax/6/g), FP32 tensor decode scale g = amax/(448*6); x / (sf*g)"},
    {"nvfp4-torchao", recipe_names_detail::nvfp4_torchao,
     "as nvfp4, block scale clamped to [2^-6, 448] before its cast; x * ((1/g)/sf)"},
    {"mxfp4-floor", recipe_names_detail::mx(FormatId::e2m1, Pow2Rule::floor), "E8M0 block scale 2^(floor(log2 bmax)-2) (OCP)"},
    {"mxfp4-ceil", recipe_names_detail::mx(FormatId::e2m1, Pow2Rule::ceil), "E8M0 block scale 2^(ceil(log2 bmax)-2)"},
    {"mxfp4-even", recipe_names_detail::mx(FormatId::e2m1, Pow2Rule::even),
     "E8M0 block scale from bmax rounded to 1 mantissa bit, then floor"},
    {"mxfp4-rceil", recipe_names_detail::mx(FormatId::e2m1, Pow2Rule::rceil), "E8M0 block scale 2^ceil(log2(bmax*(1/6)))"},
    {"blockfp4-e8m0-ceil", recipe_names_detail::blockfp4(Rounding::nearest_away),
     "block 16, E8M0 scale 2^ceil(log2(max(bmax/6, 1e-10))), elements ties up (SGLang)"},
    {"blockfp4-e8m0-ceil-rne", recipe_names_detail::blockfp4(Rounding::nearest_even),
     "as blockfp4-e8m0-ceil with round-half-even elements"},
    {"mxfp8-e4m3-floor", recipe_names_detail::mx(FormatId::e4m3fn, Pow2Rule::floor),
     "E4M3 elements, E8M0 block scale 2^(floor(log2 bmax)-8) (OCP)"},
    {"fp8-e4m3-tensor", recipe_names_detail::fp8_tensor(Apply::divide),
     "FP32 tensor decode scale s = amax/448; x / s (vLLM store)"},
    {"fp8-e4m3-tensor-rcp", recipe_names_detail::fp8_tensor(Apply::multiply_reciprocal),
     "FP32 tensor decode scale s = amax/448; x * (1/s) (FlashInfer fused RoPE)"},
}};

inline std::optional<NamedRecipe> recipe_from_name(std::string_view name) {
  for (const auto& r : kRecipes)
    if (r.name == name) return r;
  return std::nullopt;
}

}  // namespace kvq
