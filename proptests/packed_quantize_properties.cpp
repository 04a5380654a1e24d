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
    });
    if (*rc::gen::inRange(0, 8) == 0)  // NaN, inf or FP32 max somewhere
      x[*rc::gen::inRange(0, n)] = *rc::gen::element(NAN, -NAN, INFINITY, -INFINITY, 3.4028235e38f, -0.0f);
    float amax = 0.0f;
    for (const float v : x) amax = std::fabs(v) > amax ? std::fabs(v) : amax;
    const float g = *rc::gen::weightedOneOf<float>({
        {4, rc::gen::just(tensor_scale(r, amax))},
        {3, rc::gen::map(rc::gen::inRange(-12, 4), [e](int k) { return std::ldexp(1.0f, e + k); })},
        {1, rc::gen::element(0.0f, 0x1p-149f, 0x1p-130f, 0x1p100f, 3.4028235e38f, INFINITY, NAN, -0x1p-3f)},
    });
    return PackedCase{g, x};
  });
}

template <int kN>
void check_packed(const Recipe& r, const PackedCase& c) {
  std::uint32_t words[kN / 8], expected_words[kN / 8];
  std::uint8_t codes[kN];
  const std::uint8_t scale = quantize_block_packed<kN>(r, c.g, c.x.data(), words);
  const std::uint8_t expected_scale = quantize_block(r, c.g, c.x.data(), kN, codes);
  pack_codes(codes, kN, expected_words);
  RC_ASSERT(hex_code(kE4M3FN, scale) == hex_code(kE4M3FN, expected_scale));
  for (int w = 0; w < kN / 8; ++w) RC_ASSERT(hex_code(kFP32, words[w]) == hex_code(kFP32, expected_words[w]));
}

void register_packed_quantize_properties() {
  for (const NamedRecipe& named : kRecipes) {
    if (named.recipe.scale == BlockScale::tensor_only || format_of(named.recipe.element).bits() != 4) continue;
    for (const int n : {16, 32}) {
      Recipe r = named.recipe;
      r.block = n;
      add_property("kernels", "packed/" + std::string(named.name) + "/block" + std::to_string(n) + "/equals-quantize-block",
                   Device::cpu, [r, n](const RunContext& ctx) {
                     const auto cases = gen_case(r, n);
                     return check_random(ctx, [&] {
                       const PackedCase c = *cases;
                       if (n == 16) {
                         check_packed<16>(r, c);
                       } else {
                         check_packed<32>(r, c);
                       }
                     });
                   });
    }
  }
}
KVQ_REGISTER_PROPERTIES(register_packed_quantize_properties);

}  // namespace
}  // namespace kvq::props
