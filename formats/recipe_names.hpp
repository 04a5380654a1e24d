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
// torchao 0.18 nvfp4_quantize: bmax / 6.0 on a CUDA tensor multiplies by RN(1/6) (PyTorch's division by
// a Python number); zero blocks store the clamped 2^-6 (0x08).
constexpr Recipe nvfp4_torchao() {
  Recipe r{FormatId::e2m1, 16, BlockScale::e4m3_two_level, Pow2Rule::floor, 448.0f * 6.0f,
           Apply::multiply_reciprocal, ZeroGuard::rounded_scale, true};
  r.division = Division::constant_reciprocal;
  r.element_cast = ElementCast::torchao_e2m1;  // f32_to_f4_unpacked: a NaN element gives 0x4
  return r;
}
// NVIDIA ModelOpt 0.47 NVFP4QTensor.quantize: sf = e4m3(clamp(bmax / (6 * g), 2^-9, 448)) with a zero
// scale replaced by 1.0 first; x / (sf * g); the FP4 sign from v < 0 (+-0 -> 0x0).
constexpr Recipe nvfp4_modelopt() {
  Recipe r{FormatId::e2m1, 16, BlockScale::e4m3_two_level, Pow2Rule::floor, 448.0f * 6.0f, Apply::divide,
           ZeroGuard::none, true};
  r.scale_form = ScaleForm::over_product;
  r.division = Division::constant_reciprocal;  // g = amax / (6 * 448), a Python number
  r.clamp_min = 0x1p-9f;
  r.zero_scale = 1.0f;
  r.element_cast = ElementCast::satfinite_unsigned_zero;
  return r;
}
// compressed-tensors 0.20 (llm-compressor's NVFP4): the global scale e = 2688 / amax (an encode scale,
// 1 for an all-zero tensor); sf = e4m3(e * (bmax / 6)), a zero sf replaced by 0.125; x / (sf / e) (IEEE
// div_rn in its Triton packer); the FP4 sign from v < 0.
constexpr Recipe nvfp4_compressed_tensors() {
  Recipe r{FormatId::e2m1, 16, BlockScale::e4m3_two_level, Pow2Rule::floor, 448.0f * 6.0f, Apply::divide,
           ZeroGuard::none};
  r.tensor_param = TensorParam::encode;
  // 2688.0 / amax is Tensor.__rtruediv__ (reciprocal, then * 2688); bmax / 6 divides by a 0-dim CUDA
  // tensor (calculate_range's), which is IEEE
  r.division = Division::number_over_tensor;
  r.zero_scale = 0.125f;
  r.zero_scale_after_cast = true;
  r.element_cast = ElementCast::satfinite_unsigned_zero;
  return r;
}
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
// SGLang's block-FP4 KV quantizer as it ships (torch.compile'd): e = ceil(log2(max(bmax / 6, 1e-10)))
// with the log2 in FP32, elements by ">=" thresholds (ties away), the sign from x < 0.
constexpr Recipe blockfp4(Rounding rounding) {
  Recipe r = mx(FormatId::e2m1, Pow2Rule::ceil_ratio, 16);
  r.element_rounding = rounding;
  r.exponent_by_log2 = true;
  r.division = Division::constant_reciprocal;  // bmax / 6.0
  r.element_cast = ElementCast::bounds_count;  // sign from v < 0, magnitude = #{bounds <= |v|}: NaN -> 0x0
  r.dequantize_unsigned_zero = true;           // batched_dequantize as compiled: 0x8 -> +0
  return r;
}
// NVIDIA ModelOpt 0.47 MXFP4QTensor.quantize: e = ceil(max(log2(bmax / 6.0), -127)) with the FP32 log2
// (bmax / 6.0 multiplies by RN(1/6), the rceil ratio), elements x / 2^e cast by counting |v| > bound
// (ties toward zero), the sign bit (2 - sign(v)) // 2 (every zero 0x8).
constexpr Recipe mxfp4_modelopt() {
  Recipe r = mx(FormatId::e2m1, Pow2Rule::rceil);
  r.exponent_by_log2 = true;
  r.element_rounding = Rounding::nearest_toward_zero;
  r.element_cast = ElementCast::satfinite_negative_zero;
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
constexpr Recipe fp8_tensor_triton(Apply apply, float scale_min) {  // Triton's `/` (div.full.f32) throughout
  Recipe r = fp8_tensor(apply);
  r.division = Division::full_approx;
  r.tensor_scale_min = scale_min;
  return r;
}
// The same with tl.clamp(v, -448, 448) before the cast (NaN -> +448) and no guard on s = 0: 1/0 = inf,
// 0 * inf = NaN -> 0x7E (SGLang's 656 writer on an all-zero tile; vLLM's per-token-head s is never 0).
constexpr Recipe fp8_tensor_triton_clamp(float scale_min) {
  Recipe r = fp8_tensor_triton(Apply::multiply_reciprocal, scale_min);
  r.element_cast = ElementCast::triton_clamp;
  r.zero_guard = ZeroGuard::none;
  return r;
}
// vLLM's DeepSeek V4 MODEL1 writer: tiles of 64, e = ceil(log2(max(bmax, 1e-4) / 448)), the max in
// BF16 (the floor literal rounds to 0x38D2) and Triton's `/`; its MXFP8 successor (V4.1): tiles of 32,
// the max in FP32 and the ratio bmax * RN(1/448), a constant multiply (rceil). Both in Triton: the
// exponent a float (a NaN element ignored by the max, an infinite max gives byte 0xFF and elements
// times 2^-inf) and tl.clamp before the cast (NaN -> +448).
constexpr Recipe mla_model1(Pow2Rule rule, int tile, float floor, Division division) {
  Recipe r = mx(FormatId::e4m3fn, rule, tile);
  r.ratio_floor = floor;
  r.ratio_floor_on_bmax = true;
  r.division = division;
  r.exponent_by_log2 = true;
  r.float_exponent = true;
  r.element_cast = ElementCast::triton_clamp;
  return r;
}
constexpr Recipe fp8_tensor_torch() {  // PyTorch eager (x / s).to(float8_e4m3fn): no saturation
  Recipe r = fp8_tensor(Apply::divide);
  r.element_cast = ElementCast::nonsaturating;
  return r;
}
// The four-over-six package (fouroversix 1.0.5, PyTorch reference quantize_to_fp4): amax is the tensor
// parameter; rule mse (E4M3 scale max 256: D = 6 * 256) or static_6 (D = 6 * 448).
constexpr Recipe fouroversix(TwoLevel style, float divisor) {
  Recipe r = two_level(style, divisor, ZeroGuard::block_and_scale);
  r.tensor_param = TensorParam::amax;
  r.element_cast = ElementCast::e2m1_by_rounding;
  return r;
}
}  // namespace recipe_names_detail

inline constexpr std::array<NamedRecipe, 32> kRecipes{{
    {"nvfp4", recipe_names_detail::nvfp4,
     "E4M3 block decode scale RNE(bmax/6/g), FP32 tensor decode scale g = amax/(448*6); x / (sf*g)"},
    {"nvfp4-torchao", recipe_names_detail::nvfp4_torchao(),
     "torchao: bmax * RN(1/6) (PyTorch's x / 6.0), then / g, clamped to [2^-6, 448] before its cast; x * ((1/g)/sf)"},
    {"nvfp4-modelopt", recipe_names_detail::nvfp4_modelopt(),
     "ModelOpt: sf = e4m3(clamp(bmax / (6*g), 2^-9, 448)), a zero scale 1.0; x / (sf*g); +-0 codes 0x0"},
    {"nvfp4-compressed-tensors", recipe_names_detail::nvfp4_compressed_tensors(),
     "compressed-tensors: e = 2688/amax (encode); sf = e4m3(e*(bmax/6)), 0 -> 0.125; x / (sf/e); +-0 codes 0x0"},
    {"nvfp4-flashinfer-kv", recipe_names_detail::two_level(TwoLevel::rcp_decode, 448.0f * 6.0f, ZeroGuard::block_max),
     "takes the decode scale g = amax/(448*6); sf = rcp(g)*(bmax*rcp(6)), x * rcp(sf8*g), rcp = rcp.approx.ftz; "
     "guard bmax != 0"},
    {"nvfp4-vllm", recipe_names_detail::two_level(TwoLevel::rcp_encode, 448.0f, ZeroGuard::rounded_scale),
     "decode k_scale g = amax/448 (vLLM tests), kernel gets 1/g; sf = (1/g)*(bmax*rcp(6)), x * rcp(sf8*rcp(1/g)), "
     "rcp = rcp.approx.ftz; guard sf8 != 0"},
    {"nvfp4-4over6", recipe_names_detail::fouroversix(TwoLevel::four_over_six_amax, 256.0f * 6.0f),
     "the four-over-six package: enc = 1536/amax, s = (bmax/6)*enc or s*1.5, x * (1/((1/enc)*sf)) rounded on the "
     "E2M1 grid unsaturated; the lower sum of (((f*sf)*amax)/1536 - x)^2 (torch's order) wins, ties keep s"},
    {"nvfp4-4over6-paper", recipe_names_detail::two_level(TwoLevel::four_over_six, 256.0f * 6.0f, ZeroGuard::block_and_scale),
     "the 4-over-6 rule as published, in decode form: g = amax/(256*6), per block sf from (bmax/6)/g or (bmax/4)/g, "
     "x * ((1/g)/sf); the lower FP32 squared error wins (ties keep /6)"},
    {"nvfp4-4over6-static6", recipe_names_detail::fouroversix(TwoLevel::amax_encode, 448.0f * 6.0f),
     "the four-over-six package's plain NVFP4 (rule static_6): enc = 2688/amax, s = (bmax/6)*enc, "
     "x * (1/((1/enc)*sf)) rounded on the E2M1 grid unsaturated"},
    {"mxfp4-floor", recipe_names_detail::mx(FormatId::e2m1, Pow2Rule::floor), "E8M0 block scale 2^(floor(log2 bmax)-2) (OCP)"},
    {"mxfp4-ceil", recipe_names_detail::mx(FormatId::e2m1, Pow2Rule::ceil), "E8M0 block scale 2^(ceil(log2 bmax)-2)"},
    {"mxfp4-even", recipe_names_detail::mx(FormatId::e2m1, Pow2Rule::even),
     "E8M0 block scale from bmax rounded to 1 mantissa bit, then floor"},
    {"mxfp4-rceil", recipe_names_detail::mx(FormatId::e2m1, Pow2Rule::rceil), "E8M0 block scale 2^ceil(log2(bmax*(1/6)))"},
    {"mxfp4-modelopt", recipe_names_detail::mxfp4_modelopt(),
     "E8M0 block scale 2^ceil(log2(bmax*(1/6))) with the FP32 log2, elements ties toward zero, +-0 codes 0x8 (ModelOpt)"},
    {"blockfp4-e8m0-ceil", recipe_names_detail::blockfp4(Rounding::nearest_away),
     "block 16, E8M0 scale 2^ceil(log2(max(bmax/6, 1e-10))) with the FP32 log2, elements ties up, +-0 and NaN "
     "codes 0x0, 0x8 dequantized as +0 (SGLang, compiled)"},
    {"blockfp4-e8m0-ceil-rne", recipe_names_detail::blockfp4(Rounding::nearest_even),
     "as blockfp4-e8m0-ceil with round-half-even elements"},
    {"mxfp8-e4m3-floor", recipe_names_detail::mx(FormatId::e4m3fn, Pow2Rule::floor),
     "E4M3 elements, E8M0 block scale 2^(floor(log2 bmax)-8) (OCP)"},
    {"mxfp8-e4m3-ceil", recipe_names_detail::mx(FormatId::e4m3fn, Pow2Rule::ceil),
     "E4M3 elements, E8M0 block scale 2^(ceil(log2 bmax)-8) (torchao CEIL)"},
    {"mxfp8-e4m3-even", recipe_names_detail::mx(FormatId::e4m3fn, Pow2Rule::even),
     "E4M3 elements, E8M0 block scale from bmax rounded to 3 mantissa bits, then floor (torchao EVEN)"},
    {"mxfp8-e4m3-rceil", recipe_names_detail::mx(FormatId::e4m3fn, Pow2Rule::rceil),
     "E4M3 elements, E8M0 block scale 2^ceil(log2(bmax*(1/448))) (RCEIL: the PTX ue8m0 round-up cast)"},
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
    {"fp8-e4m3-tensor-triton", recipe_names_detail::fp8_tensor_triton(Apply::divide, 0.0f),
     "FP32 tensor decode scale s; x / s with Triton's `/` (div.full.f32), satfinite (vLLM Triton paged store)"},
    {"fp8-e4m3-tensor-rcp-triton", recipe_names_detail::fp8_tensor_triton_clamp(0.0f),
     "s = amax/448 and x * (1/s), both with Triton's `/`, tl.clamp (NaN -> 448), s = 0 unguarded (SGLang's MLA "
     "656 writer, per 128-tile, s stored as FP32)"},
    {"fp8-e4m3-token-head-triton", recipe_names_detail::fp8_tensor_triton_clamp(1e-6f),
     "s = max(amax/448, 1e-6) and x * (1/s) with Triton's `/`, tl.clamp (vLLM per-token-head FP8 cache, per "
     "(token, head))"},
    {"mla-model1-tile64", recipe_names_detail::mla_model1(Pow2Rule::ceil_ratio, 64, 0x1.a4p-14f, Division::full_approx),
     "E4M3 tiles of 64, E8M0 2^ceil(log2(max(bmax, 1e-4 bf16) / 448)), Triton `/` (vLLM DeepSeek V4 MODEL1)"},
    {"mla-model1-mxfp8-tile32", recipe_names_detail::mla_model1(Pow2Rule::rceil, 32, 1e-4f, Division::ieee),
     "E4M3 tiles of 32, E8M0 2^ceil(log2(max(bmax, 1e-4) * RN(1/448))) (vLLM DeepSeek V4.1 MXFP8 record)"},
    {"fp8-e4m3-tensor-torch", recipe_names_detail::fp8_tensor_torch(),
     "FP32 tensor decode scale s; (x / s).to(float8_e4m3fn) in PyTorch eager: beyond 464 NaN (SGLang MLA 576 "
     "writer, s = 1)"},
}};

constexpr std::optional<NamedRecipe> recipe_from_name(std::string_view name) {
  for (const auto& r : kRecipes)
    if (r.name == name) return r;
  return std::nullopt;
}

}  // namespace kvq
