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
constexpr Recipe two_level(TwoLevel style, float divisor, ZeroGuard guard, FormatId element = FormatId::e2m1) {
  Recipe r{element, 16, BlockScale::e4m3_two_level, Pow2Rule::floor, divisor, Apply::multiply_reciprocal, guard};
  r.two_level = style;
  return r;
}
constexpr Recipe nvint4() {
  Recipe r{FormatId::int4, 16, BlockScale::e4m3_two_level, Pow2Rule::floor, 448.0f * 1.75f};
  return r;
}
constexpr Recipe mx(FormatId element, Pow2Rule rule, int block = 32) {
  return Recipe{element, block, BlockScale::e8m0_pow2, rule, 1.0f};
}
constexpr Recipe blockfp4(Rounding rounding) {
  Recipe r = mx(FormatId::e2m1, Pow2Rule::ceil_ratio, 16);
  r.element_rounding = rounding;
  return r;
}
constexpr Recipe mla_tile128() {
  Recipe r = mx(FormatId::e4m3fn, Pow2Rule::ceil_ratio, 128);
  r.ratio_floor = 1e-4f;
  return r;
}
constexpr Recipe fp8_tensor(Apply apply) {
  return Recipe{FormatId::e4m3fn, 0, BlockScale::tensor_only, Pow2Rule::floor, 448.0f, apply};
}
}  // namespace recipe_names_detail

inline constexpr std::array<NamedRecipe, 18> kRecipes{{
    {"nvfp4", recipe_names_detail::nvfp4,
     "E4M3 block decode scale RNE(bmax/6/g), FP32 tensor decode scale g = amax/(448*6); x / (sf*g)"},
    {"nvfp4-torchao", recipe_names_detail::nvfp4_torchao,
     "as nvfp4, block scale clamped to [2^-6, 448] before its cast; x * ((1/g)/sf)"},
    {"nvfp4-flashinfer-kv", recipe_names_detail::two_level(TwoLevel::rcp_decode, 448.0f * 6.0f, ZeroGuard::block_max),
     "takes the decode scale g = amax/(448*6); sf = rcp(g)*(bmax*rcp(6)), x * rcp(sf8*g), rcp = rcp.approx.ftz; "
     "guard bmax != 0"},
    {"nvfp4-vllm", recipe_names_detail::two_level(TwoLevel::rcp_encode, 448.0f, ZeroGuard::rounded_scale),
     "decode k_scale g = amax/448 (vLLM tests), kernel gets 1/g; sf = (1/g)*(bmax*rcp(6)), x * rcp(sf8*rcp(1/g)), "
     "rcp = rcp.approx.ftz; guard sf8 != 0"},
    {"nvfp4-4over6", recipe_names_detail::two_level(TwoLevel::four_over_six, 256.0f * 6.0f, ZeroGuard::block_and_scale),
     "as nvfp4 with g = amax/(256*6) and, per block, sf from bmax/6 or bmax/4: the lower FP32 squared error wins "
     "(ties keep /6)"},
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
    {"mla-fp8-tile128", recipe_names_detail::mla_tile128(),
     "E4M3 elements, tile 128, scale 2^ceil(log2(max(amax/448, 1e-4))) (FlashMLA; stored as FP32 in the layout, "
     "as its E8M0 byte here)"},
    {"mxint8", recipe_names_detail::mx(FormatId::int8, Pow2Rule::floor),
     "INT8 elements k/64, E8M0 block scale 2^floor(log2 bmax) (OCP MXINT8)"},
    {"mxint4", recipe_names_detail::mx(FormatId::int4, Pow2Rule::floor),
     "INT4 elements k/4, E8M0 block scale 2^floor(log2 bmax) (MXINT8's rule at 4 bits)"},
    {"nvint4", recipe_names_detail::nvint4(),
     "INT4 elements k/4 (|k| <= 7), E4M3 block scale RNE(bmax/1.75/g), g = amax/(448*1.75); x / (sf*g)"},
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
