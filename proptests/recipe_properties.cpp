// Properties of the recipe models (formats/recipes.hpp): bit for bit equal to the oracle's
// exact computation of the same recipe; within the derived error bound; and the metamorphic
// relations (sign flip, permutation, power-of-two scaling).
#include <algorithm>
#include <cmath>
#include <ostream>
#include <sstream>
#include <tuple>
#include <vector>

#include "formats/float_bits.hpp"
#include "formats/recipe_names.hpp"
#include "oracle/recipes_oracle.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/harness/generators.hpp"
#include "proptests/harness/rapidcheck_bridge.hpp"

namespace kvq::props {
namespace {

struct Tensor {  // rows x cols FP32, row-major; cols a multiple of the block
  int rows = 0;
  int cols = 0;
  std::vector<float> values;
};

void showValue(const Tensor& t, std::ostream& os) {
  os << t.rows << "x" << t.cols << " [";
  char buf[24];
  for (std::size_t i = 0; i < t.values.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s0x%08x", i ? " " : "", bits_of(t.values[i]));
    os << buf;
  }
  os << "]";
}

float from_parts(int mantissa, int exponent) { return std::ldexp(static_cast<float>(mantissa), exponent); }

// One block: mostly well-scaled values, with the blocks that break recipes weighted in.
rc::Gen<std::vector<float>> gen_block(int n, bool specials) {
  using V = std::vector<float>;
  auto scaled = [n](int lo, int hi) {
    return rc::gen::exec([=] {
      const int k = *rc::gen::inRange(lo, hi);
      return *rc::gen::container<V>(n, rc::gen::map(rc::gen::inRange(-2000, 2001),
                                                    [k](int m) { return from_parts(m, k - 8); }));
    });
  };
  const rc::Gen<V> ordinary = rc::gen::weightedOneOf<V>({
      {6, scaled(-20, 21)},
      {1, scaled(-70, -30)},  // below block-FP4's 1e-10 floor and near E8M0's 2^-127
      {1, rc::gen::just(V(n, 0.0f))},
      {1, rc::gen::map(rc::gen::container<V>(n, rc::gen::element(0.0f, -0.0f)), [](V v) { return v; })},
      {1, rc::gen::exec([=] {  // one huge value among small ones
         V v = *scaled(-10, 0);
         v[*rc::gen::inRange(0, n)] = from_parts(*rc::gen::inRange(1, 1000), *rc::gen::inRange(10, 40));
         return v;
       })},
      {1, rc::gen::container<V>(n, rc::gen::map(rc::gen::inRange<std::uint32_t>(0, 0x00800000u),  // subnormals
                                                [](std::uint32_t b) { return float_from_bits(b); }))},
      {2, rc::gen::exec([=] {  // E2M1 ties at a power-of-two scale, with 6 * 2^k fixing the block max
         const int k = *rc::gen::inRange(-10, 10);
         V v = *rc::gen::container<V>(n, rc::gen::map(rc::gen::element(0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                                                                       -0.25f, -2.5f, -5.0f),
                                                      [k](float m) { return std::ldexp(m, k); }));
         v[0] = std::ldexp(6.0f, k);
         return v;
       })},
      {1, rc::gen::container<V>(n, rc::gen::map(rc::gen::arbitrary<std::uint32_t>(),
                                                [](std::uint32_t b) { return float_from_bits(b); }))},
  });
  if (!specials) return ordinary;
  const rc::Gen<V> with_special = rc::gen::exec([=] {  // NaN, inf or FP32 max among ordinary values
    V v = *scaled(-5, 5);
    v[*rc::gen::inRange(0, n)] = *rc::gen::element(NAN, -NAN, INFINITY, -INFINITY, kFp32Max, -kFp32Max);
    return v;
  });
  return rc::gen::weightedOneOf<V>({{6, ordinary}, {1, with_special}});
}

rc::Gen<Tensor> gen_tensor(int block, bool specials, bool finite_only = false) {
  return rc::gen::exec([=] {
    Tensor t;
    t.rows = *rc::gen::inRange(1, 4);
    const int blocks = *rc::gen::inRange(1, 4);
    t.cols = blocks * block;
    const auto block_gen = gen_block(block, specials);
    for (int i = 0; i < t.rows * blocks; ++i) {
      const auto b = *block_gen;
      t.values.insert(t.values.end(), b.begin(), b.end());
    }
    if (finite_only)
      for (float& v : t.values)
        if (!std::isfinite(v)) v = 1.0f;
    return t;
  });
}

float amax_of(const std::vector<float>& v) {  // fmaxf semantics: NaN never wins
  float m = 0.0f;
  for (const float x : v) {
    const float a = std::fabs(x);
    m = a > m ? a : m;
  }
  return m;
}

int block_of(const Recipe& r) { return r.scale == BlockScale::tensor_only ? 16 : r.block; }

struct Quantized {
  float g = 0;
  std::vector<std::uint8_t> scales, codes;
};

Quantized quantize_model(const Recipe& r, const std::vector<float>& x) {
  Quantized q;
  const int n = block_of(r);
  q.g = tensor_scale(r, amax_of(x));
  q.codes.resize(x.size());
  for (std::size_t b = 0; b < x.size(); b += n)
    q.scales.push_back(quantize_block(r, q.g, x.data() + b, n, q.codes.data() + b));
  return q;
}

std::string recipe_hex(std::uint8_t v) { return hex_code(kE4M3FN, v); }

void register_recipe_properties() {
  // The host model of rcp.approx.ftz.f32 (table + exponent rule) against the oracle's exact
  // reciprocal with the same table: FP32 inputs weighted to the edges, and every mantissa's
  // table bit exercised at random exponents.
  add_property("recipes", "reciprocal/approx-ftz-model-vs-oracle", Device::cpu, [](const RunContext& ctx) {
    const auto edges = gen_fp32(kE4M3FN);
    const auto anywhere = rc::gen::map(rc::gen::arbitrary<std::uint32_t>(), [](std::uint32_t b) { return Fp32{b}; });
    const auto inputs = rc::gen::weightedOneOf<Fp32>({{1, edges}, {3, anywhere}});
    return check_random(ctx, [&] {
      const Fp32 x = *inputs;
      const float model = rcp_approx_ftz_model(float_from_bits(x.bits));
      const oracle::Real exact = oracle::rcp_approx_ftz(oracle::real_of(kFP32, x.bits));
      if (exact.kind == ValueKind::nan) {
        RC_ASSERT(model != model);
      } else {
        RC_ASSERT(hex_code(kFP32, bits_of(model)) == hex_code(kFP32, oracle::fp32_bits(exact)));
      }
    });
  });
  // log2_exponent reads floor and ceil of the rounded FP32 log2 from the bits where the significand
  // lies 2^-10 or more from 1 and 2 (docs/recipes.md "Power-of-two exponents"): against floor and
  // ceil of log2_fp32 itself, on inputs anywhere, and on either side of the 2^-10 bounds.
  add_property("recipes", "log2-exponent/bits-equal-log2", Device::cpu, [](const RunContext& ctx) {
    const auto anywhere = rc::gen::inRange<std::uint32_t>(1, 0x7F800000u);
    const auto near_bounds = rc::gen::map(
        rc::gen::tuple(rc::gen::inRange<std::uint32_t>(0, 256), rc::gen::elementOf(std::vector<std::uint32_t>{0, 1, 0x3FE, 0x3FF}),
                       rc::gen::inRange<std::uint32_t>(0, 1u << 13)),
        [](const std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>& t) {
          const auto [biased, top, low] = t;
          return std::max<std::uint32_t>(1, std::min<std::uint32_t>((biased << 23) | (top << 13) | low, 0x7F7FFFFFu));
        });
    const auto inputs = rc::gen::weightedOneOf<std::uint32_t>({{1, anywhere}, {1, near_bounds}});
    return check_random(ctx, [&] {
      const std::uint32_t bits = *inputs;
      const float x = float_from_bits(bits);
      for (const char* name : {"blockfp4-e8m0-ceil", "mxfp4-modelopt", "mla-model1-tile64"}) {
        const Recipe r = recipe_from_name(name)->recipe;
        RC_ASSERT(r.exponent_by_log2 && r.scale_dtype == FormatId::fp32);
        const float l = recipe_detail::log2_fp32(x);
        for (const bool ceil : {false, true}) {
          const float e = ceil ? std::ceil(l) : std::floor(l);
          const int expected = e < -127.0f ? -127 : (e > 128.0f ? 128 : static_cast<int>(e));
          RC_ASSERT(log2_exponent(r, x, ceil) == expected);
        }
      }
    });
  });
  for (const NamedRecipe& named : kRecipes) {
    std::vector<int> blocks{0};  // the recipe's own block, then 16 and 32 where that differs
    if (named.recipe.scale != BlockScale::tensor_only)
      for (const int b : {16, 32})
        if (b != named.recipe.block) blocks.push_back(b);
    for (const int size : blocks) {
      Recipe r = named.recipe;
      if (size) r.block = size;
      const std::string base = std::string(named.name) + (size ? "/block" + std::to_string(size) : "");
      const bool four_over_six = r.scale == BlockScale::e4m3_two_level &&
                                 (r.two_level == TwoLevel::four_over_six || r.two_level == TwoLevel::four_over_six_amax);
      const bool pow2 = r.scale == BlockScale::e8m0_pow2;

      add_property("recipes", base + "/model-vs-oracle", Device::cpu, [r](const RunContext& ctx) {
        const auto tensors = gen_tensor(block_of(r), true);
        return check_random(ctx, [&] {
          const Tensor t = *tensors;
          const Quantized q = quantize_model(r, t.values);
          const float g = oracle::recipe_tensor_scale(r, amax_of(t.values));
          RC_ASSERT(bits_of(q.g) == bits_of(g));
          const int n = block_of(r);
          for (std::size_t b = 0; b * n < t.values.size(); ++b) {
            const std::vector<float> block(t.values.begin() + b * n, t.values.begin() + (b + 1) * n);
            const auto expected = oracle::recipe_quantize_block(r, g, block);
            RC_ASSERT(recipe_hex(q.scales[b]) == recipe_hex(expected.scale));
            for (int i = 0; i < n; ++i) {
              RC_ASSERT(recipe_hex(q.codes[b * n + i]) == recipe_hex(expected.codes[i]));
              const std::uint32_t dq = bits_of(dequantize_element(r, g, q.scales[b], q.codes[b * n + i]));
              const std::uint32_t dq_exact = oracle::recipe_dequantize_element(r, g, q.scales[b], q.codes[b * n + i]);
              RC_ASSERT(hex_code(kFP32, dq) == hex_code(kFP32, dq_exact));
            }
          }
        });
      });

      // Sign flip and reversal inside a block commute with quantization (finite inputs).
      add_property("recipes", base + "/sign-flip-and-permutation", Device::cpu, [r](const RunContext& ctx) {
        const auto tensors = gen_tensor(block_of(r), false, true);
        const std::uint8_t sign = static_cast<std::uint8_t>(format_of(r.element).sign_bit());
        return check_random(ctx, [&] {
          const Tensor t = *tensors;
          // Where a tensor scale is used, keep g in [2^-100, 2^100]: near FP32's ends g, 1/g or
          // (1/g)/sf under- or overflows, 0 * inf = NaN somewhere, and a NaN code has one sign only.
          const float g = tensor_scale(r, amax_of(t.values));
          RC_PRE(r.scale == BlockScale::e8m0_pow2 || (g >= 0x1p-100f && g <= 0x1p100f));
          const Quantized q = quantize_model(r, t.values);
          const int n = block_of(r);
          if (r.scale == BlockScale::e4m3_two_level && r.zero_guard == ZeroGuard::block_max) {
            // FlashInfer's guard misses a block scale that rounds to 0: x * rcp(0) makes 0 * inf = NaN,
            // a code with no sign (documented behaviour; the model-vs-oracle property covers it).
            for (std::size_t b = 0; b < q.scales.size(); ++b)
              RC_PRE(q.scales[b] != 0 || amax_of({t.values.begin() + b * n, t.values.begin() + (b + 1) * n}) == 0.0f);
          }
          std::vector<float> flipped = t.values, reversed = t.values;
          for (float& v : flipped) v = -v;
          for (std::size_t b = 0; b < reversed.size(); b += n)
            std::reverse(reversed.begin() + b, reversed.begin() + b + n);
          const Quantized qf = quantize_model(r, flipped), qr = quantize_model(r, reversed);
          RC_ASSERT(qf.scales == q.scales);
          RC_ASSERT(qr.scales == q.scales);
          for (std::size_t i = 0; i < q.codes.size(); ++i) {
            // The four-over-six package writes +0 (0x0) where the scaled value is +-0 (a zero input, a
            // zero block scale, a product that underflows), and 0x8 for both 8 and -8 (the value wraps
            // over the sign bit); a rounded -0 / +0 pair stays 0x8 / 0x0. ElementCast::satfinite_unsigned_zero
            // writes +0 for a +-0 value too, satfinite_negative_zero -0 (the sign bit alone).
            const bool by_rounding = r.element_cast == ElementCast::e2m1_by_rounding;
            const bool unsigned_zero_cast = by_rounding || r.element_cast == ElementCast::satfinite_unsigned_zero ||
                                            r.element_cast == ElementCast::bounds_count;
            const std::uint8_t negative_zero = static_cast<std::uint8_t>(sign);
            const bool unsigned_zero =
                q.codes[i] == qf.codes[i] &&
                ((unsigned_zero_cast && (q.codes[i] == 0x0 || (by_rounding && q.codes[i] == 0x8))) ||
                 (r.element_cast == ElementCast::satfinite_negative_zero && q.codes[i] == negative_zero));
            RC_ASSERT(recipe_hex(qf.codes[i]) ==
                      recipe_hex(unsigned_zero ? q.codes[i] : static_cast<std::uint8_t>(q.codes[i] ^ sign)));
            const std::size_t b = i / n * n, j = b + (n - 1 - (i - b));
            RC_ASSERT(recipe_hex(qr.codes[j]) == recipe_hex(q.codes[i]));
          }
        });
      });

      // Scaling the whole tensor by 2^k changes only the power-of-two block scales (by k),
      // or nothing at all for the two-level and tensor recipes, whose tensor scale absorbs it.
      add_property("recipes", base + "/power-of-two-scaling", Device::cpu, [r, pow2, four_over_six](const RunContext& ctx) {
        const auto tensors = gen_tensor(block_of(r), false, true);
        return check_random(ctx, [&] {
          Tensor t = *tensors;
          const int k = *rc::gen::inRange(-6, 7);
          // Keep every value and every intermediate scale in FP32's normal range (4-over-6: the
          // squared errors too, or their comparison is not scale-free): values outside become 0.
          const float lo = four_over_six ? 0x1p-30f : 0x1p-90f, hi = four_over_six ? 0x1p30f : 0x1p90f;
          for (float& v : t.values)
            if (!(std::fabs(v) > lo && std::fabs(v) < hi)) v = 0.0f;
          std::vector<float> scaled = t.values;
          for (float& v : scaled) v = std::ldexp(v, k);
          const float amax = amax_of(t.values);
          RC_PRE(amax > 0x1p-80f);
          const bool floored = pow2 && (r.pow2 == Pow2Rule::ceil_ratio || r.ratio_floor_on_bmax);
          if (floored) {  // max(bmax/max, floor) or max(bmax, floor) pins e below the floor
            const int n = block_of(r);
            const float emax = r.ratio_floor_on_bmax ? 1.0f : element_max(r);
            for (std::size_t b = 0; b < t.values.size(); b += n) {
              const float bmax = amax_of({t.values.begin() + b, t.values.begin() + b + n});
              RC_PRE(bmax == 0.0f || (bmax / emax > r.ratio_floor && std::ldexp(bmax, k) / emax > r.ratio_floor));
            }
          }
          if (r.tensor_scale_min > 0.0f)  // max(amax / D, floor) likewise
            RC_PRE(amax / r.tensor_divisor > r.tensor_scale_min && std::ldexp(amax, k) / r.tensor_divisor > r.tensor_scale_min);
          const Quantized q = quantize_model(r, t.values), qs = quantize_model(r, scaled);
          RC_ASSERT(qs.codes == q.codes);
          for (std::size_t b = 0; b < q.scales.size(); ++b) {
            if (!pow2) {
              RC_ASSERT(recipe_hex(qs.scales[b]) == recipe_hex(q.scales[b]));
            } else if (q.scales[b] != 0 && q.scales[b] != 0xFF) {  // an all-zero block keeps 2^-127
              const std::size_t n = static_cast<std::size_t>(block_of(r));  // or its ratio floor's scale
              const bool floor_zero = floored &&
                                      amax_of({t.values.begin() + b * n, t.values.begin() + (b + 1) * n}) == 0.0f;
              RC_ASSERT(static_cast<int>(qs.scales[b]) == static_cast<int>(q.scales[b]) + (floor_zero ? 0 : k));
            }
          }
        });
      });

      // Every element lies within a derived bound of its value (docs/recipes.md, kernel contract);
      // saturated elements (past the element's max at the block scale) are excluded.
      // - Power-of-two scales are exact: |x - dq| <= D * (hi - lo) / 2 with D = 2^e and lo <= |x|/D < hi
      //   the neighbouring element values.
      // - Two-level and per-tensor recipes: with D = sf * g (sf = 1 per tensor), the element input y is
      //   x / D up to 8 FP32 roundings or rcp.approx errors (relative 2^-21 at most), the code is within
      //   half a gap of y, and dq = (c * sf) * g rounds once, so |x - dq| <= D * ((hi - lo) / 2 +
      //   2^-18 * max(hi, 1)). Zero-guarded blocks and FP32-subnormal D have no relative bound: skipped.
      add_property("recipes", base + "/error-within-half-element-gap", Device::cpu, [r, pow2](const RunContext& ctx) {
        const auto tensors = gen_tensor(block_of(r), false, true);
        const Format ef = format_of(r.element);
        return check_random(ctx, [&] {
          const Tensor t = *tensors;
          const Quantized q = quantize_model(r, t.values);
          RC_PRE(pow2 || (q.g >= 0x1p-100f && q.g <= 0x1p100f));
          const int n = block_of(r);
          for (std::size_t i = 0; i < t.values.size(); ++i) {
            const oracle::Real x = oracle::real_of_float(t.values[i]);
            if (x.kind != ValueKind::finite) continue;
            const std::uint8_t scale = q.scales.empty() ? 0 : q.scales[i / n];
            oracle::Exact d = pow2 ? oracle::power_of_two(static_cast<int>(scale) - 127) : oracle::Exact(0);
            if (!pow2) {
              const std::uint8_t sf8 = r.scale == BlockScale::tensor_only ? 0x38 : scale;  // E4M3 0x38 = 1.0
              // The tensor parameter's factor in a value: g, 1/e (encode), amax/D (amax itself).
              const oracle::Exact param = oracle::real_of_float(q.g).magnitude;
              if (param == 0) continue;
              const oracle::Exact factor = r.tensor_param == TensorParam::encode ? 1 / param
                                           : tensor_param_is_amax(r)             ? param / oracle::Exact(r.tensor_divisor)
                                                                                 : param;
              d = *oracle::exact_value(kE4M3FN, sf8 & 0x7F) * factor;
              if (d < oracle::power_of_two(-120)) continue;
            }
            // The four-over-six package stores a value rounded to 8 as 0x8 (-0): documented, no bound.
            if (r.element_cast == ElementCast::e2m1_by_rounding && q.codes[i] == 0x8) continue;
            const auto nb = oracle::neighbours_by_table(ef, x.magnitude / d);
            if (nb.hi_beyond_max) continue;  // saturated: the clip is the recipe's, not rounding error
            const oracle::Real dq = oracle::real_of_float(dequantize_element(r, q.g, scale, q.codes[i]));
            RC_ASSERT(dq.kind != ValueKind::nan);
            if (dq.kind == ValueKind::infinity) continue;  // 2^128 and up: FP32 cannot hold the block's value
            const oracle::Exact slack = pow2 ? oracle::Exact(0) : oracle::power_of_two(-18) * (nb.hi > 1 ? nb.hi : oracle::Exact(1));
            const oracle::Exact dq_value = dq.kind == ValueKind::zero ? oracle::Exact(0) : dq.magnitude;
            RC_ASSERT(dq.kind == ValueKind::zero || dq.negative == x.negative);
            RC_ASSERT(abs(dq_value - x.magnitude) <= d * ((nb.hi - nb.lo) / 2 + slack));
          }
        });
      });
    }
  }
}
KVQ_REGISTER_PROPERTIES(register_recipe_properties);

}  // namespace
}  // namespace kvq::props
