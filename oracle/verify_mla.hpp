// An MLA cache writer checked from its tensors (docs/ports.md "MLA caches"): BF16 tokens quantized
// into a paged MLA cache of one of kvq's layouts (docs/layouts.md: the 656-byte FlashMLA record,
// vLLM's MODEL1 with its block-tail scales) at slot_mapping, as vLLM's quantize_and_insert_k_cache
// and SGLang's quantize_k_cache write it. The model is kvq's twin (mla_quantize_cpu) under a tile
// rule (the layout's own, mla_tile_recipe, or a named recipe at the layout's tile: FlashMLA's
// power-of-two mla-fp8-tile128) run on the cache as it was before the call; the whole cache is compared
// byte for byte, so bytes of other slots, block padding and the tail's pad bytes count too.
// The same comparison checks a requantizer (docs/ports.md "MLA requantize"): a whole 576-byte cache
// converted to the 656-byte record (kernels::mla_requantize_576_to_656_cpu), k_scale folded into the
// tile scales or dropped; and a dequantizer (docs/ports.md "MLA dequantize"): cache slots read back
// as rows of BF16/FP16/FP32 values (kernels::mla_dequantize_cpu), compared value by value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/mla_kernels.hpp"
#include "kernels/status.hpp"
#include "oracle/layout_identification.hpp"

namespace kvq::ports {

// What the port's call does: quantize BF16 tokens into the cache, requantize a whole cache, or
// dequantize slots of a cache into rows of values.
enum class MlaCall : std::uint8_t { quantize, requantize, dequantize };

// How a dequantizer rounds an FP8 code times its scale (tile scale, or k_scale) to the output dtype:
// the product rounded to FP32 first, then to the output dtype (kvq's mla_dequantize_cpu; SGLang's
// Triton dequantize_k_cache), or the exact product rounded once. They differ only for BF16/FP16
// outputs and scales that are not powers of two (docs/ports.md "MLA dequantize").
enum class MlaDequantRounding : std::uint8_t { fp32_product, exact_product };
const char* name_of(MlaDequantRounding r);

struct MlaPort {
  MlaCall call = MlaCall::quantize;
  kernels::MlaCacheShape shape;            // the written cache: layout, num_blocks, block_size
  Recipe tile;                             // the tile rule (mla_tile_rule)
  std::string tile_name;                   // its recipe name
  std::vector<std::uint16_t> k;            // BF16 [tokens, dims of the layout]
  std::vector<std::int64_t> slot_mapping;  // [tokens]; < 0: padding
  std::vector<std::uint8_t> after, before;  // the cache after the call, and before it
  bool before_known = true;
  // requantize: the source cache (fp8_nope_fp8_rope, the same blocks), its k_scale and what the
  // conversion does with it
  std::vector<std::uint8_t> src;
  float k_scale = 1.0f;
  kernels::KScale k_scale_use = kernels::KScale::fold;
  // dequantize: `src` is the cache (of `shape`), slot_mapping the slot each output row reads, `after`
  // the output rows [rows, dims] in `output`
  kernels::DType output = kernels::DType::bf16;
  MlaDequantRounding rounding = MlaDequantRounding::fp32_product;
  std::int64_t tokens() const { return static_cast<std::int64_t>(slot_mapping.size()); }
};

// A differing cache byte (quantize, requantize), or a differing output value (dequantize: offset is
// the value's index, expected and actual its bits, token the output row).
struct MlaDifference {
  std::int64_t offset = 0;
  std::uint32_t before = 0, expected = 0, actual = 0;
  bool addressed = false;
  std::int64_t block = 0, entry = -1, slot = -1, token = -1;  // entry -1: block padding
  kernels::MlaPart part = kernels::MlaPart::pad;
  std::int64_t index = 0;  // the byte within its part of the token's record or tail
};

struct MlaComparison {
  Status error;
  std::int64_t bytes = 0, addressed_mismatches = 0, untouched_changed = 0;
  std::vector<MlaDifference> first;
  bool exact() const { return error.ok() && addressed_mismatches == 0 && untouched_changed == 0; }
  std::int64_t differing() const { return addressed_mismatches + untouched_changed; }
};

// Named recipe `name` as layout l's tile rule (its block the layout's tile), or an error naming it;
// an empty name gives the layout's own rule (kernels::mla_tile_recipe) and its name.
Status mla_tile_rule(const kernels::MlaLayout& l, const std::string& name, Recipe* rule, std::string* rule_name);

MlaComparison compare_mla(const MlaPort& p, std::size_t keep);
std::string describe_mla(const MlaPort& p, const MlaComparison& c);

// Every named recipe that can be the layout's tile rule (kernels::mla_tile_recipe_error), for a
// requantizer both uses of k_scale, for a dequantizer both roundings, tried on the whole output.
struct MlaCandidate {
  std::string recipe;
  MlaComparison comparison;
};
using MlaIdentification = LayoutIdentification<MlaCandidate>;
MlaIdentification identify_mla(const MlaPort& p, std::size_t nearest);

}  // namespace kvq::ports
