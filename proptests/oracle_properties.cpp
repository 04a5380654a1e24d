// The oracle checked against itself and against the descriptor's constexpr limits:
// two independent neighbour searches agree, exact values agree with the formula.
#include "formats/float_bits.hpp"
#include "formats/names.hpp"
#include "oracle/oracle.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/harness/generators.hpp"
#include "proptests/harness/rapidcheck_bridge.hpp"

namespace kvq::props {
namespace {

void register_oracle_properties() {
  for (int i = 0; i < kFormatCount; ++i) {
    const auto id = static_cast<FormatId>(i);
    const Format f = format_of(id);
    if (f.bits() > 16) continue;
    const std::string name(name_of(id));
    add_property("oracle", name + "/table-vs-arithmetic-neighbours", Device::cpu, [f](const RunContext& ctx) {
      const auto inputs = gen_fp32(f);
      return check_random(ctx, [&] {
        const Fp32 x = *inputs;
        const oracle::Real r = oracle::real_of(kFP32, x.bits);
        RC_PRE(r.kind == ValueKind::finite || r.kind == ValueKind::zero);
        const auto a = oracle::neighbours_by_table(f, r.magnitude);
        const auto b = oracle::neighbours_by_arithmetic(f, r.magnitude);
        RC_ASSERT(a.below_min == b.below_min);
        RC_ASSERT(a.lo == b.lo);
        RC_ASSERT(a.hi == b.hi);
        RC_ASSERT(a.hi_beyond_max == b.hi_beyond_max);
        if (!a.below_min) {
          RC_ASSERT(a.lo_code == b.lo_code);
          if (!a.hi_beyond_max) RC_ASSERT(a.hi_code == b.hi_code);
        }
      });
    });
    // Round to nearest never errs by more than half the gap between the two neighbours.
    add_property("oracle", name + "/rne-error-within-half-gap", Device::cpu, [f](const RunContext& ctx) {
      const auto inputs = gen_fp32(f);
      return check_random(ctx, [&] {
        const Fp32 x = *inputs;
        const oracle::Real r = oracle::real_of(kFP32, x.bits);
        RC_PRE(r.kind == ValueKind::finite && (f.is_signed || !r.negative));
        const Conversion c{Rounding::nearest_even, Overflow::ieee, NanRule::all_ones_keep_sign};
        const std::uint64_t code = oracle::round_to_format(f, c, r);
        RC_PRE(!f.is_nan(code) && !f.is_inf(code));
        const auto n = oracle::neighbours_by_table(f, r.magnitude);
        // Overflow (rounding to the step past max, which E2M1 then saturates) is not rounding error.
        RC_PRE(!n.below_min && (!n.hi_beyond_max || r.magnitude < (n.lo + n.hi) / 2));
        const oracle::Exact error = abs(oracle::exact_error(f, code, r));
        RC_ASSERT(error <= (n.hi - n.lo) / 2);
        RC_ASSERT(n.lo <= r.magnitude);
      });
    });
    add_property("oracle", name + "/exact-value-of-every-code", Device::cpu, [f](const RunContext& ctx) {
      Tally tally;
      for (std::uint64_t code = 0; code < f.code_count(); ++code) {
        const auto exact = oracle::exact_value(f, code);
        const bool special = f.is_nan(code) || f.is_inf(code);
        const bool ok = special ? !exact : (exact && *exact == oracle::Exact(finite_value(f, code)) &&
                                            *exact == oracle::Exact(decode_double(f, code)));
        if (ok) {
          tally.pass();
        } else {
          tally.fail("code " + hex_code(f, code));
        }
      }
      return tally.outcome(ctx);
    });
    add_property("oracle", name + "/ulp-distance-of-neighbours", Device::cpu, [f](const RunContext& ctx) {
      Tally tally;
      const std::uint64_t positive = f.is_signed ? f.code_count() / 2 : f.code_count();
      for (std::uint64_t code = 0; code + 1 < positive; ++code) {
        if (f.is_nan(code + 1) || f.is_inf(code + 1)) continue;
        const auto step = oracle::ulp_distance(f, code, code + 1);
        const auto back = oracle::ulp_distance(f, code + 1, code);
        if (step == 1 && back == -1) {
          tally.pass();
        } else {
          tally.fail(hex_code(f, code) + " to next: " + std::to_string(step));
        }
      }
      return tally.outcome(ctx);
    });
  }
  // The oracle's comparison by cross products is the rationals' own order (their operator<), on
  // rationals of 64-bit numerators and denominators times powers of two up to 2^+-200.
  add_property("oracle", "less-is-the-rational-order", Device::cpu, [](const RunContext& ctx) {
    return check_random(ctx, [] {
      const auto rational = [] {
        const auto num = *rc::gen::arbitrary<std::int64_t>();
        const auto den = *rc::gen::arbitrary<std::uint64_t>();  // positive: Boost's two-part constructor takes no sign
        return oracle::Exact(oracle::BigInt(num), oracle::BigInt(den == 0 ? 1 : den)) *
               oracle::power_of_two(*rc::gen::inRange(-200, 201));
      };
      const oracle::Exact a = rational(), b = *rc::gen::element(0, 1) ? a : rational();
      RC_ASSERT(oracle::less(a, b) == (a < b));
      RC_ASSERT(oracle::less(b, a) == (b < a));
    });
  });
  // power_of_two's table (FP64's exponents and their steps, with room) and its fallback beyond it:
  // 2^e built from the shifted integer, every e from -1400 to 1400.
  add_property("oracle", "powers-of-two", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    for (int e = -1400; e <= 1400; ++e) {
      const oracle::BigInt whole = oracle::BigInt(1) << (e < 0 ? -e : e);
      const oracle::Exact want = e < 0 ? oracle::Exact(oracle::BigInt(1), whole) : oracle::Exact(whole);
      if (oracle::power_of_two(e) == want) {
        tally.pass();
      } else {
        tally.fail("2^" + std::to_string(e));
      }
    }
    return tally.outcome(ctx);
  });
}
KVQ_REGISTER_PROPERTIES(register_oracle_properties);

}  // namespace
}  // namespace kvq::props
