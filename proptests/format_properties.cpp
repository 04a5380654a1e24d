// Properties of the format codec: agreement with the oracle (random, and exhaustive
// over BF16/FP16 inputs and every edge), round trips, monotonicity, sign symmetry, packing.
#include <cstdio>
#include <sstream>

#include "formats/float_bits.hpp"
#include "formats/packing.hpp"
#include "oracle/oracle.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/harness/generators.hpp"
#include "proptests/harness/rapidcheck_bridge.hpp"

namespace kvq::props {
namespace {

std::string mismatch(const ConversionCase& k, std::uint32_t input, std::uint64_t expected, std::uint64_t actual) {
  std::ostringstream os;
  showValue(Fp32{input}, os);
  const Format f = k.target();
  os << " -> oracle " << hex_code(f, expected) << " (" << decode_double(f, expected) << "), codec "
     << hex_code(f, actual) << " (" << decode_double(f, actual) << ")   replay: " << k.encode_replay(input);
  return os.str();
}

std::uint32_t random_bits_for(const ConversionCase& k, std::uint64_t input) {
  return k.rounding == Rounding::stochastic ? mix32(input) : 0;
}

// Codec vs oracle on a fixed list of FP32 inputs.
Outcome sweep_vs_oracle(const RunContext& ctx, const ConversionCase& k, const std::vector<std::uint32_t>& inputs) {
  Tally tally;
  const Format f = k.target();
  const Conversion c = k.conversion();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::uint32_t b = inputs[i];
    const std::uint32_t rbits = random_bits_for(k, b);
    const std::uint64_t expected = oracle::round_to_format(f, c, oracle::real_of(kFP32, b), rbits);
    const std::uint64_t actual = encode(f, c, unpack(kFP32, b), rbits);
    if (expected == actual) {
      tally.pass();
    } else {
      tally.fail(mismatch(k, b, expected, actual));
    }
    if (i % 4096 == 0) ctx.progress(static_cast<double>(i) / inputs.size());
  }
  return tally.outcome(ctx);
}

void register_oracle_agreement() {
  for_each_conversion_case([](const ConversionCase& k) {
    const std::string base = k.name();
    if (k.format != FormatId::fp32) {
      add_property("formats", base + "/codec-vs-oracle", Device::cpu, [k](const RunContext& ctx) {
        const Format f = k.target();
        const Conversion c = k.conversion();
        const auto inputs = gen_fp32(f);
        return check_random(ctx, [&] {
          const Fp32 x = *inputs;
          const std::uint32_t rbits = k.rounding == Rounding::stochastic ? *rc::gen::arbitrary<std::uint32_t>() : 0;
          RC_TAG(classify(f, x));
          const std::uint64_t expected = oracle::round_to_format(f, c, oracle::real_of(kFP32, x.bits), rbits);
          const std::uint64_t actual = encode(f, c, unpack(kFP32, x.bits), rbits);
          RC_ASSERT(hex_code(f, actual) == hex_code(f, expected));
        });
      });
    }
    // From FP64, rounded once: double-rounding traps included.
    add_property("formats", base + "/codec-vs-oracle-from-fp64", Device::cpu, [k](const RunContext& ctx) {
      const Format f = k.target();
      const Conversion c = k.conversion();
      const auto inputs = gen_fp64_for(f);
      return check_random(ctx, [&] {
        const Fp64 x = *inputs;
        const std::uint32_t rbits = k.rounding == Rounding::stochastic ? *rc::gen::arbitrary<std::uint32_t>() : 0;
        const std::uint64_t expected = oracle::round_to_format(f, c, oracle::real_of(kFP64, x.bits), rbits);
        const std::uint64_t actual = encode(f, c, unpack(kFP64, x.bits), rbits);
        RC_ASSERT(hex_code(f, actual) == hex_code(f, expected));
      });
    });
  });
  // Exhaustive: all BF16 patterns and FP16 values, and every edge of the target, for formats <= 16 bits.
  for_each_conversion_case(
      [](const ConversionCase& k) {
        add_property("exhaustive", k.name() + "/all-bf16-fp16-inputs", Device::cpu,
                     [k](const RunContext& ctx) { return sweep_vs_oracle(ctx, k, bf16_and_fp16_inputs()); });
        add_property("exhaustive", k.name() + "/every-code-midpoint-and-neighbours", Device::cpu,
                     [k](const RunContext& ctx) { return sweep_vs_oracle(ctx, k, edge_inputs_fp32(k.target())); });
      },
      16);
}
KVQ_REGISTER_PROPERTIES(register_oracle_agreement);

// Beyond the named conventions: any combination of policies, codec == oracle.
rc::Gen<Conversion> gen_conversion() {
  return rc::gen::build<Conversion>(
      rc::gen::set(&Conversion::rounding, rc::gen::element(Rounding::nearest_even, Rounding::toward_zero,
                                                           Rounding::toward_positive, Rounding::toward_negative,
                                                           Rounding::nearest_away, Rounding::stochastic,
                                                           Rounding::nearest_toward_zero)),
      rc::gen::set(&Conversion::overflow, rc::gen::element(Overflow::saturate, Overflow::ieee, Overflow::nan)),
      rc::gen::set(&Conversion::nan,
                   rc::gen::element(NanRule::all_ones_keep_sign, NanRule::all_ones_positive, NanRule::quiet_keep_sign,
                                    NanRule::payload_keep_sign, NanRule::max_positive, NanRule::max_keep_sign,
                                    NanRule::zero_flipped_sign)),
      rc::gen::set(&Conversion::unsigned_rule,
                   rc::gen::element(UnsignedRule::absolute, UnsignedRule::nonpositive_is_nan)),
      rc::gen::set(&Conversion::lowest_binade_rounds_away, rc::gen::arbitrary<bool>()));
}

void register_policy_grid() {
  for (int i = 0; i < kFormatCount; ++i) {
    const auto id = static_cast<FormatId>(i);
    if (id == FormatId::fp64) continue;
    add_property("formats", std::string(name_of(id)) + "/any-policy/codec-vs-oracle", Device::cpu,
                 [id](const RunContext& ctx) {
                   const Format f = format_of(id);
                   const bool wide = f.bits() > 16;  // FP32 target: FP64 inputs
                   const auto narrow_inputs = gen_fp32(wide ? kBF16 : f);
                   const auto wide_inputs = gen_fp64_for(f);
                   const auto policies = gen_conversion();
                   return check_random(ctx, [&] {
                     const Conversion c = *policies;
                     const std::uint32_t rbits = *rc::gen::arbitrary<std::uint32_t>();
                     const Format source = wide ? kFP64 : kFP32;
                     const std::uint64_t x = wide ? (*wide_inputs).bits : (*narrow_inputs).bits;
                     RC_TAG(static_cast<int>(c.rounding), static_cast<int>(c.overflow));
                     const std::uint64_t expected = oracle::round_to_format(f, c, oracle::real_of(source, x), rbits);
                     const std::uint64_t actual = encode(f, c, unpack(source, x), rbits);
                     RC_ASSERT(hex_code(f, actual) == hex_code(f, expected));
                   });
                 });
  }
}
KVQ_REGISTER_PROPERTIES(register_policy_grid);

void register_codec_laws() {
  // decode(encode(v)) == v: every finite code survives a trip through FP32 under every convention.
  for_each_conversion_case(
      [](const ConversionCase& k) {
        if (k.rounding == Rounding::stochastic) return;  // exact inputs never round, but keep the list short
        add_property("formats", k.name() + "/roundtrip-every-code", Device::cpu, [k](const RunContext& ctx) {
          Tally tally;
          const Format f = k.target();
          for (std::uint64_t code = 0; code < f.code_count(); ++code) {
            if (f.is_nan(code) || f.is_inf(code)) continue;
            const auto wide = static_cast<std::uint32_t>(widen(f, code, kFP32));
            const std::uint64_t back = encode(f, k.conversion(), unpack(kFP32, wide));
            if (back == code) {
              tally.pass();
            } else {
              tally.fail(hex_code(f, code) + " -> fp32 " + hex_code(kFP32, wide) + " -> " + hex_code(f, back) +
                         "   replay: " + k.encode_replay(wide));
            }
          }
          return tally.outcome(ctx);
        });
      },
      16);

  for_each_conversion_case([](const ConversionCase& k) {
    if (k.format == FormatId::fp32) return;
    // Monotonic: x <= y (finite) never gives value(q(x)) > value(q(y)); NaN results from
    // overflow count as +-inf on their input's side.
    add_property("formats", k.name() + "/monotonic", Device::cpu, [k](const RunContext& ctx) {
      const Format f = k.target();
      const Conversion c = k.conversion();
      const auto inputs = gen_fp32(f);
      return check_random(ctx, [&] {
        const Fp32 a = *inputs;
        const Fp32 b = *inputs;
        const float fa = float_from_bits(a.bits), fb = float_from_bits(b.bits);
        RC_PRE(fa == fa && fb == fb);
        const std::uint32_t rbits = k.rounding == Rounding::stochastic ? *rc::gen::arbitrary<std::uint32_t>() : 0;
        const bool a_first = fa <= fb;
        const float lo = a_first ? fa : fb, hi = a_first ? fb : fa;
        auto value = [&](float x) {
          const std::uint64_t q = encode(f, c, unpack(kFP32, bits_of(x)), rbits);
          if (f.is_nan(q)) return x < 0 ? -HUGE_VAL : HUGE_VAL;
          return decode_double(f, q);
        };
        if (!f.is_signed) RC_PRE(lo > 0.0f);  // |x| or NaN below zero is not an order-preserving map
        RC_ASSERT(value(lo) <= value(hi));
      });
    });
    if (!k.target().is_signed) return;
    if (k.rounding != Rounding::nearest_even && k.rounding != Rounding::toward_zero &&
        k.rounding != Rounding::nearest_away)
      return;
    // Sign symmetry of the symmetric roundings, for every input whose result is not NaN.
    add_property("formats", k.name() + "/sign-symmetric", Device::cpu, [k](const RunContext& ctx) {
      const Format f = k.target();
      const Conversion c = k.conversion();
      const auto inputs = gen_fp32(f);
      return check_random(ctx, [&] {
        const Fp32 x = *inputs;
        RC_PRE(unpack(kFP32, x.bits).kind != ValueKind::nan);
        const std::uint64_t plus = encode(f, c, unpack(kFP32, x.bits));
        const std::uint64_t minus = encode(f, c, unpack(kFP32, x.bits ^ 0x80000000u));
        RC_PRE(!f.is_nan(plus) && !f.is_nan(minus));
        RC_ASSERT(hex_code(f, minus) == hex_code(f, plus ^ f.sign_bit()));
      });
    });
  });

  add_property("formats", "e2m1/packing-roundtrip", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    for (unsigned even = 0; even < 16; ++even)
      for (unsigned odd = 0; odd < 16; ++odd) {
        const std::uint8_t byte = pack_e2m1_pair(static_cast<std::uint8_t>(even), static_cast<std::uint8_t>(odd));
        const bool ok = e2m1_even(byte) == even && e2m1_odd(byte) == odd && byte == (odd << 4 | even) &&
                        pack_e2m1_pair(e2m1_even(byte), e2m1_odd(byte)) == byte;
        if (ok) {
          tally.pass();
        } else {
          tally.fail("pair (" + std::to_string(even) + ", " + std::to_string(odd) + ")");
        }
      }
    return tally.outcome(ctx);
  });
}
KVQ_REGISTER_PROPERTIES(register_codec_laws);

}  // namespace
}  // namespace kvq::props
