// MLA KV-cache layouts and kernels (suite "mla", CPU) and their GPU kernels against the CPU
// twins byte for byte (suite "gpu", mla/...). Contracts: docs/layouts.md. Expected values come
// from docs/layouts.md's numbers and from the oracle (exact rationals), never from the kernels.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "formats/float_bits.hpp"
#include "formats/recipe_names.hpp"
#include "kernels/device_grid.hpp"
#include "kernels/mla_kernels.hpp"
#include "oracle/recipes_oracle.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/harness/mix32.hpp"
#include "proptests/harness/rapidcheck_bridge.hpp"
#include "proptests/layout_mutants.hpp"

namespace kvq::props {
namespace {

using kernels::DType;
using kernels::KScale;
using kernels::MlaCacheShape;
using kernels::MlaLayoutId;
using kernels::MlaPart;
using kernels::WorkspaceBatch;
using Bytes = std::vector<std::uint8_t>;

constexpr std::size_t kGuard = 64;  // bytes after every output that must stay untouched
constexpr std::uint8_t kPoisons[2] = {0x00, 0xFF};

std::uint32_t u32_at(const Bytes& b, std::size_t at) {
  return b[at] | (std::uint32_t{b[at + 1]} << 8) | (std::uint32_t{b[at + 2]} << 16) | (std::uint32_t{b[at + 3]} << 24);
}
std::uint16_t u16_at(const Bytes& b, std::size_t at) { return static_cast<std::uint16_t>(b[at] | (b[at + 1] << 8)); }

Bytes random_bytes(std::size_t n, std::uint32_t seed) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(mix32(seed * 0x9E3779B9u + static_cast<std::uint32_t>(i)));
  return b;
}

// The exact product of finite reals (nullopt when either is NaN or inf).
std::optional<oracle::Real> exact_product(const oracle::Real& a, const oracle::Real& b) {
  const auto finite = [](const oracle::Real& r) { return r.kind == ValueKind::zero || r.kind == ValueKind::finite; };
  if (!finite(a) || !finite(b)) return std::nullopt;
  oracle::Real p;
  p.negative = a.negative != b.negative;
  p.magnitude = a.magnitude * b.magnitude;
  p.kind = p.magnitude == 0 ? ValueKind::zero : ValueKind::finite;
  return p;
}

// BF16 of the exact e4m3(code) * k, rounded once (RNE, IEEE overflow); NaN codes give 0x7FC0.
std::uint16_t oracle_rope_bf16(std::uint8_t code, float k) {
  const auto p = exact_product(oracle::real_of(kE4M3FN, code), oracle::real_of_float(k));
  if (!p) return 0x7FC0;
  return static_cast<std::uint16_t>(oracle::round_to_format(kBF16, Conversion{}, *p));
}

// ---------------------------------------------------------------------------------------------
// 576 -> 656 over a whole paged cache.

struct RequantProblem {
  std::int64_t num_blocks = 0, block_size = 0;
  Bytes src;  // num_blocks * block_size * 576 arbitrary bytes (NaN codes included)
  float k_scale = 1.0f;
};
void showValue(const RequantProblem& p, std::ostream& os) {
  os << p.num_blocks << " blocks x " << p.block_size << " tokens, k_scale " << hex_code(kFP32, bits_of(p.k_scale));
}

// k_scale: 1, powers of two, <= 4 significant bits (folds without rounding), or any positive FP32.
rc::Gen<float> gen_k_scale(bool representable_only) {
  auto short_significand = rc::gen::map(rc::gen::pair(rc::gen::inRange(8, 16), rc::gen::inRange(-40, 40)),
                                        [](std::pair<int, int> p) { return std::ldexp(static_cast<float>(p.first), p.second - 3); });
  if (representable_only) return rc::gen::weightedOneOf<float>({{1, rc::gen::just(1.0f)}, {4, short_significand}});
  return rc::gen::weightedOneOf<float>(
      {{1, rc::gen::just(1.0f)}, {2, short_significand},
       {4, rc::gen::map(rc::gen::inRange(0x00800000, 0x7f800000), [](int b) { return float_from_bits(static_cast<std::uint32_t>(b)); })}});
}

rc::Gen<RequantProblem> gen_requant(int max_blocks, rc::Gen<float> k_scales) {
  return rc::gen::exec([=] {
    RequantProblem p;
    p.num_blocks = *rc::gen::inRange(0, max_blocks + 1);
    p.block_size = *rc::gen::element<std::int64_t>(1, 2, 16, 64);
    p.src = random_bytes(static_cast<std::size_t>(p.num_blocks * p.block_size * 576), *rc::gen::arbitrary<std::uint32_t>());
    p.k_scale = *k_scales;
    return p;
  });
}

Bytes requant_cpu(const RequantProblem& p, KScale mode, std::uint8_t poison) {
  Bytes dst(static_cast<std::size_t>(p.num_blocks * p.block_size * 656) + kGuard, poison);
  const kvq::Status e = kernels::mla_requantize_576_to_656_cpu(p.num_blocks, p.block_size, p.src.data(), p.k_scale, mode, dst.data());
  if (!e.ok()) throw std::runtime_error(e.message());
  return dst;
}

kvq::Status requant_gpu(const RequantProblem& p, KScale mode, std::uint8_t poison, Bytes* got);

// The conversion under test: the CPU twin, or the launcher on the GPU (requant_gpu, below).
Bytes requant_under_test(const RequantProblem& p, KScale mode, std::uint8_t poison, bool device) {
  if (!device) return requant_cpu(p, mode, poison);
  Bytes got;
  const std::string e = requant_gpu(p, mode, poison, &got).message();
  if (!e.empty()) throw std::runtime_error("device requant: " + e);
  return got;
}

// FP32 bits of every value of a whole cache, dequantized by the twin.
std::vector<std::uint32_t> dequant_bits(const MlaCacheShape& c, const Bytes& cache, float k_scale) {
  std::vector<std::uint32_t> y(static_cast<std::size_t>(c.slots() * c.desc().dims()));
  const kvq::Status e = kernels::mla_dequantize_cpu(c, cache.data(), k_scale, DType::fp32, y.data());
  if (!e.ok()) throw std::runtime_error(e.message());
  return y;
}

bool tail_is(const Bytes& b, std::size_t used, std::uint8_t poison) {
  return std::all_of(b.begin() + static_cast<std::ptrdiff_t>(used), b.end(), [&](std::uint8_t v) { return v == poison; });
}

// RapidCheck over ctx.cases / divisor inputs (the whole-cache properties are heavier per case).
template <typename Body>
Outcome check_fraction(const RunContext& ctx, int divisor, Body&& body) {
  RunContext fewer = ctx;
  fewer.cases = std::max(1, ctx.cases / divisor);
  return check_random(fewer, std::forward<Body>(body));
}

void register_requant_properties() {
  for (const KScale mode : {KScale::fold, KScale::drop}) {
    const std::string base = std::string("requant-576-to-656/") + kernels::name_of(mode);
    // Every byte against docs/layouts.md and the oracle: nope copied, scales, rope rounded once.
    add_property("mla", base + "/cpu-twin-vs-oracle", Device::cpu,
                 [mode](const RunContext& ctx) { return mla_requant_vs_oracle(ctx, mode, mode, false); });
  }
  // Lossless: with k_scale = 1 (both versions) or a k_scale whose products fit BF16 (fold),
  // dequantizing the 576 and the 656 cache gives the same FP32 values, bit for bit.
  add_property("mla", "requant-576-to-656/lossless-dequantize-both", Device::cpu, [](const RunContext& ctx) {
    return check_fraction(ctx, 10, [] {
      RequantProblem p = *gen_requant(3, gen_k_scale(true));
      const KScale mode = p.k_scale == 1.0f ? *rc::gen::element(KScale::fold, KScale::drop) : KScale::fold;
      RC_CLASSIFY(p.k_scale == 1.0f, "k_scale 1");
      const MlaCacheShape in{MlaLayoutId::fp8_nope_fp8_rope, p.num_blocks, p.block_size};
      const MlaCacheShape out{MlaLayoutId::fp8_nope_block_scale_bf16_rope, p.num_blocks, p.block_size};
      RC_ASSERT(dequant_bits(in, p.src, p.k_scale) == dequant_bits(out, requant_cpu(p, mode, 0xA5), p.k_scale));
    });
  });
  // The engine's conversion drops k_scale: every finite non-zero value shrinks by exactly k_scale
  // (a power of two here), while the fold keeps all of them. Counts are reported.
  add_property("mla", "requant-576-to-656/drop-k-scale-loses-it", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    std::uint64_t changed = 0, values = 0;
    for (int k : {-7, -3, 1, 4}) {
      RequantProblem p;
      p.num_blocks = 2;
      p.block_size = 16;
      p.src = random_bytes(2 * 16 * 576, static_cast<std::uint32_t>(ctx.seed) + static_cast<std::uint32_t>(k));
      p.k_scale = std::ldexp(1.0f, k);
      const MlaCacheShape in{MlaLayoutId::fp8_nope_fp8_rope, p.num_blocks, p.block_size};
      const MlaCacheShape out{MlaLayoutId::fp8_nope_block_scale_bf16_rope, p.num_blocks, p.block_size};
      const auto want = dequant_bits(in, p.src, p.k_scale);
      const auto dropped = dequant_bits(out, requant_cpu(p, KScale::drop, 0xA5), p.k_scale);
      const auto folded = dequant_bits(out, requant_cpu(p, KScale::fold, 0xA5), p.k_scale);
      for (std::size_t i = 0; i < want.size(); ++i) {
        const float w = float_from_bits(want[i]), d = float_from_bits(dropped[i]);
        const bool finite_nonzero = std::isfinite(w) && w != 0.0f;
        values += finite_nonzero;
        changed += want[i] != dropped[i];
        if (folded[i] == want[i] && (!finite_nonzero || (d != w && d * p.k_scale == w)) &&
            (finite_nonzero || dropped[i] == want[i])) {
          tally.pass();
        } else {
          std::ostringstream os;
          os << "k_scale 2^" << k << " value " << i << ": 576 " << hex_code(kFP32, want[i]) << ", fold "
             << hex_code(kFP32, folded[i]) << ", drop " << hex_code(kFP32, dropped[i]);
          tally.fail(os.str());
        }
      }
    }
    Outcome o = tally.outcome(ctx);
    o.metrics = {{"values_changed_by_drop", static_cast<double>(changed)}, {"finite_nonzero_values", static_cast<double>(values)}};
    return o;
  });
}

// ---------------------------------------------------------------------------------------------
// BF16 -> 656 / MODEL1 and back.

struct QuantProblem {
  MlaCacheShape cache;
  std::int64_t tokens = 0;
  std::vector<std::uint16_t> x;        // [tokens, dims] BF16 bits
  std::vector<std::int64_t> slots;     // slot_mapping: distinct slots, -1 = padding
};
void showValue(const QuantProblem& p, std::ostream& os) {
  os << kernels::name_of(p.cache.layout) << " " << p.cache.num_blocks << " blocks x " << p.cache.block_size << ", "
     << p.tokens << " tokens, slots";
  for (auto s : p.slots) os << " " << s;
}

// BF16 tokens tile by tile: zero tiles, a single max element, NaN/inf, subnormals, any bits, or
// values of one binade range; 64-value chunks so both tile sizes meet every kind.
std::vector<std::uint16_t> make_tokens(std::int64_t count, std::uint32_t seed) {
  std::vector<std::uint16_t> x(static_cast<std::size_t>(count));
  for (std::int64_t c = 0; c < count; c += 64) {
    const std::uint32_t kind = mix32(seed ^ static_cast<std::uint32_t>(c * 2654435761u)) % 10;
    const int exponent = static_cast<int>(mix32(seed + static_cast<std::uint32_t>(c)) % 80) - 40;
    for (std::int64_t i = c; i < std::min(count, c + 64); ++i) {
      const std::uint32_t h = mix32(seed * 31u + static_cast<std::uint32_t>(i));
      float v = std::ldexp(static_cast<float>(static_cast<int>(h % 4001) - 2000), exponent - 11);
      if (kind == 0) v = (h & 1) ? -0.0f : 0.0f;
      if (kind == 1) v = i == c + static_cast<std::int64_t>(h % 7) ? std::ldexp(448.0f, exponent) : 0.0f;
      if (kind == 2) v = float_from_bits((h & 0xffffu) << 16);
      if (kind == 3 && h % 17 == 0) v = (h & 64) ? NAN : -INFINITY;
      if (kind == 4) v = float_from_bits((h & 0x807fu) << 16);  // BF16 subnormals
      x[static_cast<std::size_t>(i)] = static_cast<std::uint16_t>(bits_of(v) >> 16);
      if (kind == 3 && h % 17 == 0 && (h & 64)) x[static_cast<std::size_t>(i)] = 0x7FC1;  // a NaN with payload
    }
  }
  return x;
}

// Random page table: tokens land in a random permutation of the cache's slots, some padding.
rc::Gen<QuantProblem> gen_quant(MlaLayoutId layout, int max_blocks) {
  return rc::gen::exec([=] {
    QuantProblem p;
    p.cache = MlaCacheShape{layout, *rc::gen::inRange(1, max_blocks + 1), *rc::gen::element<std::int64_t>(1, 3, 16, 64)};
    const std::uint32_t seed = *rc::gen::arbitrary<std::uint32_t>();
    std::vector<std::int64_t> order(static_cast<std::size_t>(p.cache.slots()));
    std::iota(order.begin(), order.end(), 0);
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[mix32(seed + static_cast<std::uint32_t>(i)) % i]);
    p.tokens = *rc::gen::inRange<std::int64_t>(0, p.cache.slots() + 1);
    for (std::int64_t i = 0; i < p.tokens; ++i)
      p.slots.push_back(mix32(~seed + static_cast<std::uint32_t>(i)) % 5 == 0 ? -1 : order[static_cast<std::size_t>(i)]);
    p.x = make_tokens(p.tokens * p.cache.desc().dims(), seed);
    return p;
  });
}

Bytes quant_cpu(const QuantProblem& p, std::uint8_t poison, const Recipe& tile) {
  Bytes cache(static_cast<std::size_t>(p.cache.bytes()) + kGuard, poison);
  const kvq::Status e = kernels::mla_quantize_cpu(p.cache, tile, p.x.data(), p.slots.data(), p.tokens, cache.data());
  if (!e.ok()) throw std::runtime_error(e.message());
  return cache;
}

// Byte offsets of a kernel's buffers from their allocations: all 0, or views the launchers must
// take on the kernels' unaligned paths (the aligned kernels need 16-byte aligned buffers).
struct Offsets {
  std::size_t in = 0, out = 0;
};
kvq::Status quant_gpu(const QuantProblem& p, std::uint8_t poison, Bytes* got, Offsets at = {});
Recipe tile_rule(const kernels::MlaLayout& l, const char* name);

// The writer under test: the CPU twin under tile rule `run` (nullptr: the layout's own), or the
// launcher on the GPU (quant_gpu, below), which applies the layout's own rule.
Bytes quant_under_test(const QuantProblem& p, std::uint8_t poison, const char* run, bool device) {
  if (!device) return quant_cpu(p, poison, run ? tile_rule(p.cache.desc(), run) : kernels::mla_tile_recipe(p.cache.desc()));
  if (run) throw std::runtime_error("the device MLA writer applies the layout's own tile rule only");
  Bytes got;
  const std::string e = quant_gpu(p, poison, &got).message();
  if (!e.empty()) throw std::runtime_error("device quantize: " + e);
  return got;
}

// The bytes a token at `slot` owns: its record and tail record (pad included).
std::vector<std::size_t> owned_bytes(const MlaCacheShape& c, std::int64_t slot) {
  std::vector<std::size_t> out;
  const auto l = c.desc();
  const std::int64_t block = slot / c.block_size, t = slot % c.block_size;
  for (std::int64_t i = 0; i < l.record_bytes(); ++i) out.push_back(static_cast<std::size_t>(l.record_offset(c.block_size, block, t) + i));
  for (std::int64_t i = 0; i < l.tail_bytes(); ++i) out.push_back(static_cast<std::size_t>(l.tail_offset(c.block_size, block, t) + i));
  return out;
}

// E4M3 half-gap bound of one element in a tile with scale 2^e: |x - dq| <= gap(|x| 2^-e)/2 * 2^e.
bool within_half_gap(float x, float dq, int e) {
  const double y = std::ldexp(std::fabs(static_cast<double>(x)), -e);
  const double gap = y < 0x1p-6 ? 0x1p-9 : std::ldexp(1.0, std::ilogb(y) - 3);
  return std::fabs(static_cast<double>(x) - static_cast<double>(dq)) <= std::ldexp(gap / 2, e);
}

// A named recipe as a tile rule of layout l (its block the layout's tile).
Recipe tile_rule(const kernels::MlaLayout& l, const char* name) {
  return kernels::mla_tile_rule_of(l, kvq::recipe_from_name(name)->recipe);
}

void register_quantize_properties() {
  struct TileRule {
    MlaLayoutId layout;
    const char* recipe;  // nullptr: the layout's own (mla_tile_recipe, what the kernels apply)
  };
  // The layouts' own rules (SGLang's FP32 amax/448 tile scales, mla-model1-tile64) and rules a port
  // follows instead (the twin's recipe argument: verify mla-cache): FlashMLA's power-of-two rule on
  // the 656 record and at MODEL1's tile, and an OCP rule whose NaN elements decide the tile's scale.
  const TileRule rules[] = {{MlaLayoutId::fp8_nope_block_scale_bf16_rope, nullptr},
                            {MlaLayoutId::model1_fp8_sparse, nullptr},
                            {MlaLayoutId::fp8_nope_block_scale_bf16_rope, "mla-fp8-tile128"},
                            {MlaLayoutId::fp8_nope_block_scale_bf16_rope, "mxfp8-e4m3-ceil"},
                            {MlaLayoutId::model1_fp8_sparse, "mla-fp8-tile128"}};
  for (const TileRule rule : rules) {
    const MlaLayoutId layout = rule.layout;
    const std::string base = std::string("quantize-") + kernels::name_of(layout) + (rule.recipe ? std::string("/") + rule.recipe : "");
    // Codes and scales == the recipe oracle's for the tile rule, rope copied, dequantized values ==
    // the oracle's, error within the tile's half gap (power-of-two scales); only the mapped tokens'
    // bytes written (poison), random page tables.
    add_property("mla", base + "/cpu-twin-vs-recipe-oracle", Device::cpu, [rule](const RunContext& ctx) {
      return mla_quantize_vs_recipe_oracle(ctx, rule.layout, rule.recipe, rule.recipe, false);
    });
  }
  // Crafted tiles, expected values by hand from each rule: the 656-byte record's own
  // (fp8-e4m3-tensor-rcp-triton per tile, SGLang's: s = amax / 448 and x * (1 / s) with Triton's `/`,
  // div.full.f32 = x * rcp.approx(y), so only tiles whose quotients need no table value are worked
  // out: s = 0 * rcp(448) = 0, 1 / 0 = inf, inf * rcp(448) = inf, rcp(inf) = 0, tl.clamp NaN -> 448);
  // FlashMLA's power-of-two rule on the same record (mla-fp8-tile128, 2^ceil(log2(max(amax/448,
  // 1e-4)))); MODEL1's own (2^ceil(log2(max(amax, bf16(1e-4)) / 448)), bf16(1e-4) = 0x38D2 =
  // 1.0013580322265625e-4, NaN elements ignored by the max and clamped to 448 before the cast, an
  // infinite max giving byte 0xFF and elements x * 2^-inf).
  add_property("mla", "quantize/special-tiles", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    struct Expected {
      std::uint32_t scale_bits;  // the tile scale as FP32 bits (MODEL1's byte decoded)
      std::uint8_t code0, code_rest;
      bool known = true;  // false: the value needs rcp.approx's table, not worked out here
    };
    constexpr Expected kTable{0, 0, 0, false};
    struct Case {
      const char* what;
      float element0;  // the tile: element 0 this, the others `rest`
      float rest;
      Expected sglang, pow2, model1;
    };
    const Case cases[] = {
        {"all zero: SGLang s = 0, 0 * (1/0) = NaN -> 448; pow2 2^ceil(log2 1e-4) = 2^-13; MODEL1 1.00136e-4/448 -> 2^-22",
         0.0f, 0.0f, {0x00000000u, 0x7E, 0x7E}, {0x39000000u, 0x00, 0x00}, {0x34800000u, 0x00, 0x00}},
        {"all -0: the same scales; SGLang -0 * inf = NaN -> 448, the others -0 (0x80)", -0.0f, -0.0f,
         {0x00000000u, 0x7E, 0x7E}, {0x39000000u, 0x80, 0x80}, {0x34800000u, 0x80, 0x80}},
        {"single max 448: scale 1", 448.0f, 0.0f, kTable, {0x3f800000u, 0x7E, 0x00}, {0x3f800000u, 0x7E, 0x00}},
        {"single 450: scale 2, 225 -> 224", 450.0f, 0.0f, kTable, {0x40000000u, 0x76, 0x00}, {0x40000000u, 0x76, 0x00}},
        {"single -2^-5: pow2 the 1e-4 floor wins; both scale 2^-13, -256", -0.03125f, 0.0f, kTable,
         {0x39000000u, 0xF8, 0x00}, {0x39000000u, 0xF8, 0x00}},
        {"single 2^-14: pow2 floor on the ratio 2^-13, code 0.5; MODEL1 floor on bmax 2^-22, code 256", 0x1p-14f, 0.0f,
         kTable, {0x39000000u, 0x30, 0x00}, {0x34800000u, 0x78, 0x00}},
        {"NaN element: scale 2^ceil(log2(1/448)) = 2^-8 from the rest; pow2 code 0x7F, MODEL1 clamped to 448", NAN, 1.0f,
         kTable, {0x3b800000u, 0x7F, 0x78}, {0x3b800000u, 0x7E, 0x78}},
        {"inf element: SGLang s = inf, 1/inf = 0: inf * 0 -> NaN -> 448, 1 * 0 = 0; pow2 NaN scale, every code 0x7F; "
         "MODEL1 byte 0xFF, x * 2^-inf", INFINITY, 1.0f,
         {0x7f800000u, 0x7E, 0x00}, {kCanonicalNanBits, 0x7F, 0x7F}, {kCanonicalNanBits, 0x7E, 0x00}},
    };
    struct Rule {
      MlaLayoutId layout;
      const char* recipe;  // nullptr: the layout's own
      Expected Case::*want;
    };
    const Rule rules[] = {{MlaLayoutId::fp8_nope_block_scale_bf16_rope, nullptr, &Case::sglang},
                          {MlaLayoutId::fp8_nope_block_scale_bf16_rope, "mla-fp8-tile128", &Case::pow2},
                          {MlaLayoutId::model1_fp8_sparse, nullptr, &Case::model1}};
    for (const Rule& rule : rules) {
      const MlaCacheShape c{rule.layout, 1, 1};
      const auto l = c.desc();
      const Recipe r = rule.recipe ? tile_rule(l, rule.recipe) : kernels::mla_tile_recipe(l);
      for (const Case& k : cases) {
        const Expected& want = k.*rule.want;
        if (!want.known) continue;
        std::vector<std::uint16_t> x(static_cast<std::size_t>(l.dims()), 0);
        for (int t = 0; t < l.tiles(); ++t) {
          x[static_cast<std::size_t>(t * l.tile)] = static_cast<std::uint16_t>(bits_of(k.element0) >> 16);
          for (int i = 1; i < l.tile; ++i) x[static_cast<std::size_t>(t * l.tile + i)] = static_cast<std::uint16_t>(bits_of(k.rest) >> 16);
        }
        const std::int64_t slot = 0;
        Bytes cache(static_cast<std::size_t>(c.bytes()), 0xA5);
        const kvq::Status e = kernels::mla_quantize_cpu(c, r, x.data(), &slot, 1, cache.data());
        bool ok = e.ok();
        const std::size_t scales = static_cast<std::size_t>(c.part(0, MlaPart::tile_scales));
        for (int t = 0; ok && t < l.tiles(); ++t) {
          const std::uint32_t s = rule.layout == MlaLayoutId::model1_fp8_sparse
                                      ? (cache[scales + t] == 0xFF ? kCanonicalNanBits : bits_of(std::ldexp(1.0f, cache[scales + t] - 127)))
                                      : u32_at(cache, scales + 4 * t);
          ok = s == want.scale_bits && cache[static_cast<std::size_t>(t * l.tile)] == want.code0;
          for (int i = 1; ok && i < l.tile; ++i) ok = cache[static_cast<std::size_t>(t * l.tile + i)] == want.code_rest;
        }
        if (ok) tally.pass();
        else tally.fail(std::string(l.name) + " (" + (rule.recipe ? rule.recipe : "own rule") + "): " + k.what +
                        (e.ok() ? "" : ": " + e.message()));
      }
    }
    return tally.outcome(ctx);
  });
}

// ---------------------------------------------------------------------------------------------
// NVFP4 paged cache -> E4M3 workspace.

struct WorkspaceProblem {
  WorkspaceBatch w;
  Bytes cache;
  std::vector<std::int32_t> tables, cu;
  float factor_k = 1.0f, factor_v = 1.0f;
};
void showValue(const WorkspaceProblem& p, std::ostream& os) {
  const auto& g = p.w.pages;
  os << g.num_blocks << " blocks x " << g.block_size << " tokens x " << g.heads << " heads x " << g.head_dim << ", batch "
     << p.w.batch << ", cu_seq_lens";
  for (auto c : p.cu) os << " " << c;
  os << ", factors " << hex_code(kFP32, bits_of(p.factor_k)) << " " << hex_code(kFP32, bits_of(p.factor_v));
}

rc::Gen<float> gen_factor() {
  return rc::gen::weightedOneOf<float>({
      {4, rc::gen::map(rc::gen::inRange(-30, 10), [](int k) { return std::ldexp(1.0f / 6.0f, k); })},
      {4, rc::gen::map(rc::gen::inRange(0, 0x7f800000), [](int b) { return float_from_bits(static_cast<std::uint32_t>(b)); })},
      {1, rc::gen::element(0.0f, INFINITY, 0x1p-149f, kFp32Max)}});
}

rc::Gen<WorkspaceProblem> gen_workspace(int max_blocks, int max_batch) {
  return rc::gen::exec([=] {
    WorkspaceProblem p;
    auto& g = p.w.pages;
    p.w.recipe = recipe_from_name("nvfp4")->recipe;
    g.num_blocks = *rc::gen::inRange(1, max_blocks + 1);
    g.block_size = *rc::gen::element<std::int64_t>(1, 4, 16);
    g.heads = *rc::gen::inRange(1, 4);
    g.head_dim = 16 * *rc::gen::inRange(1, 5);
    p.w.batch = *rc::gen::inRange(0, max_batch + 1);
    p.w.max_blocks_per_seq = *rc::gen::inRange(1, 5);
    const std::uint32_t seed = *rc::gen::arbitrary<std::uint32_t>();
    p.cache = random_bytes(static_cast<std::size_t>(g.cache_bytes()), seed);
    p.cu = {0};
    for (std::int64_t b = 0; b < p.w.batch; ++b)
      p.cu.push_back(p.cu.back() + *rc::gen::inRange<std::int32_t>(0, static_cast<std::int32_t>(p.w.max_blocks_per_seq * g.block_size) + 1));
    p.w.workspace_tokens = p.cu.back();
    p.tables.resize(static_cast<std::size_t>(p.w.batch * p.w.max_blocks_per_seq));
    for (std::size_t i = 0; i < p.tables.size(); ++i)  // any page, shared pages allowed (prefix caching)
      p.tables[i] = static_cast<std::int32_t>(mix32(~seed + static_cast<std::uint32_t>(i)) % g.num_blocks);
    p.factor_k = *gen_factor();
    p.factor_v = *gen_factor();
    return p;
  });
}

struct WorkspaceOut {
  Bytes k, v;
};
WorkspaceOut workspace_cpu(const WorkspaceProblem& p, std::uint8_t poison) {
  WorkspaceOut o{Bytes(static_cast<std::size_t>(p.w.workspace_bytes()) + kGuard, poison),
                 Bytes(static_cast<std::size_t>(p.w.workspace_bytes()) + kGuard, poison)};
  const kvq::Status e = kernels::nvfp4_paged_to_workspace_cpu(p.w, p.cache.data(), p.tables.data(), p.cu.data(), p.factor_k,
                                                              p.factor_v, o.k.data(), o.v.data());
  if (!e.ok()) throw std::runtime_error(e.message());
  return o;
}

// E4M3 (satfinite) of the exact product first rounded to BF16: the double-rounding path.
std::uint8_t via_bf16(const Recipe& r, std::uint8_t scale, std::uint8_t code, float factor) {
  const auto p1 = exact_product(oracle::real_of(kE2M1, code), oracle::real_of(kE4M3FN, scale));
  const auto p = p1 ? exact_product(*p1, oracle::real_of_float(factor)) : std::nullopt;
  if (!p) return oracle::recipe_requantize_e4m3(r, scale, code, factor);  // NaN/inf: no rounding to compare
  const auto bf16 = oracle::round_to_format(kBF16, Conversion{}, *p);
  return static_cast<std::uint8_t>(oracle::round_to_format(kE4M3FN, scale_conversion(), oracle::real_of(kBF16, bf16)));
}

void register_workspace_properties() {
  // Every element == the oracle's exact code * scale * factor rounded once (or, half the cases, as
  // a port's WorkspaceRounding rounds it: the twin is the model `kvq verify workspace` uses); rows
  // addressed with the vLLM page formula written out here; every workspace byte written, nothing
  // past it.
  add_property("mla", "workspace-nvfp4-paged/cpu-twin-vs-oracle", Device::cpu, [](const RunContext& ctx) {
    std::uint64_t elements = 0, double_rounding = 0;
    Outcome o = check_fraction(ctx, 8, [&] {
      WorkspaceProblem p = *gen_workspace(6, 4);
      if (*rc::gen::arbitrary<bool>())
        p.w.rounding = {*rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>()};
      const auto& g = p.w.pages;
      const WorkspaceOut a = workspace_cpu(p, 0x00), b = workspace_cpu(p, 0xFF);
      const std::size_t used = static_cast<std::size_t>(p.w.workspace_bytes());
      RC_ASSERT(Bytes(a.k.begin(), a.k.begin() + used) == Bytes(b.k.begin(), b.k.begin() + used));
      RC_ASSERT(Bytes(a.v.begin(), a.v.begin() + used) == Bytes(b.v.begin(), b.v.begin() + used));
      RC_ASSERT(tail_is(a.k, used, 0x00) && tail_is(a.v, used, 0x00) && tail_is(b.k, used, 0xFF) && tail_is(b.v, used, 0xFF));
      const std::int64_t D = g.head_dim, side_bytes = g.block_size * g.heads * (D / 2 + D / 16);
      for (std::int64_t req = 0; req < p.w.batch; ++req)
        for (std::int64_t pos = 0; pos < p.cu[req + 1] - p.cu[req]; ++pos)
          for (int side = 0; side < 2; ++side)
            for (std::int64_t h = 0; h < g.heads; ++h)
              for (std::int64_t d = 0; d < D; ++d) {
                const std::int64_t page = p.tables[static_cast<std::size_t>(req * p.w.max_blocks_per_seq + pos / g.block_size)];
                const std::int64_t t = pos % g.block_size, base = page * 2 * side_bytes + side * side_bytes;
                const std::uint8_t byte = p.cache[static_cast<std::size_t>(base + (t * g.heads + h) * (D / 2) + d / 2)];
                const std::uint8_t code = (d & 1) ? byte >> 4 : byte & 0xF;
                const std::uint8_t scale =
                    p.cache[static_cast<std::size_t>(base + g.block_size * g.heads * (D / 2) + (t * g.heads + h) * (D / 16) + d / 16)];
                const float factor = side ? p.factor_v : p.factor_k;
                const std::uint8_t want = oracle::recipe_requantize_e4m3(p.w.recipe, scale, code, factor, p.w.rounding);
                const Bytes& out = side ? a.v : a.k;
                RC_ASSERT(hex_code(kE4M3FN, out[static_cast<std::size_t>(((p.cu[req] + pos) * g.heads + h) * D + d)]) ==
                          hex_code(kE4M3FN, want));
                ++elements;
                if (p.w.rounding.reference()) double_rounding += via_bf16(p.w.recipe, scale, code, factor) != want;
              }
    });
    o.metrics = {{"elements", static_cast<double>(elements)}, {"double_rounding_via_bf16_differs", static_cast<double>(double_rounding)}};
    return o;
  });
  // The ports' roundings on elements worked out by hand (docs/layouts.md "3."): SGLang's FP32
  // products, BF16 and PyTorch's non-saturating cast against kvq's single satfinite rounding.
  add_property("mla", "workspace-nvfp4-paged/roundings-by-hand", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    const Recipe r = recipe_from_name("nvfp4")->recipe;
    const WorkspaceRounding once{}, fp32{true, false, true}, bf16{false, true, true}, sglang{true, true, false},
        nonsat{false, false, false};
    struct Case {
      const char* what;
      std::uint8_t code, scale;
      float factor;
      WorkspaceRounding rounding;
      std::uint8_t want;
    };
    const float sixth = float_from_bits(0x3e2aaaabu);  // RN(1/6) = (1/6)(1 + 2^-25)
    const Case cases[] = {
        {"3 x 2^-9 x RN(1/6) = 2^-10 (1 + 2^-25), above the midpoint: once 2^-9", 0x5, 0x01, sixth, once, 0x01},
        {"the same through FP32: 2^-10 exactly (2^-35 is below half an ulp), a tie to even 0", 0x5, 0x01, sixth, fp32, 0x00},
        {"the same through BF16: 2^-10, a tie to even 0", 0x5, 0x01, sixth, bf16, 0x00},
        {"6 x 448 = 2688: satfinite 448", 0x7, 0x7E, 1.0f, once, 0x7E},
        {"6 x 448 = 2688: PyTorch's cast NaN", 0x7, 0x7E, 1.0f, nonsat, 0x7F},
        {"6 x 80 = 480, past 464: SGLang NaN", 0x7, 0x6A, 1.0f, sglang, 0x7F},
        {"-6 x 80 = -480: SGLang NaN with the sign kept (PyTorch's cast), 0xFF", 0xF, 0x6A, 1.0f, sglang, 0xFF},
        {"4 x 112 = 448: SGLang 448", 0x6, 0x6E, 1.0f, sglang, 0x7E},
        {"a NaN scale: 0x7F under every rounding", 0x1, 0x7F, 1.0f, sglang, 0x7F},
    };
    for (const Case& c : cases) {
      const std::uint8_t twin = requantize_e4m3_rounded(r, c.scale, c.code, c.factor, c.rounding);
      const std::uint8_t orc = oracle::recipe_requantize_e4m3(r, c.scale, c.code, c.factor, c.rounding);
      if (twin == c.want && orc == c.want) tally.pass();
      else tally.fail(std::string(c.what) + ": twin " + hex_code(kE4M3FN, twin) + ", oracle " + hex_code(kE4M3FN, orc));
    }
    return tally.outcome(ctx);
  });
  // The kernel's own bounds checks (the launcher cannot read device tables): a page id out of
  // range gives 0x7F codes, rows past workspace_tokens are not written, nothing past the outputs.
  add_property("mla", "workspace-nvfp4-paged/bad-tables-stay-in-bounds", Device::cpu, [](const RunContext& ctx) {
    return check_fraction(ctx, 10, [] {
      WorkspaceProblem p = *gen_workspace(6, 4);
      for (std::size_t i = 0; i < p.tables.size(); i += 2) p.tables[i] = i % 4 ? -3 : static_cast<std::int32_t>(p.w.pages.num_blocks);
      const std::int64_t full = p.w.workspace_tokens;
      p.w.workspace_tokens = full / 2;
      const auto& g = p.w.pages;
      const std::size_t bytes = static_cast<std::size_t>(p.w.workspace_bytes());
      WorkspaceOut o{Bytes(bytes + kGuard, 0xA5), Bytes(bytes + kGuard, 0xA5)};
      for (std::int64_t side = 0; side < p.w.page_sides(); ++side)
        kernels::nvfp4_page_side_to_workspace(p.w, p.cache.data(), p.tables.data(), p.cu.data(), p.factor_k, p.factor_v,
                                              o.k.data(), o.v.data(), side);
      RC_ASSERT(tail_is(o.k, bytes, 0xA5) && tail_is(o.v, bytes, 0xA5));
      for (std::int64_t req = 0; req < p.w.batch; ++req)
        for (std::int64_t pos = 0; pos < p.cu[req + 1] - p.cu[req] && p.cu[req] + pos < p.w.workspace_tokens; ++pos) {
          const std::int32_t page = p.tables[static_cast<std::size_t>(req * p.w.max_blocks_per_seq + pos / g.block_size)];
          if (page >= 0 && page < g.num_blocks) continue;
          const std::size_t row = static_cast<std::size_t>((p.cu[req] + pos) * g.heads * g.head_dim);
          for (std::size_t i = 0; i < static_cast<std::size_t>(g.heads * g.head_dim); ++i)
            RC_ASSERT(o.k[row + i] == 0x7F && o.v[row + i] == 0x7F);
        }
    });
  });
  // Every (E2M1 code, E4M3 scale) pair at a few workspace factors: the twin's single rounding ==
  // the oracle, and where rounding through BF16 first would differ, counted (and shown).
  add_property("mla", "workspace-nvfp4-paged/double-rounding-via-bf16-count", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    const Recipe r = recipe_from_name("nvfp4")->recipe;
    std::vector<std::pair<std::string, double>> metrics;
    const float factors[] = {1.0f / 6.0f, 1.0f, 1.0f / 448.0f, 0.3f, float_from_bits(mix32(static_cast<std::uint32_t>(ctx.seed)) % 0x3f800000u + 0x30000000u)};
    std::uint64_t total = 0;
    std::string first;
    for (const float factor : factors) {
      std::uint64_t differ = 0;
      const kernels::Nvfp4PageGeometry g{1, 1, 1, 16};
      const WorkspaceBatch w{r, g, 1, 1, 1};
      const std::int32_t table[1] = {0}, cu[2] = {0, 1};
      for (int scale = 0; scale < 256; ++scale) {
        Bytes cache(static_cast<std::size_t>(g.cache_bytes()), 0);
        for (int code = 0; code < 16; ++code) {
          cache[static_cast<std::size_t>(code / 2)] |= static_cast<std::uint8_t>((code & 1) ? code << 4 : code);
        }
        cache[static_cast<std::size_t>(g.scale_offset(0, 0, 0, 0))] = static_cast<std::uint8_t>(scale);
        Bytes k(16), v(16);
        const kvq::Status e = kernels::nvfp4_paged_to_workspace_cpu(w, cache.data(), table, cu, factor, factor, k.data(), v.data());
        for (int code = 0; code < 16; ++code) {
          const std::uint8_t want = oracle::recipe_requantize_e4m3(r, static_cast<std::uint8_t>(scale), static_cast<std::uint8_t>(code), factor);
          if (e.ok() && k[static_cast<std::size_t>(code)] == want) {
            tally.pass();
          } else {
            tally.fail("scale " + hex_code(kE4M3FN, scale) + " code " + hex_code(kE2M1, code) + ": " + e.message());
          }
          const std::uint8_t twice = via_bf16(r, static_cast<std::uint8_t>(scale), static_cast<std::uint8_t>(code), factor);
          if (twice != want) {
            ++differ;
            if (first.empty())
              first = "e2m1 " + hex_code(kE2M1, code) + " x e4m3 " + hex_code(kE4M3FN, scale) + " x " + hex_code(kFP32, bits_of(factor)) +
                      ": once " + hex_code(kE4M3FN, want) + ", via bf16 " + hex_code(kE4M3FN, twice);
          }
        }
      }
      std::ostringstream name;
      name << "differs_at_factor_" << std::hexfloat << factor;
      metrics.push_back({name.str(), static_cast<double>(differ)});
      total += differ;
    }
    metrics.push_back({"differs_total_of_" + std::to_string(256 * 16 * std::size(factors)), static_cast<double>(total)});
    Outcome o = tally.outcome(ctx);
    o.metrics = metrics;
    if (!first.empty()) o.classes = {{"first double-rounding case: " + first, 1}};
    return o;
  });
}

// ---------------------------------------------------------------------------------------------
// Layout offsets and validation.

void register_layout_properties() {
  // Offsets derived from the descriptions == docs/layouts.md's numbers.
  add_property("mla", "layouts/offsets-match-reference", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    const auto expect = [&](bool ok, const std::string& what) { ok ? tally.pass() : tally.fail(what); };
    using kernels::mla_layout;
    const auto v32 = mla_layout(MlaLayoutId::fp8_nope_block_scale_bf16_rope);
    const auto m1 = mla_layout(MlaLayoutId::model1_fp8_sparse);
    expect(mla_layout(MlaLayoutId::bf16).token_bytes() == 1152, "bf16 1152 B");
    expect(mla_layout(MlaLayoutId::fp8_nope_fp8_rope).token_bytes() == 576, "fp8_nope_fp8_rope 576 B");
    expect(v32.token_bytes() == 656 && v32.offset_of(MlaPart::tile_scales) == 512 && v32.offset_of(MlaPart::rope) == 528,
           "656: scales at 512, rope at 528");
    for (std::int64_t T = 1; T <= 128; ++T) {
      const std::int64_t used = T * (448 + 128) + T * 8, padded = (used + 575) / 576 * 576;
      expect(m1.block_bytes(T) == padded, "model1 block bytes at T=" + std::to_string(T));
      expect(m1.part_offset(T, 2, T - 1, MlaPart::tile_scales) == 2 * padded + T * 576 + (T - 1) * 8,
             "model1 last token's scales at T=" + std::to_string(T));
      expect(m1.part_offset(T, 1, T - 1, MlaPart::rope) == padded + (T - 1) * 576 + 448, "model1 rope at T=" + std::to_string(T));
      expect(v32.part_offset(T, 3, T - 1, MlaPart::rope) == (3 * T + T - 1) * 656 + 528, "656 rope at T=" + std::to_string(T));
    }
    const kernels::Nvfp4PageGeometry g{5, 16, 8, 128};
    expect(g.full_dim() == 72 && g.data_offset(3, 1, 5, 2) == 3 * 2 * 16 * 8 * 72 + 16 * 8 * 72 + (5 * 8 + 2) * 64,
           "nvfp4 page data offset");
    expect(g.scale_offset(3, 0, 5, 2) == 3 * 2 * 16 * 8 * 72 + 16 * 8 * 64 + (5 * 8 + 2) * 8, "nvfp4 page scale offset");
    return tally.outcome(ctx);
  });
  add_property("mla", "validation-errors-name-the-argument", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    const auto expect = [&](const kvq::Status& e, const char* word) {
      const bool ok = *word ? e.message().find(word) != std::string::npos : e.ok();
      if (ok) tally.pass(); else tally.fail("expected '" + std::string(word) + "', got '" + e.message() + "'");
    };
    Bytes sink(4096, 0xA5);
    std::vector<std::uint16_t> x(2 * 576, 0);
    expect(kernels::mla_requantize_576_to_656_cpu(-1, 16, sink.data(), 1.0f, KScale::fold, sink.data()), "num_blocks");
    expect(kernels::mla_requantize_576_to_656_cpu(1, 0, sink.data(), 1.0f, KScale::fold, sink.data()), "block_size");
    for (const float k : {0.0f, -1.0f, NAN, INFINITY})
      expect(kernels::mla_requantize_576_to_656_cpu(1, 1, sink.data(), k, KScale::fold, sink.data()), "k_scale");
    const MlaCacheShape v32{MlaLayoutId::fp8_nope_block_scale_bf16_rope, 1, 2};
    const std::int64_t past[2] = {0, 2}, repeat[2] = {1, 1};
    expect(kernels::mla_quantize_cpu(v32, x.data(), past, 2, sink.data()), "slot_mapping[1] = 2");
    expect(kernels::mla_quantize_cpu(v32, x.data(), repeat, 2, sink.data()), "slot_mapping[1] = 1 repeats");
    expect(kernels::mla_quantize_cpu(v32, x.data(), past, -1, sink.data()), "num_tokens");
    expect(kernels::mla_quantize_cpu({MlaLayoutId::fp8_nope_fp8_rope, 1, 2}, x.data(), past, 1, sink.data()), "layout");
    const MlaCacheShape model1{MlaLayoutId::model1_fp8_sparse, 1, 2};
    const std::int64_t one[1] = {0};
    const auto tile_rule_of = [&](const MlaCacheShape& c, const char* name) { return tile_rule(c.desc(), name); };
    expect(kernels::mla_quantize_cpu(v32, tile_rule_of(v32, "nvfp4"), x.data(), one, 1, sink.data()), "E4M3");
    expect(kernels::mla_quantize_cpu(v32, tile_rule_of(v32, "nvfp4-4over6"), x.data(), one, 1, sink.data()), "E4M3");
    expect(kernels::mla_quantize_cpu(model1, tile_rule_of(model1, "fp8-e4m3-tensor"), x.data(), one, 1, sink.data()),
           "E8M0 tile scales");
    expect(kernels::mla_quantize_cpu(model1, recipe_from_name("mla-fp8-tile128")->recipe, x.data(), one, 1, sink.data()),
           "block must be the layout's tile (64");
    expect(kernels::mla_dequantize_cpu({MlaLayoutId::fp8_nope_fp8_rope, 1, 2}, sink.data(), NAN, DType::fp32, x.data()), "k_scale");
    if (std::all_of(sink.begin(), sink.end(), [](std::uint8_t b) { return b == 0xA5; })) tally.pass(); else tally.fail("a rejected call wrote");
    WorkspaceBatch w{recipe_from_name("nvfp4")->recipe, {2, 4, 1, 16}, 1, 2, 3};
    std::int32_t tables[2] = {0, 1}, cu[2] = {0, 3};
    const auto run = [&](const WorkspaceBatch& b, float fk = 1.0f) {
      return kernels::nvfp4_paged_to_workspace_cpu(b, sink.data(), tables, cu, fk, 1.0f, sink.data() + 1024, sink.data() + 2048);
    };
    expect(run(w), "");
    WorkspaceBatch bad = w;
    bad.recipe = recipe_from_name("mxfp4-floor")->recipe;
    expect(run(bad), "recipe");
    bad = w;
    bad.pages.head_dim = 24;
    expect(run(bad), "head_dim");
    bad = w;
    bad.pages.heads = 0;
    expect(run(bad), "heads");
    bad = w;
    bad.max_blocks_per_seq = 0;
    expect(run(bad), "max_blocks_per_seq");
    expect(run(w, NAN), "factor_k");
    bad = w;
    bad.workspace_tokens = 4;
    expect(run(bad), "cu_seq_lens[batch] = 3 must equal workspace_tokens = 4");
    cu[1] = 9;
    w.workspace_tokens = 9;
    expect(run(w), "sequence length of request 0");
    cu[1] = 3;
    w.workspace_tokens = 3;
    tables[0] = 2;
    expect(run(w), "block_tables[0][0] = 2");
    cu[0] = 1;
    expect(run(w), "cu_seq_lens[0]");
    return tally.outcome(ctx);
  });
}

// ---------------------------------------------------------------------------------------------
// GPU kernels == CPU twins, byte for byte, poisoned outputs.

// A device copy of a host buffer, `offset` bytes past the start of its allocation (a misaligned
// view where offset is not a multiple of 16), released on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const void* host, std::size_t bytes, std::size_t offset = 0) : bytes_(bytes), offset_(offset) {
    error_ = kernels::device::allocate(&p_, bytes + offset);
    if (error_.ok() && bytes) error_ = kernels::device::upload(at(), host, bytes);
  }
  ~DeviceBuffer() { kernels::device::release(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* as() const { return static_cast<T*>(at()); }
  kvq::Status error() const { return error_; }
  kvq::Status download(void* host) const { return kernels::device::download(host, at(), bytes_); }

 private:
  void* at() const { return static_cast<char*>(p_) + offset_; }
  void* p_ = nullptr;
  std::size_t bytes_, offset_;
  kvq::Status error_;
};


// Each kernel on the device, its output buffer starting as `poison` bytes (guard included).
kvq::Status requant_gpu(const RequantProblem& p, KScale mode, std::uint8_t poison, Bytes* got) {
  got->assign(static_cast<std::size_t>(p.num_blocks * p.block_size * 656) + kGuard, poison);
  DeviceBuffer src(p.src.data(), p.src.size()), dst(got->data(), got->size());
  kvq::Status e = kvq::first_error({src.error(), dst.error()});
  if (e.ok())
    e = kernels::device::mla_requantize_576_to_656(p.num_blocks, p.block_size, src.as<std::uint8_t>(), p.k_scale, mode,
                                                   dst.as<std::uint8_t>(), nullptr);
  return e.ok() ? kvq::first_error({kernels::device::synchronize(), dst.download(got->data())}) : e;
}

kvq::Status quant_gpu(const QuantProblem& p, std::uint8_t poison, Bytes* got, Offsets at) {
  got->assign(static_cast<std::size_t>(p.cache.bytes()) + kGuard, poison);
  DeviceBuffer x(p.x.data(), p.x.size() * 2, at.in), slots(p.slots.data(), p.slots.size() * 8),
      cache(got->data(), got->size(), at.out);
  kvq::Status e = kvq::first_error({x.error(), slots.error(), cache.error()});
  if (e.ok())
    e = kernels::device::mla_quantize(p.cache, x.as<std::uint16_t>(), slots.as<std::int64_t>(), p.tokens,
                                      cache.as<std::uint8_t>(), nullptr);
  return e.ok() ? kvq::first_error({kernels::device::synchronize(), cache.download(got->data())}) : e;
}

kvq::Status dequant_gpu(const MlaCacheShape& c, const Bytes& cache, float k_scale, DType t, Bytes* got, Offsets at = {}) {
  got->assign(static_cast<std::size_t>(c.slots() * c.desc().dims() * kernels::bytes_of(t)) + kGuard, 0x5A);
  DeviceBuffer in(cache.data(), cache.size(), at.in), y(got->data(), got->size(), at.out);
  kvq::Status e = kvq::first_error({in.error(), y.error()});
  if (e.ok()) e = kernels::device::mla_dequantize(c, in.as<std::uint8_t>(), k_scale, t, y.as<void>(), nullptr);
  return e.ok() ? kvq::first_error({kernels::device::synchronize(), y.download(got->data())}) : e;
}

Bytes dequant_cpu(const MlaCacheShape& c, const Bytes& cache, float k_scale, DType t) {
  Bytes want(static_cast<std::size_t>(c.slots() * c.desc().dims() * kernels::bytes_of(t)) + kGuard, 0x5A);
  const kvq::Status e = kernels::mla_dequantize_cpu(c, cache.data(), k_scale, t, want.data());
  if (!e.ok()) throw std::runtime_error(e.message());
  return want;
}

kvq::Status workspace_gpu(const WorkspaceProblem& p, std::uint8_t poison, WorkspaceOut* got) {
  const std::size_t bytes = static_cast<std::size_t>(p.w.workspace_bytes()) + kGuard;
  *got = WorkspaceOut{Bytes(bytes, poison), Bytes(bytes, poison)};
  DeviceBuffer cache(p.cache.data(), p.cache.size()), tables(p.tables.data(), p.tables.size() * 4),
      cu(p.cu.data(), p.cu.size() * 4), k(got->k.data(), got->k.size()), v(got->v.data(), got->v.size());
  kvq::Status e = kvq::first_error({cache.error(), tables.error(), cu.error(), k.error(), v.error()});
  if (e.ok())
    e = kernels::device::nvfp4_paged_to_workspace(p.w, cache.as<std::uint8_t>(), tables.as<std::int32_t>(),
                                                  cu.as<std::int32_t>(), p.factor_k, p.factor_v, k.as<std::uint8_t>(),
                                                  v.as<std::uint8_t>(), nullptr);
  return e.ok() ? kvq::first_error({kernels::device::synchronize(), k.download(got->k.data()), v.download(got->v.data())}) : e;
}

template <typename Body>
void add_gpu(const std::string& name, int case_divisor, Body body) {
  add_property("gpu", "mla/" + name, Device::cuda, [case_divisor, body](const RunContext& ctx) {
    std::string why;
    if (!kernels::device::available(&why)) return skipped(why);
    return check_fraction(ctx, case_divisor, body);
  });
}

// One fixed shape larger than a grid covers, from the seed: the grids at 4 blocks an SM (SMs x 4 x 128
// threads; kernels/device_grid.hpp), so that threads run several items whatever cap the launch
// measured fastest.
void add_gpu_large(const std::string& name, std::function<std::string(std::uint32_t)> differs) {
  add_property("gpu", "mla/" + name + "/device-vs-cpu-twin-large", Device::cuda, [differs](const RunContext& ctx) {
    std::string why;
    if (!kernels::device::available(&why)) return skipped(why);
    Tally tally;
    const kernels::device::GridCapOverride grid(4);
    const std::string d = differs(static_cast<std::uint32_t>(ctx.seed));
    if (d.empty()) tally.pass(); else tally.fail(d);
    return tally.outcome(ctx);
  });
}

void register_gpu_properties() {
  for (const KScale mode : {KScale::fold, KScale::drop}) {
    const std::string base = std::string("requant-576-to-656/") + kernels::name_of(mode);
    add_gpu(base + "/device-vs-cpu-twin", 20, [mode] {
      const RequantProblem p = *gen_requant(40, gen_k_scale(false));
      for (const std::uint8_t poison : kPoisons) {
        Bytes got;
        RC_ASSERT(requant_gpu(p, mode, poison, &got).ok());
        RC_ASSERT(got == requant_cpu(p, mode, poison));
      }
    });
    add_gpu_large(base, [mode](std::uint32_t seed) -> std::string {
      const RequantProblem p{2048, 64, random_bytes(2048 * 64 * 576, seed), 0.375f};  // 655,360 pieces
      Bytes got;
      const std::string e = requant_gpu(p, mode, 0xFF, &got).message();
      return !e.empty() ? e : (got == requant_cpu(p, mode, 0xFF) ? "" : "2048-block cache differs from the CPU twin");
    });
  }
  for (const MlaLayoutId layout : {MlaLayoutId::fp8_nope_block_scale_bf16_rope, MlaLayoutId::model1_fp8_sparse}) {
    const std::string base = std::string("quantize-") + kernels::name_of(layout);
    add_gpu(base + "/device-vs-cpu-twin", 10, [layout] {
      const QuantProblem p = *gen_quant(layout, 40);
      for (const std::uint8_t poison : kPoisons) {
        Bytes got;
        RC_ASSERT(quant_gpu(p, poison, &got).ok());
        RC_ASSERT(got == quant_cpu(p, poison, kernels::mla_tile_recipe(p.cache.desc())));
      }
    });
    add_gpu(base + "/device-vs-cpu-twin-misaligned", 10, [layout] {
      const QuantProblem p = *gen_quant(layout, 8);
      const Offsets at{*rc::gen::element<std::size_t>(2, 8), *rc::gen::element<std::size_t>(0, 1, 4, 8)};  // x misaligned
      Bytes got;
      RC_ASSERT(quant_gpu(p, 0xFF, &got, at).ok());
      RC_ASSERT(got == quant_cpu(p, 0xFF, kernels::mla_tile_recipe(p.cache.desc())));
    });
    add_gpu_large(base, [layout](std::uint32_t seed) -> std::string {
      QuantProblem p;  // 2^17 tokens in reverse slot order, every 7th padding: > 655,000 pieces
      p.cache = MlaCacheShape{layout, 2048, 64};
      p.tokens = p.cache.slots();
      for (std::int64_t i = 0; i < p.tokens; ++i) p.slots.push_back(i % 7 == 3 ? -1 : p.tokens - 1 - i);
      p.x = make_tokens(p.tokens * p.cache.desc().dims(), seed);
      Bytes got;
      const std::string e = quant_gpu(p, 0xFF, &got).message();
      return !e.empty() ? e : (got == quant_cpu(p, 0xFF, kernels::mla_tile_recipe(p.cache.desc())) ? "" : "2^17-token cache differs from the CPU twin");
    });
  }
  for (const MlaLayoutId layout : kernels::kMlaLayoutIds) {
    const std::string base = std::string("dequantize-") + kernels::name_of(layout);
    add_gpu(base + "/device-vs-cpu-twin", 10, [layout] {
      const MlaCacheShape c{layout, *rc::gen::inRange(0, 30), *rc::gen::element<std::int64_t>(1, 16, 64)};
      const Bytes cache = random_bytes(static_cast<std::size_t>(c.bytes()), *rc::gen::arbitrary<std::uint32_t>());
      const DType t = *rc::gen::element(DType::fp32, DType::bf16, DType::fp16);
      const float k_scale = *gen_k_scale(false);
      Bytes got;
      RC_ASSERT(dequant_gpu(c, cache, k_scale, t, &got).ok());
      RC_ASSERT(got == dequant_cpu(c, cache, k_scale, t));
    });
    add_gpu(base + "/device-vs-cpu-twin-misaligned", 10, [layout] {
      const MlaCacheShape c{layout, *rc::gen::inRange(1, 8), *rc::gen::element<std::int64_t>(1, 16, 64)};
      const Bytes cache = random_bytes(static_cast<std::size_t>(c.bytes()), *rc::gen::arbitrary<std::uint32_t>());
      const DType t = *rc::gen::element(DType::fp32, DType::bf16, DType::fp16);
      // the cache misaligned; y aligned to its type, or not to 16
      const Offsets at{*rc::gen::element<std::size_t>(1, 4, 8), *rc::gen::element<std::size_t>(0, 4, 8)};
      Bytes got;
      RC_ASSERT(dequant_gpu(c, cache, 0.375f, t, &got, at).ok());
      RC_ASSERT(got == dequant_cpu(c, cache, 0.375f, t));
    });
    add_gpu_large(base, [layout](std::uint32_t seed) -> std::string {
      const MlaCacheShape c{layout, 1024, 64};  // 65,536 tokens x 8 or 9 pieces
      const Bytes cache = random_bytes(static_cast<std::size_t>(c.bytes()), seed);
      Bytes got;
      const std::string e = dequant_gpu(c, cache, 0.375f, DType::bf16, &got).message();
      return !e.empty() ? e : (got == dequant_cpu(c, cache, 0.375f, DType::bf16) ? "" : "1024-block cache differs from the CPU twin");
    });
  }
  add_gpu("workspace-nvfp4-paged/device-vs-cpu-twin", 4, [] {
    const WorkspaceProblem p = *gen_workspace(64, 16);
    for (const std::uint8_t poison : kPoisons) {
      WorkspaceOut got;
      RC_ASSERT(workspace_gpu(p, poison, &got).ok());
      const WorkspaceOut want = workspace_cpu(p, poison);
      RC_ASSERT(got.k == want.k);
      RC_ASSERT(got.v == want.v);
    }
  });
  // Tables the launchers cannot check: the kernels stay in bounds as documented (a slot past the
  // cache skipped; a page id out of range gives 0x7F codes; rows past workspace_tokens skipped).
  // Expected bytes: the per-piece functions run on the host without the twins' table checks.
  add_gpu("quantize/slots-past-the-cache-skipped", 10, [] {
    QuantProblem p = *gen_quant(MlaLayoutId::fp8_nope_block_scale_bf16_rope, 8);
    for (std::size_t i = 0; i < p.slots.size(); i += 3) p.slots[i] = p.cache.slots() + static_cast<std::int64_t>(i);
    Bytes want(static_cast<std::size_t>(p.cache.bytes()) + kGuard, 0xFF), got;
    for (std::int64_t i = 0; i < p.tokens; ++i) {
      const std::int64_t slot = p.slots[static_cast<std::size_t>(i)];
      if (slot >= 0 && slot < p.cache.slots())
        kernels::mla_quantize_token(p.cache, kernels::mla_tile_recipe(p.cache.desc()), p.x.data(), i, want.data(), slot);
    }
    RC_ASSERT(quant_gpu(p, 0xFF, &got).ok());
    RC_ASSERT(got == want);
  });
  add_gpu("workspace-nvfp4-paged/bad-pages-and-rows-stay-in-bounds", 10, [] {
    WorkspaceProblem p = *gen_workspace(8, 6);
    for (std::size_t i = 0; i < p.tables.size(); i += 2) p.tables[i] = i % 4 ? -3 : static_cast<std::int32_t>(p.w.pages.num_blocks);
    p.w.workspace_tokens = p.w.workspace_tokens / 2;  // cu_seq_lens run past the workspace
    const std::size_t bytes = static_cast<std::size_t>(p.w.workspace_bytes()) + kGuard;
    WorkspaceOut want{Bytes(bytes, 0xFF), Bytes(bytes, 0xFF)}, got;
    for (std::int64_t side = 0; side < p.w.page_sides(); ++side)
      kernels::nvfp4_page_side_to_workspace(p.w, p.cache.data(), p.tables.data(), p.cu.data(), p.factor_k, p.factor_v,
                                            want.k.data(), want.v.data(), side);
    RC_ASSERT(workspace_gpu(p, 0xFF, &got).ok());
    RC_ASSERT(got.k == want.k);
    RC_ASSERT(got.v == want.v);
  });
  add_gpu_large("workspace-nvfp4-paged", [](std::uint32_t seed) -> std::string {
    WorkspaceProblem p;  // 8 requests x up to 1024 tokens, 8 heads x 128: ~1M items, shuffled shared pages
    p.w = WorkspaceBatch{recipe_from_name("nvfp4")->recipe, {300, 16, 8, 128}, 8, 64, 0};
    p.cache = random_bytes(static_cast<std::size_t>(p.w.pages.cache_bytes()), seed);
    p.cu = {0};
    for (int b = 0; b < 8; ++b) p.cu.push_back(p.cu.back() + 1024 - static_cast<std::int32_t>(mix32(seed + b) % 200));
    p.w.workspace_tokens = p.cu.back();
    for (int i = 0; i < 8 * 64; ++i) p.tables.push_back(static_cast<std::int32_t>(mix32(~seed + i) % 300));
    p.factor_k = 1.0f / 6.0f;
    p.factor_v = 0.3f;
    WorkspaceOut got;
    const std::string e = workspace_gpu(p, 0xFF, &got).message();
    if (!e.empty()) return e;
    const WorkspaceOut want = workspace_cpu(p, 0xFF);
    return got.k == want.k && got.v == want.v ? "" : "8-request workspace differs from the CPU twin";
  });
}

void register_mla_properties() {
  register_layout_properties();
  register_requant_properties();
  register_quantize_properties();
  register_workspace_properties();
  register_gpu_properties();
}
KVQ_REGISTER_PROPERTIES(register_mla_properties);

}  // namespace

// The body of requant-576-to-656/<claimed>/cpu-twin-vs-oracle; `run` is the mode the conversion
// under test is given (a mutant's changed parameter), on the CPU twin or the CUDA launcher.
Outcome mla_requant_vs_oracle(const RunContext& ctx, KScale claimed, KScale run, bool device) {
  const KScale mode = claimed;
  return check_fraction(ctx, 10, [mode, run, device] {
    const RequantProblem p = *gen_requant(3, gen_k_scale(false));
    const Bytes a = requant_under_test(p, run, 0x00, device), b = requant_under_test(p, run, 0xFF, device);
    const std::size_t used = a.size() - kGuard;
    RC_ASSERT(Bytes(a.begin(), a.begin() + used) == Bytes(b.begin(), b.begin() + used));  // every byte written
    RC_ASSERT(tail_is(a, used, 0x00) && tail_is(b, used, 0xFF));                          // nothing past the end
    const float scale = mode == KScale::fold ? p.k_scale : 1.0f;
    for (std::int64_t s = 0; s < p.num_blocks * p.block_size; ++s) {
      const std::size_t in = static_cast<std::size_t>(s) * 576, out = static_cast<std::size_t>(s) * 656;
      RC_ASSERT(std::equal(a.begin() + out, a.begin() + out + 512, p.src.begin() + in));
      for (int t = 0; t < 4; ++t)
        if (u32_at(a, out + 512 + 4 * t) != bits_of(scale))
          RC_FAIL("slot " + std::to_string(s) + " tile scale " + std::to_string(t) + ": got " +
                  hex_code(kFP32, u32_at(a, out + 512 + 4 * t)) + ", want " + hex_code(kFP32, bits_of(scale)));
      for (int i = 0; i < 64; ++i)
        RC_ASSERT(hex_code(kBF16, u16_at(a, out + 528 + 2 * i)) == hex_code(kBF16, oracle_rope_bf16(p.src[in + 512 + i], scale)));
    }
  });
}

// The body of quantize-<layout>[/<claimed>]/cpu-twin-vs-recipe-oracle: codes and scales == the
// recipe oracle's for the claimed tile rule (nullptr: the layout's own), rope copied, dequantized
// values == the oracle's, error within the tile's half gap (power-of-two scales); only the mapped
// tokens' bytes written (poison), random page tables. The writer under test applies `run` (a
// mutant's rule; nullptr: the layout's own) on the CPU twin, or (device) is the CUDA launcher, which
// applies the layout's own rule.
Outcome mla_quantize_vs_recipe_oracle(const RunContext& ctx, MlaLayoutId layout, const char* claimed, const char* run,
                                      bool device) {
  return check_fraction(ctx, 10, [layout, claimed, run, device] {
    const QuantProblem p = *gen_quant(layout, 4);
    const auto l = p.cache.desc();
    const Recipe r = claimed ? tile_rule(l, claimed) : kernels::mla_tile_recipe(l);
    const bool fp32_tile = r.scale == BlockScale::tensor_only;
    const Bytes a = quant_under_test(p, kPoisons[0], run, device), b = quant_under_test(p, kPoisons[1], run, device);
    std::vector<bool> owned(a.size(), false);
    for (const auto s : p.slots)
      if (s >= 0)
        for (const auto i : owned_bytes(p.cache, s)) owned[i] = true;
    for (std::size_t i = 0; i < a.size(); ++i)  // owned bytes written whatever was there; others untouched
      RC_ASSERT((owned[i] ? a[i] == b[i] : (a[i] == kPoisons[0] && b[i] == kPoisons[1])));
    const auto dq = dequant_bits(p.cache, a, 1.0f);
    for (std::int64_t i = 0; i < p.tokens; ++i) {
      const std::int64_t s = p.slots[static_cast<std::size_t>(i)];
      if (s < 0) continue;
      const std::uint16_t* row = p.x.data() + i * l.dims();
      const std::size_t nope = static_cast<std::size_t>(p.cache.part(s, MlaPart::nope));
      const std::size_t scales = static_cast<std::size_t>(p.cache.part(s, MlaPart::tile_scales));
      for (int t = 0; t < l.tiles(); ++t) {
        std::vector<float> tile(static_cast<std::size_t>(l.tile));
        for (int k = 0; k < l.tile; ++k) tile[k] = float_from_bits(std::uint32_t{row[t * l.tile + k]} << 16);
        float amax = 0.0f;  // the tile's max |x|, NaN ignored (docs/layouts.md)
        for (const float v : tile) amax = std::fabs(v) > amax ? std::fabs(v) : amax;
        const float g = fp32_tile ? oracle::recipe_tensor_scale(r, amax) : 1.0f;
        const auto want = oracle::recipe_quantize_block(r, g, tile);
        const bool finite = std::all_of(tile.begin(), tile.end(), [](float v) { return !std::isnan(v) && !std::isinf(v); });
        if (fp32_tile) {  // the FP32 scale itself
          RC_ASSERT(u32_at(a, scales + 4 * t) == bits_of(g));
        } else if (l.id == MlaLayoutId::model1_fp8_sparse) {
          RC_ASSERT(a[scales + t] == want.scale);
        } else {  // FP32 2^(byte - 127), NaN for 0xFF
          const std::uint32_t bits = want.scale == 0xFF ? kCanonicalNanBits : bits_of(std::ldexp(1.0f, want.scale - 127));
          RC_ASSERT(u32_at(a, scales + 4 * t) == bits);
        }
        RC_ASSERT(fp32_tile || !finite || want.scale != 0xFF);  // no NaN scale from finite input
        for (int k = 0; k < l.tile; ++k) {
          RC_ASSERT(hex_code(kE4M3FN, a[nope + t * l.tile + k]) == hex_code(kE4M3FN, want.codes[k]));
          const std::uint32_t value = oracle::recipe_dequantize_element(r, g, want.scale, want.codes[k]);
          const std::size_t at = static_cast<std::size_t>(s * l.dims() + t * l.tile + k);
          RC_ASSERT(hex_code(kFP32, dq[at]) == hex_code(kFP32, value));
          // A code rounded up near FP32's top (|x| > 0x1.fp127) dequantizes past FP32 max to inf.
          if (!fp32_tile && finite && std::isfinite(float_from_bits(dq[at])))
            RC_ASSERT(within_half_gap(tile[k], float_from_bits(dq[at]), want.scale - 127));
        }
      }
      const std::size_t rope = static_cast<std::size_t>(p.cache.part(s, MlaPart::rope));
      for (int k = 0; k < l.rope_dims(); ++k) RC_ASSERT(u16_at(a, rope + 2 * k) == row[l.nope_dims() + k]);
      if (l.has(MlaPart::pad)) RC_ASSERT(a[static_cast<std::size_t>(p.cache.part(s, MlaPart::pad))] == 0);
    }
  });
}

}  // namespace kvq::props
