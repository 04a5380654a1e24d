#include "oracle/identify.hpp"

#include <algorithm>
#include <functional>

#include "formats/recipe_names.hpp"

namespace kvq::ports {
namespace {

struct Edit {
  int dimension;  // two edits of one dimension never combine
  std::string words;
  std::function<void(Interpretation&)> apply;
};

const char* two_level_words(TwoLevel t) {
  switch (t) {
    case TwoLevel::reference: return "scales as the reference (bmax/6)/g and x / (sf*g)";
    case TwoLevel::rcp_decode: return "scales as FlashInfer KV (rcp of the decode scale)";
    case TwoLevel::rcp_encode: return "scales as vLLM (the encode scale 1/g)";
    case TwoLevel::four_over_six: return "scales 4-over-6 (the paper's decode form)";
    case TwoLevel::amax_encode: return "scales as the four-over-six package (amax, enc = D/amax)";
    case TwoLevel::four_over_six_amax: return "scales 4-over-6 as the four-over-six package";
  }
  return "";
}
const char* guard_words(ZeroGuard z) {
  switch (z) {
    case ZeroGuard::block_and_scale: return "zero guard on bmax == 0 and sf*g == 0 (kvq reference)";
    case ZeroGuard::block_max: return "zero guard on bmax == 0 only (FlashInfer)";
    case ZeroGuard::rounded_scale: return "zero guard on the rounded scale == 0 only (vLLM)";
    case ZeroGuard::none: return "no zero guard";
  }
  return "";
}
const char* pow2_words(Pow2Rule p) {
  switch (p) {
    case Pow2Rule::floor: return "E8M0 exponent by floor (OCP)";
    case Pow2Rule::ceil: return "E8M0 exponent by ceil";
    case Pow2Rule::even: return "E8M0 exponent by round-to-even then floor";
    case Pow2Rule::rceil: return "E8M0 exponent by ceil(log2(bmax * (1/max)))";
    case Pow2Rule::ceil_ratio: return "E8M0 exponent by ceil(log2(max(bmax/max, floor)))";
  }
  return "";
}

const char* division_words(Division v) {
  switch (v) {
    case Division::ieee: return "divides in IEEE";
    case Division::full_approx: return "divides as Triton's `/` (div.full.f32, not IEEE)";
    case Division::constant_reciprocal: return "divides by a constant as PyTorch on CUDA (x * RN(1/c))";
    case Division::number_over_tensor: return "divides in IEEE but D / amax as RN(RN(1/amax) * D) (PyTorch's number / tensor)";
  }
  return "";
}
const char* cast_words(ElementCast v) {
  switch (v) {
    case ElementCast::satfinite: return "elements cast satfinite (CUDA cvt)";
    case ElementCast::satfinite_unsigned_zero: return "elements cast satfinite with +-0 as +0 (sign from v < 0)";
    case ElementCast::satfinite_negative_zero: return "elements cast satfinite with +-0 as -0 (ModelOpt MXFP4)";
    case ElementCast::nonsaturating: return "elements cast without saturation (PyTorch eager: NaN past 464)";
    case ElementCast::e2m1_by_rounding: return "elements rounded on the E2M1 grid unsaturated, +-0 as 0x0 (four-over-six package)";
    case ElementCast::triton_clamp: return "elements through tl.clamp before the cast (NaN -> +max)";
    case ElementCast::bounds_count: return "elements coded by counting bounds <= |v| (+-0 and NaN as 0x0)";
    case ElementCast::torchao_e2m1: return "elements cast by torchao's E2M1 bit arithmetic (NaN -> 0x4)";
  }
  return "";
}

// The single changes that make sense for a base recipe and the data.
std::vector<Edit> edits_for(const Recipe& base, const PortData& d) {
  std::vector<Edit> e;
  const bool two_level = base.scale == BlockScale::e4m3_two_level;
  const bool pow2 = base.scale == BlockScale::e8m0_pow2;
  for (const auto& tie : {std::pair{Rounding::nearest_even, "ties round to even"},
                          std::pair{Rounding::nearest_away, "ties round up (away from zero)"},
                          std::pair{Rounding::nearest_toward_zero, "ties round toward zero"}}) {
    const Rounding rounding = tie.first;
    if (rounding != base.element_rounding)
      e.push_back({0, tie.second, [=](Interpretation& h) { h.recipe.element_rounding = rounding; }});
  }
  e.push_back({1, "the scaled element rounded to BF16 first (double rounding)",
               [](Interpretation& h) { h.recipe.element_input_bf16 = true; }});
  const bool apply_matters = base.scale == BlockScale::tensor_only ||
                             (two_level && (base.two_level == TwoLevel::reference || base.two_level == TwoLevel::four_over_six));
  if (apply_matters) {
    const bool divides = base.apply == Apply::divide;
    e.push_back({2, divides ? "multiplies by the reciprocal instead of dividing" : "divides instead of multiplying by the reciprocal",
                 [=](Interpretation& h) { h.recipe.apply = divides ? Apply::multiply_reciprocal : Apply::divide; }});
  }
  if (two_level) {
    for (const TwoLevel t : {TwoLevel::reference, TwoLevel::rcp_decode, TwoLevel::rcp_encode})
      if (t != base.two_level)
        e.push_back({3, two_level_words(t), [=](Interpretation& h) { h.recipe.two_level = t; }});
    if (base.two_level == TwoLevel::rcp_decode || base.two_level == TwoLevel::rcp_encode) {
      const bool approx = base.reciprocal == Reciprocal::approx_ftz;
      e.push_back({4, approx ? "IEEE reciprocals instead of rcp.approx.ftz" : "rcp.approx.ftz instead of IEEE reciprocals",
                   [=](Interpretation& h) { h.recipe.reciprocal = approx ? Reciprocal::ieee : Reciprocal::approx_ftz; }});
    }
    for (const ZeroGuard z : {ZeroGuard::block_and_scale, ZeroGuard::block_max, ZeroGuard::rounded_scale, ZeroGuard::none})
      if (z != base.zero_guard) e.push_back({5, guard_words(z), [=](Interpretation& h) { h.recipe.zero_guard = z; }});
    e.push_back({6, base.clamp_block_scale ? "no clamp of the block scale" : "the block scale clamped to [2^-6, 448]",
                 [=](Interpretation& h) { h.recipe.clamp_block_scale = !base.clamp_block_scale; }});
  }
  if (two_level || base.scale == BlockScale::tensor_only) {
    const bool given = d.global_scale && !d.global_scale->is_output;
    if (given || (d.global_scale && d.global_scale->is_output)) {
      e.push_back({7, "the global scale read in the other convention (encode <-> decode)",
                   [](Interpretation& h) { h.scale_convention_flipped = !h.scale_convention_flipped; }});
    }
    if (!given) {  // the tensor scale comes from amax: the factor-6 conventions
      for (const float f : {6.0f, 1.0f / 6.0f}) {
        const float divisor = base.tensor_divisor / f;
        e.push_back({8, "global scale amax/" + std::to_string(static_cast<int>(divisor + 0.5f)) + " instead of amax/" +
                            std::to_string(static_cast<int>(base.tensor_divisor + 0.5f)) + " (factor 6)",
                     [=](Interpretation& h) { h.recipe.tensor_divisor = divisor; }});
      }
    }
  }
  if (pow2) {
    for (const Pow2Rule p : {Pow2Rule::floor, Pow2Rule::ceil, Pow2Rule::even, Pow2Rule::rceil, Pow2Rule::ceil_ratio})
      if (p != base.pow2) e.push_back({9, pow2_words(p), [=](Interpretation& h) { h.recipe.pow2 = p; }});
    for (const int bias : {125, 126, 128, 129})
      e.push_back({10, "E8M0 bias " + std::to_string(bias) + " instead of 127", [=](Interpretation& h) { h.recipe.e8m0_bias = bias; }});
  }
  for (const Division v : {Division::ieee, Division::full_approx, Division::constant_reciprocal, Division::number_over_tensor})
    if (v != base.division)
      e.push_back({14, division_words(v), [=](Interpretation& h) { h.recipe.division = v; }});
  if (base.element == FormatId::e4m3fn || base.element == FormatId::e2m1) {
    const ElementCast unsaturated = base.element == FormatId::e4m3fn ? ElementCast::nonsaturating : ElementCast::e2m1_by_rounding;
    for (const ElementCast v : {ElementCast::satfinite, ElementCast::satfinite_unsigned_zero,
                                ElementCast::satfinite_negative_zero, unsaturated, ElementCast::triton_clamp,
                                ElementCast::torchao_e2m1, ElementCast::bounds_count})
      if (v != base.element_cast && (v != ElementCast::torchao_e2m1 || base.element == FormatId::e2m1))
        e.push_back({15, cast_words(v), [=](Interpretation& h) { h.recipe.element_cast = v; }});
  }
  if (pow2) {
    e.push_back({16, base.exponent_by_log2 ? "exponents from the bits" : "exponents from the FP32 log2 (rounded, then ceil/floor)",
                 [=](Interpretation& h) { h.recipe.exponent_by_log2 = !base.exponent_by_log2; }});
    if (d.input != DType::fp32)  // eager PyTorch on a 16-bit tensor rounds the ratio and its log2 to it
      e.push_back({17, "the scale's ratio, log2 and elements in the input dtype, zeros dequantized with their sign (eager PyTorch)",
                   [=](Interpretation& h) {
                     h.recipe.scale_dtype = d.input == DType::bf16 ? FormatId::bf16 : FormatId::fp16;
                     h.recipe.exponent_by_log2 = true;
                     h.recipe.dequantize_unsigned_zero = false;  // +0 for 0x8 is torch.compile's
                   }});
    e.push_back({18, base.pow2_min_normal_divisor ? "elements scaled by 2^-e exactly" : "elements divided by max(2^e, 2^-126) (torchao)",
                 [=](Interpretation& h) { h.recipe.pow2_min_normal_divisor = !base.pow2_min_normal_divisor; }});
    e.push_back({21, base.pow2_zero_byte_unscaled ? "scale byte 0 scales by 2^127" : "scale byte 0 scales the elements by 1 (torchao RCEIL)",
                 [=](Interpretation& h) { h.recipe.pow2_zero_byte_unscaled = !base.pow2_zero_byte_unscaled; }});
    e.push_back({19, base.float_exponent ? "NaN or inf blocks as OCP MX (scale 0xFF, NaN codes)"
                                         : "the exponent a float (NaN ignored by the max, inf max: 0xFF, elements * 2^-inf)",
                 [=](Interpretation& h) { h.recipe.float_exponent = !base.float_exponent; }});
  }
  if (d.dequantized)
    e.push_back({20, base.dequantize_unsigned_zero ? "zeros dequantized with their sign (0x8 -> -0)" : "zeros dequantized as +0",
                 [=](Interpretation& h) { h.recipe.dequantize_unsigned_zero = !base.dequantize_unsigned_zero; }});
  if (two_level && base.tensor_param == TensorParam::encode && d.input != DType::fp32)
    e.push_back({17, "the global scale and block ratio computed in the input dtype (16-bit observer statistics)",
                 [=](Interpretation& h) { h.recipe.scale_dtype = d.input == DType::bf16 ? FormatId::bf16 : FormatId::fp16; }});
  if (base.scale == BlockScale::tensor_only)
    e.push_back({5, base.zero_guard == ZeroGuard::none ? "a zero scale zeroes the elements" : "no guard on a zero scale (x * (1/0))",
                 [=](Interpretation& h) {
                   h.recipe.zero_guard = base.zero_guard == ZeroGuard::none ? ZeroGuard::block_and_scale : ZeroGuard::none;
                 }});
  if (format_of(base.element).bits() == 4 && static_cast<std::int64_t>(d.codes.size()) * 2 == d.rows * d.cols)
    e.push_back({11, "element 2i in the high nibble", [](Interpretation& h) {
                   h.nibbles = h.nibbles == NibbleOrder::low_first ? NibbleOrder::high_first : NibbleOrder::low_first;
                 }});
  if (base.scale != BlockScale::tensor_only)
    for (const ScaleLayout l : {ScaleLayout::row_major, ScaleLayout::token_group4, ScaleLayout::swizzle_128x4})
      if (l != d.scale_layout)
        e.push_back({13, std::string("block scales laid out ") + name_of(l), [=](Interpretation& h) { h.scale_layout = l; }});
  if (base.scale != BlockScale::tensor_only)
    for (const int block : {16, 32})
      if (block != base.block)
        e.push_back({12, "block " + std::to_string(block) + " instead of " + std::to_string(base.block),
                     [=](Interpretation& h) { h.recipe.block = block; }});
  return e;
}

}  // namespace

std::string Variant::phrase() const {
  std::string s = base;
  for (std::size_t i = 0; i < changes.size(); ++i) s += (i == 0 ? " except " : " and ") + changes[i];
  return s;
}

std::vector<Variant> variants_for(const PortData& d, int max_changes) {
  std::vector<Variant> out;
  for (const NamedRecipe& named : kRecipes) {
    Interpretation base{named.recipe, d.nibbles, d.scale_layout};
    if (d.block && named.recipe.scale != BlockScale::tensor_only) base.recipe.block = d.block;
    if ((named.recipe.scale == BlockScale::tensor_only) == d.has_scales) continue;  // scales where the recipe has them
    const auto edits = edits_for(base.recipe, d);
    auto add = [&](std::vector<const Edit*> chosen) {
      Variant v{std::string(named.name), base, {}};
      for (const Edit* e : chosen) {
        e->apply(v.how);
        v.changes.push_back(e->words);
      }
      if (check_layout(d, v.how).ok()) out.push_back(std::move(v));
    };
    add({});
    if (max_changes >= 1)
      for (const Edit& a : edits) add({&a});
    if (max_changes >= 2)
      for (std::size_t i = 0; i < edits.size(); ++i)
        for (std::size_t j = i + 1; j < edits.size(); ++j)
          if (edits[i].dimension != edits[j].dimension) add({&edits[i], &edits[j]});
  }
  return out;
}

Identification identify(const PortData& d, int max_changes, std::size_t nearest) {
  Identification id;
  std::vector<Candidate> all;
  const auto variants = variants_for(d, max_changes);
  for (int distance = 0; distance <= max_changes && id.exact.empty(); ++distance) {
    for (const Variant& v : variants) {
      if (static_cast<int>(v.changes.size()) != distance) continue;
      ++id.tried;
      Candidate c{v, compare(d, v.how, 0, false)};
      if (c.comparison.exact()) id.exact.push_back(c);
      all.push_back(std::move(c));
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.comparison.mismatches() != b.comparison.mismatches()) return a.comparison.mismatches() < b.comparison.mismatches();
    return a.variant.changes.size() < b.variant.changes.size();
  });
  for (const Candidate& c : all) {
    if (id.nearest.size() >= nearest) break;
    if (!c.comparison.exact()) id.nearest.push_back(c);
  }
  return id;
}

}  // namespace kvq::ports
