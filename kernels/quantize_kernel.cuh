// The quantize kernels' shared body (nvcc only): the fixed configurations, the per-thread loops
// over blocks or per-tensor spans, and the dispatch from a runtime recipe to a configuration.
// kernels/quantize_device.cu launches it to store codes and scales; kernels/port_compare_device.cu
// launches the same body with outputs that compare (kernels/port_compare.hpp CompareSink), so the
// device comparator quantizes exactly as the kernel does.
#pragma once

#include <cuda_runtime.h>

#include <string_view>
#include <utility>

#include "formats/recipe_names.hpp"
#include "kernels/code_table.cuh"
#include "kernels/lane_quantize.hpp"
#include "kernels/quantize.hpp"

namespace kvq::kernels::quantize_shared {

// What a fixed configuration's kernels compute: the reference arithmetic (quantize, dequantize and
// workspace kernels), an engine variant's decode arithmetic (dequantize and workspace kernels),
// engine variants' quantize rules with the shape alone fixed (quantize kernels: the runtime recipe,
// its arrays of a constant size; per tensor, quantize_tensor_span), or one engine variant's quantize with every
// field of its recipe a constant (quantize kernels: the packed variant route of
// formats/packed_quantize.hpp for 4-bit elements, quantize_block for 8-bit ones; with the recipe at
// run time the route's registers spilled, and quantize_block ran its variant loops out of line).
enum class FixedUse : std::uint8_t { reference, decode_only, variant_quantize, variant_recipe };

struct Config {
  FormatId element;
  BlockScale scale;
  int block;
  TwoLevel two_level = TwoLevel::reference;  // E4M3 two-level scales: one instantiation per style,
                                             // so no kernel carries the registers of another style
  Rounding rounding = Rounding::nearest_even;  // the elements' rounding, a constant in the kernel
  // E4M3 two-level configurations may also fix how the elements are scaled, the zero guard and
  // the block-scale clamp (else runtime fields), so the kernel carries one rule's code only.
  bool pinned = false;
  Apply apply = Apply::divide;
  ZeroGuard guard = ZeroGuard::block_and_scale;
  bool clamp = false;
  FixedUse use = FixedUse::reference;
  bool pipelined = false;  // FixedKernel::pipelined
  // Decode-only configurations: the decode arithmetic of an engine variant as constants
  // (dequantize_tensor_param, the unsigned zero).
  TensorParam tensor_param = TensorParam::decode;
  bool unsigned_zero = false;
  Recipe recipe{};  // variant_recipe: the whole recipe (its block the configuration's); variant_quantize: its division
};
// The fixed configurations, one list: a named recipe (formats/recipe_names.hpp), its block where
// the kernel's differs, whether the kernel pins the recipe's apply, zero guard and clamp, its use,
// and whether its 16-bit blocks run the pipelined loop (kPipelinedOf).
// A configuration quantizes every recipe of its element, scale kind, block, element rounding and
// two-level style (pinned: and those three fields) that is not an engine variant, with the
// reference arithmetic. Dequantize reads fewer fields (element, scale kind, block and the decode
// arithmetic: `computes`), so a configuration dequantizes every recipe of its shape whose decode
// arithmetic is the reference's, engine variants included; a decode-only entry has no quantize
// kernel and dequantizes its recipe's decode arithmetic. The workspace (requantize_e4m3) reads the
// shape alone. A variant_recipe entry quantizes its engine variant alone (every field matched), a
// variant_quantize entry every engine variant of its shape (element, scale kind, block) and division
// that no variant_recipe entry before it takes (the division a constant: the per-tensor Triton
// casts' `/` is div.full, and a runtime one kept tensor_code_words' IEEE path in their kernel, 1.5-2%
// slower on an H200). Kernels take an index into kFixed (nvcc's launch stubs need integral
// template arguments), kGeneric for the runtime-shaped instantiation.
struct FixedKernel {
  std::string_view recipe;
  int block = 0;  // 0: the recipe's
  bool pinned = false;
  FixedUse use = FixedUse::reference;
  bool pipelined = false;  // 4-bit: its 16-bit blocks run the pipelined loop (kPipelinedOf), where measured faster
};
constexpr FixedKernel kFixedKernels[] = {
    {"nvfp4"},           {"nvfp4", 32},      {"mxfp4-floor", 16},     {"mxfp4-floor"},
    {"mxfp8-e4m3-floor"}, {"mla-fp8-tile128"}, {"fp8-e4m3-tensor", kTensorChunk},
    {"mxint8"},          {"mxint4", 0, false, FixedUse::reference, true},  {"nvint4"},  {"nvfp4-flashinfer-kv"},
    {"nvfp4-vllm"},      {"nvfp4-4over6-paper", 0, true},
    {"blockfp4-e8m0-ceil"},  // its shape: block-FP4 with bit exponents and ties away
    // Engine variants' decode arithmetic (both block-FP4 recipes; both four-over-six package rules)
    {"nvfp4-compressed-tensors", 0, false, FixedUse::decode_only},
    {"nvfp4-4over6", 0, false, FixedUse::decode_only},
    {"blockfp4-e8m0-ceil", 0, false, FixedUse::decode_only},
    {"mla-model1-tile64", 0, false, FixedUse::decode_only},
    // Engine variants' quantize, each of its own (the packed variant route: has_packed_variant_form)
    {"nvfp4-torchao", 0, false, FixedUse::variant_recipe, true},
    {"nvfp4-modelopt", 0, false, FixedUse::variant_recipe, true},
    {"nvfp4-compressed-tensors", 0, false, FixedUse::variant_recipe, true},
    {"blockfp4-e8m0-ceil", 0, false, FixedUse::variant_recipe, true},
    {"blockfp4-e8m0-ceil-rne", 0, false, FixedUse::variant_recipe, true},
    {"nvfp4-4over6-static6", 0, false, FixedUse::variant_recipe},
    {"nvfp4-4over6", 0, false, FixedUse::variant_recipe},  // its usual block: has_packed_four_over_six_amax_form
    {"mxfp4-modelopt", 0, false, FixedUse::variant_recipe},  // 16-bit input (FP32: lane-split, kLaneVariants)
    // (MODEL1's E4M3 records quantize lane-split: kernels/lane_quantize.hpp kLaneVariants.)
    {"fp8-e4m3-tensor-torch", kTensorChunk, false, FixedUse::variant_recipe},  // per tensor: its IEEE division and cast
    // and by shape: per-tensor FP8 (the Triton casts).
    {"fp8-e4m3-tensor-triton", kTensorChunk, false, FixedUse::variant_quantize},
};
constexpr int kFixedCount = sizeof(kFixedKernels) / sizeof(kFixedKernels[0]);
constexpr Config config_of(const FixedKernel& k) {
  const Recipe r = recipe_from_name(k.recipe).value().recipe;  // a name kRecipes lacks does not compile
  Config c{r.element, r.scale, k.block != 0 ? k.block : r.block, r.two_level, r.element_rounding,
           k.pinned,  r.apply, r.zero_guard,                     r.clamp_block_scale};
  c.use = k.use;
  c.pipelined = k.pipelined;
  if (k.use == FixedUse::variant_recipe || k.use == FixedUse::variant_quantize) {  // variant_quantize: its division
    c.recipe = r;
    c.recipe.block = c.block;
  }
  if (k.use == FixedUse::decode_only) {
    c.two_level = TwoLevel::reference;  // the amax styles are tensor_param amax here
    c.tensor_param = dequantize_tensor_param(r);
    c.unsigned_zero = r.dequantize_unsigned_zero;
  }
  return c;
}
// Indexed by int: the kernels' C is kGeneric (-1) in expressions that `C != kGeneric &&` skips.
struct FixedConfigs {
  Config configs[kFixedCount];
  constexpr const Config& operator[](int c) const { return configs[c]; }
  constexpr const Config* begin() const { return configs; }
  constexpr const Config* end() const { return configs + kFixedCount; }
};
constexpr FixedConfigs kFixed = []<std::size_t... I>(std::index_sequence<I...>) {
  return FixedConfigs{{config_of(kFixedKernels[I])...}};
}(std::make_index_sequence<kFixedCount>{});
constexpr int kGeneric = -1;
template <int C>
constexpr int kBlockOf = C == kGeneric ? 0 : kFixed[C].block;

// Configurations whose 4-bit blocks go through quantize_block_packed: the reference ones, and each
// engine variant of its own (the variant route: formats/packed_quantize.hpp has_packed_variant_form).
template <int C>
constexpr bool kMayPackOf = C == kGeneric || (format_of(kFixed[C].element).bits() == 4 &&
                                              (kFixed[C].use == FixedUse::reference || kFixed[C].use == FixedUse::variant_recipe));

template <int C>
__device__ inline QuantizeShape specialise(QuantizeShape s) {
  if constexpr (C != kGeneric && kFixed[C].use == FixedUse::variant_recipe) {  // every field
    constexpr Recipe kRecipe = kFixed[C].recipe;
    s.recipe = kRecipe;
  } else if constexpr (C != kGeneric && kFixed[C].use == FixedUse::variant_quantize) {  // the shape and division
    s.recipe.element = kFixed[C].element;
    s.recipe.scale = kFixed[C].scale;
    s.recipe.division = kFixed[C].recipe.division;
    if (kFixed[C].scale != BlockScale::tensor_only) s.recipe.block = kFixed[C].block;
  } else if constexpr (C != kGeneric) {
    s.recipe.element = kFixed[C].element;
    s.recipe.scale = kFixed[C].scale;
    if (kFixed[C].scale == BlockScale::e4m3_two_level) s.recipe.two_level = kFixed[C].two_level;
    s.recipe.element_rounding = kFixed[C].rounding;
    s.recipe = with_reference_arithmetic(s.recipe);  // the variant fields as constants
    if (kFixed[C].scale != BlockScale::tensor_only) s.recipe.block = kFixed[C].block;
    if (kFixed[C].pinned) {
      s.recipe.apply = kFixed[C].apply;
      s.recipe.zero_guard = kFixed[C].guard;
      s.recipe.clamp_block_scale = kFixed[C].clamp;
    }
    s.recipe.tensor_param = kFixed[C].tensor_param;
    s.recipe.dequantize_unsigned_zero = kFixed[C].unsigned_zero;
  }
  return s;
}

// Configurations with a quantize kernel (decode-only ones have none), with dequantize and workspace
// kernels (variant_quantize and variant_recipe ones have none), and of the reference arithmetic.
template <int C>
constexpr bool kQuantizesOf = C == kGeneric || kFixed[C].use != FixedUse::decode_only;
template <int C>
constexpr bool kDecodesOf = C == kGeneric || kFixed[C].use == FixedUse::reference || kFixed[C].use == FixedUse::decode_only;
template <int C>
constexpr bool kReferenceOf = C != kGeneric && kFixed[C].use == FixedUse::reference;

// Whether configuration C may run the reference two-level rule (or four_over_six) or an engine
// variant of it, whose lean plans read the table of g's code terms (formats/packed_quantize.hpp:
// CodeTerms).
template <int C>
constexpr bool kTableOf = C == kGeneric ||
                          (kFixed[C].use == FixedUse::variant_recipe && kFixed[C].scale == BlockScale::e4m3_two_level &&
                           (kFixed[C].two_level == TwoLevel::reference || fouroversix_package_rule(kFixed[C].recipe))) ||
                          (kReferenceOf<C> && kFixed[C].scale == BlockScale::e4m3_two_level &&
                           (kFixed[C].two_level == TwoLevel::reference || kFixed[C].two_level == TwoLevel::four_over_six));

template <int C>
constexpr bool kOccupiedOf = C != kGeneric && (kReferenceOf<C> || kFixed[C].use == FixedUse::variant_recipe) &&
                             kFixed[C].scale == BlockScale::e4m3_two_level &&
                             (kFixed[C].two_level == TwoLevel::four_over_six ||
                              kFixed[C].two_level == TwoLevel::four_over_six_amax);

// Fixed configurations that lane_split sends to kernels/lane_quantize_device.cu for input T (the
// engine variants of kLaneVariants: E4M3 ones for every input, E2M1 ones for FP32).
template <int C, DType T>
constexpr bool kLaneSplitOf = (kReferenceOf<C> && kFixed[C].scale == BlockScale::e8m0_pow2 &&
                               ((kFixed[C].element == FormatId::e4m3fn && kFixed[C].block == 128) ||
                                (kFixed[C].block == 32 && (T == DType::fp32 || kFixed[C].element == FormatId::e4m3fn) &&
                                 kFixed[C].rounding == Rounding::nearest_even))) ||
                              (C != kGeneric && kFixed[C].use == FixedUse::variant_recipe &&
                               lane_variant_of(kFixed[C].recipe) >= 0 &&
                               (kFixed[C].element == FormatId::e4m3fn || T == DType::fp32));

// Fixed 8-bit block configurations of at most 32 elements: their 16-bit blocks are quantized from
// pair words (quantize_pair_words). In effect MXINT8: the MXFP8 rules' 16-bit blocks are lane-split
// (kLaneSplitOf: no kernel of theirs is built here).
template <int C>
constexpr bool kBytePipelinedOf = C != kGeneric && kFixed[C].use != FixedUse::decode_only &&
                                  format_of(kFixed[C].element).bits() == 8 && kFixed[C].scale != BlockScale::tensor_only &&
                                  kFixed[C].block <= 32;
// Whether configuration C with input T runs the pipelined loop (where x is 16-byte aligned): a
// block of BF16 or FP16 pair words, the next block's words loaded while this one is quantized
// (4over6, whose per-block work hides the load; the 8-bit blocks of kBytePipelinedOf, whose
// one-block loop waited on its loads; the 4-bit configurations marked pipelined: the engine
// variants whose per-block rules do more, and MXINT4. The reference NVFP4, NVINT4, MXFP4 and the
// package's one-candidate rule measured slower or the same: docs/performance.md).
template <int C, DType T>
constexpr bool kPipelinedOf = (kOccupiedOf<C> || kBytePipelinedOf<C> || (C != kGeneric && kFixed[C].pipelined)) &&
                              T != DType::fp32 && kBlockOf<C> % 8 == 0;

template <int C, DType T, class Codes, class Scales>
__device__ __forceinline__ void quantize_blocks(const QuantizeShape& s, const void* x, const GlobalTerms& t, Codes codes,
                                                Scales scales) {
  const std::int64_t blocks_per_row = s.cols / s.block();
  const std::int64_t total = s.rows * blocks_per_row;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if constexpr (kPipelinedOf<C, T>) {
    if ((reinterpret_cast<std::uintptr_t>(x) & 15) == 0) {  // so is every block (whole 16-byte vectors)
      constexpr int kN = kBlockOf<C>;
      std::uint32_t next[kN / 2];
      if (k < total) io::load_pair_words<kN, true>(x, k * kN, next);
      for (; k < total; k += stride) {
        std::uint32_t pairs[kN / 2];
        KVQ_UNROLL
        for (int i = 0; i < kN / 2; ++i) pairs[i] = next[i];
        if (k + stride < total) io::load_pair_words<kN, true>(x, (k + stride) * kN, next);
        quantize_pair_words<kN, !kBytePipelinedOf<C>>(s, T, t, pairs, codes, scales, 0, k);  // dense rows: block k of row 0
      }
      return;
    }
  }
  for (; k < total; k += stride)
    quantize_one_block<kBlockOf<C>, kMayPackOf<C>>(s, T, x, t, codes, scales, 0, k);  // dense rows: block k of row 0
}

// Fixed per-tensor configurations run quantize_tensor_span, a thread per 16 bytes of input (the
// engine variants' too: plan_block's per-tensor rule is theirs).
template <int C>
constexpr bool kTensorSpansOf = C != kGeneric && kQuantizesOf<C> && kFixed[C].scale == BlockScale::tensor_only;

template <int C, DType T, class Codes, class Scales>
__device__ __forceinline__ void quantize_body(QuantizeShape shape, const void* x, float g, Codes codes, Scales scales) {
  const QuantizeShape s = specialise<C>(shape);
  if constexpr (kTensorSpansOf<C>) {
    constexpr int kSpan = kTensorSpanOf(T);
    const BlockPlan p = plan_block(s.recipe, g, 0.0f, false);  // per tensor: g's rule alone
    const std::int64_t total = s.rows * s.cols / kSpan;
    const auto spans = [&]<bool kStreamed>() {
      for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < total;
           k += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
        quantize_tensor_span<kSpan, kStreamed>(s.recipe, p, T, x, kSpan * k, codes);
    };
    if (p.op == ElementOp::divide) {
      spans.template operator()<true>();
    } else {
      spans.template operator()<false>();
    }
    return;
  }
  if constexpr (kTableOf<C>) {  // g's code table once a thread block
    __shared__ CodeTerms shared_codes[kE4m3Codes];
    const float rg = 1.0f / g;
    fill_code_table(s.recipe, g, rg, shared_codes);
    __syncthreads();
    const GlobalTerms t = global_terms(g, rg, shared_codes);
    if (t.lean) {  // the usual g: the loop sees lean and the table as constants (no per-block tests)
      quantize_blocks<C, T>(s, x, GlobalTerms{g, rg, shared_codes, true}, codes, scales);
      return;
    }
  }
  quantize_blocks<C, T>(s, x, global_terms(g), codes, scales);  // no table: the plans divide (the same results)
}

// with_type.template operator()<C>() for the first fixed configuration from C on that matches,
// else for kGeneric.
template <int C, typename Matches, typename WithType>
cudaError_t first_fixed(const Matches& matches, WithType& with_type) {
  if constexpr (C == kFixedCount) {
    return with_type.template operator()<kGeneric>();
  } else {
    if (matches(kFixed[C])) return with_type.template operator()<C>();
    return first_fixed<C + 1>(matches, with_type);
  }
}

// What a kernel does with the recipe: which of its fields a configuration must match.
enum class Use : std::uint8_t { quantize, dequantize, workspace };

// Whether configuration c computes recipe r's `use` for blocks of `block` elements.
constexpr bool computes(const Config& c, const Recipe& r, int block, Use use) {
  if (c.element != r.element || c.scale != r.scale || c.block != block) return false;
  switch (use) {
    case Use::workspace:  // requantize_e4m3 reads the shape alone
      return c.use == FixedUse::reference || c.use == FixedUse::decode_only;
    case Use::dequantize:
      return (c.use == FixedUse::reference || c.use == FixedUse::decode_only) &&
             c.tensor_param == dequantize_tensor_param(r) &&
             c.unsigned_zero == r.dequantize_unsigned_zero;
    case Use::quantize: {
      if (c.use == FixedUse::variant_recipe) {  // the variant exactly, whatever its decode-only field
        Recipe quantized = r;
        quantized.block = c.block;
        quantized.dequantize_unsigned_zero = c.recipe.dequantize_unsigned_zero;
        return quantized == c.recipe;
      }
      if (c.use == FixedUse::variant_quantize) return is_engine_variant(r) && r.division == c.recipe.division;
      return c.use == FixedUse::reference && c.rounding == r.element_rounding && !is_engine_variant(r) &&
             (c.scale != BlockScale::e4m3_two_level || c.two_level == r.two_level) &&
             (!c.pinned || (c.apply == r.apply && c.guard == r.zero_guard && c.clamp == r.clamp_block_scale));
    }
  }
  return false;
}

// Every recipe of kFixedKernels is quantized (but the decode-only entries'), dequantized and
// requantized to the E4M3 workspace by some fixed configuration: a configuration its recipe does not match leaves that recipe on the
// generic kernel (the same bytes at a fraction of the speed, which no property sees).
constexpr bool fixed_recipes_reach_fixed_kernels() {
  for (const FixedKernel& k : kFixedKernels) {
    const Recipe r = recipe_from_name(k.recipe).value().recipe;
    const int block = k.block != 0 ? k.block : r.block;
    bool quantized = k.use == FixedUse::decode_only, dequantized = false, requantized = false;
    for (const Config& c : kFixed.configs) {
      quantized = quantized || computes(c, r, block, Use::quantize);
      dequantized = dequantized || computes(c, r, block, Use::dequantize);
      requantized = requantized || computes(c, r, block, Use::workspace);
    }
    if (!quantized || !dequantized || !requantized) return false;
  }
  return true;
}
static_assert(fixed_recipes_reach_fixed_kernels(),
              "a kFixedKernels recipe that no fixed configuration quantizes, dequantizes or requantizes");

// Calls launch.template operator()<config, dtype>() for the shape's recipe and the data type.
template <typename Launch>
cudaError_t dispatch(const QuantizeShape& s, DType t, Launch&& launch, Use use = Use::quantize) {
  auto with_type = [&]<int C>() {
    switch (t) {
      case DType::fp32: return launch.template operator()<C, DType::fp32>();
      case DType::bf16: return launch.template operator()<C, DType::bf16>();
      case DType::fp16: return launch.template operator()<C, DType::fp16>();
    }
    return cudaErrorInvalidValue;
  };
  const auto matches = [&](const Config& c) { return computes(c, s.recipe, s.block(), use); };
  return first_fixed<0>(matches, with_type);
}

constexpr int kThreads = 128;
static_assert(kThreads >= kE4m3Codes, "a thread a table entry (kernels/code_table.cuh)");

}  // namespace kvq::kernels::quantize_shared
