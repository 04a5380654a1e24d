// The packed quantizer (formats/packed_quantize.hpp) against quantize_block, block by block, for
// every 4-bit recipe at blocks 16 and 32 and any tensor scale g (the kernel properties take g
// from the tensor's amax only): the same scale code and the same codes, packed. The blocks
// weigh in what its fast forms decide differently from quantize_block's element code: E2M1
// ties (half to even, half away), NaN and inf, zero and subnormal blocks, and the blocks on
// which the four_over_six candidates' squared errors tie (both 0: ties keep /6).
#include <cmath>
#include <ostream>
#include <sstream>

#include "formats/packed_quantize.hpp"
#include "formats/recipe_names.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/harness/rapidcheck_bridge.hpp"

namespace kvq::props {
namespace {

struct PackedCase {
  float g = 0.0f;
  std::vector<float> x;
};

void showValue(const PackedCase& c, std::ostream& os) {
  os << "g " << hex_code(kFP32, bits_of(c.g)) << " x [";
  for (std::size_t i = 0; i < c.x.size(); ++i) os << (i ? " " : "") << hex_code(kFP32, bits_of(c.x[i]));
  os << "]";
}

// m * 2^e for m drawn from `magnitudes` with a random sign.
rc::Gen<std::vector<float>> scaled_from(int n, std::vector<float> magnitudes, int e) {
  return rc::gen::container<std::vector<float>>(
      n, rc::gen::map(rc::gen::pair(rc::gen::elementOf(magnitudes), rc::gen::arbitrary<bool>()),
                      [e](std::pair<float, bool> p) { return std::ldexp(p.second ? -p.first : p.first, e); }));
}

rc::Gen<PackedCase> gen_case(const Recipe& r, int n) {
  return rc::gen::exec([=] {
    using V = std::vector<float>;
    const int e = *rc::gen::inRange(-30, 30);
    const V midpoints{0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 0.0f};  // E2M1 ties, max 6
    V x = *rc::gen::weightedOneOf<V>({
        {4, rc::gen::container<V>(n, rc::gen::map(rc::gen::inRange(-4000, 4001),
                                                  [e](int m) { return std::ldexp(static_cast<float>(m), e - 10); }))},
        {2, scaled_from(n, midpoints, e)},
        {2, scaled_from(n, {0.0f, 3.0f, 6.0f}, e)},  // on both four_over_six grids where g is 2^(e-k)
        {1, rc::gen::container<V>(n, rc::gen::map(rc::gen::inRange<std::uint32_t>(0, 0x00800000u),
                                                  [](std::uint32_t b) { return float_from_bits(b); }))},
        {1, rc::gen::container<V>(n, rc::gen::map(rc::gen::arbitrary<std::uint32_t>(),
                                                  [](std::uint32_t b) { return float_from_bits(b); }))},
        {1, rc::gen::just(V(static_cast<std::size_t>(n), 0.0f))},
        // One value near FP32's top, the rest near its bottom, any signs: quotients and products
        // that underflow to +-0 (the variant route's zero signs: zero_sign_of)
        {1, rc::gen::exec([n] {
           V w = *scaled_from(n, {0.0f, 1.0f, 1.5f, 1.75f}, *rc::gen::inRange(-149, -100));
           w[*rc::gen::inRange(0, n)] = std::ldexp(*rc::gen::element(1.0f, -1.5f), *rc::gen::inRange(90, 128));
           return w;
         })},
        // One value from 2^14 to 2^21, the rest among BF16's smallest magnitudes and zeros of either
        // sign: plans on both sides of the bound under which no nonzero 16-bit input has a zero value
        // (keeps_nonzero_pairs: a multiplier of 2^-16, a divisor of 2^16), quotients and products
        // that round to +-0 past it (a route that skipped the smallest-magnitude test there differs
        // from quantize_block in about 7% of these blocks)
        {1, rc::gen::exec([n] {
           V w = *scaled_from(n, {0.0f, 1.0f, 1.5f, 1.75f}, *rc::gen::inRange(-134, -126));
           w[*rc::gen::inRange(0, n)] = std::ldexp(*rc::gen::element(1.0f, -1.5f), *rc::gen::inRange(14, 22));
           return w;
         })},
    });
    if (*rc::gen::inRange(0, 8) == 0)  // NaN, inf or FP32 max somewhere
      x[*rc::gen::inRange(0, n)] = *rc::gen::element(NAN, -NAN, INFINITY, -INFINITY, kFp32Max, -0.0f);
    float amax = 0.0f;
    for (const float v : x) amax = std::fabs(v) > amax ? std::fabs(v) : amax;
    const float g = *rc::gen::weightedOneOf<float>({
        {4, rc::gen::just(tensor_scale(r, amax))},
        {3, rc::gen::map(rc::gen::inRange(-12, 4), [e](int k) { return std::ldexp(1.0f, e + k); })},
        // large against the block: E4M3 block scales in their subnormal range, whose rounding can
        // take the largest scaled value to 7 and past (the four-over-six package's rounding: 8)
        {1, rc::gen::map(rc::gen::inRange(10, 24), [e](int k) { return std::ldexp(1.0f, e + k); })},
        {1, rc::gen::element(0.0f, 0x1p-149f, 0x1p-130f, 0x1p100f, kFp32Max, INFINITY, NAN, -0x1p-3f)},
    });
    return PackedCase{g, x};
  });
}

// Both ways in: g alone (its terms computed for the block), and g's terms with its code table;
// and the 16-bit forms (PairWords: paired maxima and signs from pair words) on the block's values
// cut to BF16 (the low 16 bits cleared: NaN payloads there become inf) and rounded to FP16 (NaN
// stays NaN; values past FP16's range become inf).
template <int kN>
void check_pair_forms(const Recipe& r, const PackedCase& c) {
  for (const PairWords form : {PairWords::bf16, PairWords::fp16}) {
    std::vector<float> x(c.x.size());
    std::uint16_t halves[kN];
    for (std::size_t i = 0; i < x.size(); ++i) {
      halves[i] = form == PairWords::bf16 ? static_cast<std::uint16_t>(bits_of(c.x[i]) >> 16) : fp16_rne_fast(c.x[i]);
      x[i] = form == PairWords::bf16 ? float_from_bits(std::uint32_t{halves[i]} << 16) : fp16_value(halves[i]);
    }
    std::uint32_t pairs[kN / 2];
    for (int i = 0; i < kN / 2; ++i) pairs[i] = halves[2 * i] | (std::uint32_t{halves[2 * i + 1]} << 16);
    std::uint32_t words[kN / 8], expected_words[kN / 8];
    std::uint8_t codes[kN];
    const CodeTable table = code_table(r, c.g);
    const GlobalTerms t = global_terms(c.g, table.at);
    const std::uint8_t scale = form == PairWords::bf16
                                   ? quantize_block_packed<kN, PairWords::bf16>(r, t, x.data(), words, pairs)
                                   : quantize_block_packed<kN, PairWords::fp16>(r, t, x.data(), words, pairs);
    const std::uint8_t expected_scale = quantize_block(r, c.g, x.data(), kN, codes);
    pack_codes(codes, kN, expected_words);
    RC_ASSERT(hex_code(kE4M3FN, scale) == hex_code(kE4M3FN, expected_scale));
    for (int w = 0; w < kN / 8; ++w) RC_ASSERT(hex_code(kFP32, words[w]) == hex_code(kFP32, expected_words[w]));
  }
}
template <int kN>
void check_packed(const Recipe& r, const PackedCase& c) {
  std::uint32_t words[kN / 8], table_words[kN / 8], expected_words[kN / 8];
  std::uint8_t codes[kN];
  const CodeTable table = code_table(r, c.g);
  PackedRoute route = PackedRoute::quantize_block, table_route = PackedRoute::quantize_block;
  const std::uint8_t scale = quantize_block_packed<kN>(r, c.g, c.x.data(), words, &route);
  const std::uint8_t table_scale =
      quantize_block_packed<kN>(r, global_terms(c.g, table.at), c.x.data(), table_words, nullptr, &table_route);
  RC_TAG(name_of(route), name_of(table_route));
  const std::uint8_t expected_scale = quantize_block(r, c.g, c.x.data(), kN, codes);
  pack_codes(codes, kN, expected_words);
  RC_ASSERT(hex_code(kE4M3FN, scale) == hex_code(kE4M3FN, expected_scale));
  RC_ASSERT(hex_code(kE4M3FN, table_scale) == hex_code(kE4M3FN, expected_scale));
  for (int w = 0; w < kN / 8; ++w) {
    RC_ASSERT(hex_code(kFP32, words[w]) == hex_code(kFP32, expected_words[w]));
    RC_ASSERT(hex_code(kFP32, table_words[w]) == hex_code(kFP32, expected_words[w]));
  }
  check_pair_forms<kN>(r, c);
}

// m * 2^e for e in [lo, hi) and m uniform over FP32's significands in [1, 2).
rc::Gen<float> log_uniform(int lo, int hi) {
  return rc::gen::map(rc::gen::pair(rc::gen::inRange(lo, hi), rc::gen::inRange<std::uint32_t>(0, 0x800000u)),
                      [](std::pair<int, std::uint32_t> p) { return std::ldexp(float_from_bits(0x3f800000u | p.second), p.first); });
}
// A tensor parameter over and past the lean range: log-uniform, a power of two (whose scales hit
// E4M3 midpoints exactly), or the range's bounds and their neighbours, or `other`.
float lean_range_parameter(float other) {
  return *rc::gen::weightedOneOf<float>({
      {6, log_uniform(-46, 46)},
      {2, rc::gen::map(rc::gen::inRange(-42, 42), [](int e) { return std::ldexp(1.0f, e); })},
      {1, rc::gen::element(0x1p-40f, 0x1p40f, 0x1.fffffep-41f, 0x1.000002p40f, other)},
  });
}
// A lean_range_parameter g with recipe r's table of its code terms and its GlobalTerms (which point
// into the table: not copied).
struct ParameterTerms {
  ParameterTerms(const Recipe& r, float other)
      : g(lean_range_parameter(other)), table(code_table(r, g)), t(global_terms(g, table.at)) {}
  ParameterTerms(const ParameterTerms&) = delete;
  float g;
  CodeTable table;
  GlobalTerms t;
};
// The same plan: scale code, operation and multiplier, bit for bit.
void assert_same_plan(const BlockPlan& mine, const BlockPlan& plan) {
  RC_ASSERT(hex_code(kE4M3FN, mine.scale_code) == hex_code(kE4M3FN, plan.scale_code));
  RC_ASSERT(static_cast<int>(mine.op) == static_cast<int>(plan.op));
  RC_ASSERT(hex_code(kFP32, bits_of(mine.by)) == hex_code(kFP32, bits_of(plan.by)));
}

// check(bmax) on a log-uniform bmax (a quarter of the cases), else where a block scale s = bmax *
// per_bmax lies on an E4M3 midpoint (8 + k + 1/2) * 2^(e - 3) and on the 16 FP32 neighbours of that
// bmax: the scale's ties and near ties, where a quotient off by an ulp shows.
template <class Check>
void on_scale_ties(double per_bmax, Check check) {
  if (*rc::gen::inRange(0, 4) == 0) {
    check(*log_uniform(-60, 60));
    return;
  }
  const int e = *rc::gen::inRange(-9, 9), k = *rc::gen::inRange(0, 8);
  const auto center = static_cast<float>(std::ldexp(8.5 + k, e - 3) / per_bmax);
  for (int nudge = -8; nudge <= 8; ++nudge) check(float_from_bits(bits_of(center) + static_cast<std::uint32_t>(nudge)));
}

// The lean plan (reciprocals instead of IEEE division) equals two_level_plan wherever it is used
// (the reference rule's, and the engine variants' of the packed variant route):
// g and bmax log-uniform over and past [kLeanScaleMin, kLeanScaleMax], with the bounds themselves
// and their FP32 neighbours, for the /6 (element max) and /4 divisors.
void check_lean_plan(const Recipe& r) {
  const auto magnitude = [] {
    return *rc::gen::weightedOneOf<float>({
        {6, log_uniform(-46, 46)},
        {1, rc::gen::element(0.0f, 0x1p-40f, 0x1p40f, 0x1.fffffep-41f, 0x1.000002p40f, 0x1.000002p-40f, 0x1.fffffep39f)},
    });
  };
  const float g = magnitude(), bmax = magnitude();
  const CodeTable table = code_table(r, g);
  const GlobalTerms t = global_terms(g, table.at);
  RC_PRE(packed_detail::lean_block(t, bmax));
  for (const float divisor : {element_max(r), 4.0f})
    assert_same_plan(packed_detail::two_level_plan_lean(r, t, bmax, divisor),
                     recipe_detail::two_level_plan(r, g, bmax, divisor));
}

// four_over_six's fast plans (packed_detail::four_over_six_plans: both lean scales, one paired
// conversion, the table) equal two_level_plan's: code, operation and multiplier, for both
// divisors. g log-uniform over and past the lean range, or a power of two (whose scales hit E4M3
// midpoints exactly); bmax log-uniform, or (mostly) the preimage of an E4M3 midpoint under one
// divisor and each of its 16 nearest FP32 neighbours: the scale's ties and near-ties, where a
// quotient off by an ulp shows.
void check_fast_plans(const Recipe& r) {
  const ParameterTerms terms(r, 0x1.555556p-11f);
  const float g = terms.g;
  int fast = 0;
  const auto check = [&](float bmax) {
    if (!(bmax > 0.0f && bmax <= kFp32Max)) return;
    const packed_detail::FourOverSixPlans p = packed_detail::four_over_six_plans(r, terms.t, bmax);
    if (!p.fast) return;
    ++fast;
    for (const float d : {6.0f, 4.0f})
      assert_same_plan(d == 6.0f ? p.six : p.four, recipe_detail::two_level_plan(r, g, bmax, d));
  };
  const double divisor = *rc::gen::element(6.0, 4.0);
  on_scale_ties(1.0 / (divisor * g), check);  // s = (bmax / divisor) / g
  RC_TAG(fast > 0 ? "some fast plans" : "no fast plan");
}

// A candidate of a two-candidate rule as the estimate sees it: its multiplier, its squared scale s2
// and its exact FP32 error; estimated: the packed path estimates it (|q| small, S in range).
struct EstimatedCandidate {
  float by = 0.0f, s2 = 0.0f, exact = 0.0f;
  bool estimated = false;
};

// Each candidate's estimate (encode_words_with_error, estimate_error) within its bound of its exact
// error, and where both are estimated the certain decisions the exact comparison. candidate(four):
// the /6 (false) or /4 (true) candidate.
template <int kN, class Candidate>
void check_estimates(const PackedCase& c, Candidate candidate) {
  float scaled[2] = {}, squares[2] = {}, exact[2] = {};
  int estimated = 0;
  for (const bool four : {false, true}) {
    const EstimatedCandidate k = candidate(four);
    if (!k.estimated) continue;
    std::uint32_t signs[kN / 8], words[kN / 8];
    for (int w = 0; w < kN / 8; ++w) signs[w] = packed_detail::sign_nibbles(c.x.data() + 8 * w);
    scaled[four] = four ? packed_detail::encode_words_with_error<kN, true, false>(c.x.data(), k.by, signs, words)
                        : packed_detail::encode_words_with_error<kN, true, true>(c.x.data(), k.by, signs, words);
    squares[four] = k.s2;
    exact[four] = k.exact;
    const packed_detail::ErrorEstimate e = packed_detail::estimate_error(scaled[four], k.s2, kN);
    RC_ASSERT(std::fabs(static_cast<double>(k.exact) - static_cast<double>(e.value)) <= static_cast<double>(e.bound));
    ++estimated;
  }
  if (estimated < 2) return;
  const packed_detail::Decision d = packed_detail::decide_by_estimates(scaled[0], squares[0], scaled[1], squares[1], kN);
  RC_TAG(d.certain ? "certain" : "exact comparison");
  if (d.certain) RC_ASSERT(d.four_wins == (exact[1] < exact[0]));
}

// The block's max |x|; NaN and inf blocks never reach the estimate.
float finite_block_max(const PackedCase& c) {
  float bmax = 0.0f;
  for (const float v : c.x) {
    RC_PRE(std::isfinite(v));
    bmax = std::fabs(v) > bmax ? std::fabs(v) : bmax;
  }
  return bmax;
}

// The 4over6 error estimate (packed_detail::estimate_error) holds its bound against the exact FP32
// squared error of each candidate, where the packed path uses it (|q| small, S in range); and where
// both candidates have one, the decision from the two estimates (decide_by_estimates), where it
// claims certainty, is the exact errors' comparison.
template <int kN>
void check_error_estimate(const Recipe& r, const PackedCase& c) {
  const float bmax = finite_block_max(c);
  check_estimates<kN>(c, [&](bool four) {
    const float divisor = four ? 4.0f : 6.0f;
    const BlockPlan p = recipe_detail::two_level_plan(r, c.g, bmax, divisor);
    const float sf = e4m3_value_fast(p.scale_code), s = sf * c.g, s2 = s * s;
    const bool small = std::fabs(bmax * p.by) < (four ? 4.5f : 7.0f);
    if (p.op != ElementOp::multiply || !(p.by > 0.0f) || !small || !packed_detail::estimable(s2))
      return EstimatedCandidate{};
    std::uint8_t codes[kN];
    recipe_detail::two_level_reference(r, c.g, c.x.data(), kN, bmax, divisor, codes);
    return EstimatedCandidate{p.by, s2, recipe_detail::two_level_squared_error(r, c.g, c.x.data(), kN, p.scale_code, codes),
                              true};
  });
}

// The same for the four-over-six package's two-candidate rule: the estimate from the plan's
// multiplier and the table's square (amax_code_terms) against the package's exact error
// (recipe_detail::amax_squared_error of its own candidate), for each candidate the packed path
// estimates (a nonzero, non-NaN scale, |q| small, S in range).
template <int kN>
void check_amax_error_estimate(const Recipe& r, const PackedCase& c) {
  const float bmax = finite_block_max(c);
  const CodeTable table = code_table(r, c.g);
  check_estimates<kN>(c, [&](bool four) {
    const BlockPlan p = recipe_detail::amax_encode_plan(r, c.g, bmax, four);
    const int code = p.scale_code;  // the table's 128 codes, positive scales (a negative amax has none)
    if (code == 0 || code >= 0x7f || !(p.by > 0.0f)) return EstimatedCandidate{};
    const CodeTerms terms = table.at[code];
    RC_ASSERT(hex_code(kFP32, bits_of(terms.by)) == hex_code(kFP32, bits_of(p.by)));  // the table's multiplier is the plan's
    const bool small = four ? bmax * p.by <= 4.5f : bmax * p.by < 7.0f;
    if (!small || !packed_detail::estimable(terms.s2)) return EstimatedCandidate{};
    float values[kN];
    std::uint8_t codes[kN];
    recipe_detail::amax_encode_candidate(r, c.g, c.x.data(), kN, bmax, four, values, codes);
    return EstimatedCandidate{p.by, terms.s2, recipe_detail::amax_squared_error(r, c.g, c.x.data(), kN, p.scale_code, values),
                              true};
  });
}

// The four-over-six package's lean plans equal its rule's (recipe_detail::amax_encode_plan): the
// one-candidate rule's (variant_plan_of, where lean) and both of the two-candidate rule's
// (amax_lean_plans, where fast): code, operation and multiplier. amax and bmax log-uniform over and
// past the lean range, with the bounds and their neighbours; or bmax the preimage of an E4M3
// midpoint of s6 or s4 and its 16 nearest FP32 neighbours (the scale's ties and near ties).
void check_amax_lean_plans(const Recipe& r) {
  const ParameterTerms terms(r, 0x1.8p-3f);
  const float amax = terms.g;
  int lean = 0;
  const auto check = [&](float bmax) {
    if (!(bmax >= 0.0f && bmax <= kFp32Max)) return;
    if (r.two_level == TwoLevel::amax_encode) {
      bool is_lean = false;
      const BlockPlan mine = packed_detail::variant_plan_of(r, terms.t, bmax, &is_lean);
      lean += is_lean;
      assert_same_plan(mine, recipe_detail::amax_encode_plan(r, amax, bmax, false));
      return;
    }
    const packed_detail::FourOverSixPlans p = packed_detail::amax_lean_plans(r, terms.t, bmax);
    if (!p.fast) return;
    ++lean;
    assert_same_plan(p.six, recipe_detail::amax_encode_plan(r, amax, bmax, false));
    assert_same_plan(p.four, recipe_detail::amax_encode_plan(r, amax, bmax, true));
  };
  const double factor = *rc::gen::element(1.0, 1.5);  // s6, or s4 = s6 * 1.5
  on_scale_ties(factor * r.tensor_divisor / (6.0 * amax), check);  // s6 = (bmax / 6) * (D / amax)
  RC_TAG(lean > 0 ? "some lean plans" : "no lean plan");
}

using BlockCheck = void (*)(const Recipe&, const PackedCase&);

// The routes of quantize_block_packed that recipe r can take (formats/packed_quantize.hpp), each
// of which check_packed's cases must reach: every fast form's NaN and inf blocks run
// quantize_block; 4over6 takes its usual and its other blocks' words; the reference two-level rule
// a lean plan (g with its table) and a divided one (g alone, or out of the lean range); the other
// rules their plan; the engine variants with a packed form their rule's plan.
std::vector<std::string> routes_of(const Recipe& r) {
  if (has_packed_four_over_six_amax_form(r))
    return {name_of(PackedRoute::four_over_six_amax_usual), name_of(PackedRoute::quantize_block)};
  if (has_packed_variant_form(r)) {
    if (r.scale == BlockScale::e4m3_two_level &&
        (r.two_level == TwoLevel::reference || r.two_level == TwoLevel::amax_encode))
      return {name_of(PackedRoute::variant_lean_plan), name_of(PackedRoute::variant_plan),
              name_of(PackedRoute::quantize_block)};
    return {name_of(PackedRoute::variant_plan), name_of(PackedRoute::quantize_block)};
  }
  if (!has_packed_fast_form(r)) return {name_of(PackedRoute::quantize_block)};
  if (r.scale == BlockScale::e4m3_two_level && r.two_level == TwoLevel::four_over_six)
    return {name_of(PackedRoute::four_over_six_usual), name_of(PackedRoute::four_over_six_words),
            name_of(PackedRoute::quantize_block)};
  if (packed_detail::reference_two_level(r))
    return {name_of(PackedRoute::lean_plan), name_of(PackedRoute::plan), name_of(PackedRoute::quantize_block)};
  return {name_of(PackedRoute::plan), name_of(PackedRoute::quantize_block)};
}

// A kernels-suite property: `check` (its block-16 or block-32 form) on gen_case blocks of recipe r
// at block n; required: the case tags (routes) it must reach.
void add_block_property(const std::string& name, Recipe r, int n, BlockCheck check16, BlockCheck check32,
                        std::vector<std::string> required = {}) {
  r.block = n;
  add_property("kernels", name, Device::cpu, [r, n, check16, check32, required](const RunContext& ctx) {
    const auto cases = gen_case(r, n);
    return check_random(ctx, [&] { (n == 16 ? check16 : check32)(r, *cases); }, required);
  });
}

void register_packed_quantize_properties() {
  for (const int n : {16, 32}) {
    const std::string block = "/block" + std::to_string(n);
    add_block_property("packed/nvfp4-4over6-paper" + block + "/error-estimate-within-bound",
                       recipe_from_name("nvfp4-4over6-paper")->recipe, n, check_error_estimate<16>, check_error_estimate<32>);
    add_block_property("packed/nvfp4-4over6" + block + "/error-estimate-within-bound",
                       recipe_from_name("nvfp4-4over6")->recipe, n, check_amax_error_estimate<16>,
                       check_amax_error_estimate<32>, {"certain", "exact comparison"});
    for (const NamedRecipe& named : kRecipes)
      if (named.recipe.scale != BlockScale::tensor_only && format_of(named.recipe.element).bits() == 4)
        add_block_property("packed/" + std::string(named.name) + block + "/equals-quantize-block", named.recipe, n,
                           check_packed<16>, check_packed<32>, routes_of(named.recipe));
  }
  for (const NamedRecipe& named : kRecipes) {
    const Recipe r = named.recipe;
    if (r.scale == BlockScale::e4m3_two_level && (!is_engine_variant(r) || has_packed_variant_form(r)) &&
        (r.two_level == TwoLevel::reference || r.two_level == TwoLevel::four_over_six))
      add_property("kernels", "packed/" + std::string(named.name) + "/lean-plan-equals-plan", Device::cpu,
                   [r](const RunContext& ctx) { return check_random(ctx, [&] { check_lean_plan(r); }); });
    if (r.scale == BlockScale::e4m3_two_level && r.two_level == TwoLevel::four_over_six)
      add_property("kernels", "packed/" + std::string(named.name) + "/fast-plans-equal-plans", Device::cpu,
                   [r](const RunContext& ctx) { return check_random(ctx, [&] { check_fast_plans(r); }); });
    if (fouroversix_package_rule(r))
      add_property("kernels", "packed/" + std::string(named.name) + "/lean-plans-equal-plans", Device::cpu,
                   [r](const RunContext& ctx) {
                     return check_random(ctx, [&] { check_amax_lean_plans(r); }, {"some lean plans"});
                   });
  }
}
KVQ_REGISTER_PROPERTIES(register_packed_quantize_properties);

}  // namespace
}  // namespace kvq::props
