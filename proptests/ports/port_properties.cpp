#include "proptests/ports/port_properties.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "formats/float_bits.hpp"
#include "oracle/verify.hpp"
#include "proptests/harness/mix32.hpp"
#include "proptests/harness/rapidcheck_bridge.hpp"

namespace kvq::ports {
namespace {

using kernels::DType;
using props::mix32;
constexpr std::size_t kGuard = 32;  // bytes after every output that must stay untouched
constexpr std::uint8_t kPoison = 0xA5;

struct Tensor {
  QuantizeShape shape;
  DType input = DType::fp32;
  std::vector<float> x;  // the values, each exact in the input type
};
void showValue(const Tensor& t, std::ostream& os) {
  os << t.shape.rows << "x" << t.shape.cols << " " << kernels::name_of(t.input) << " given as FP32 [";
  char buf[16];
  for (std::size_t i = 0; i < t.x.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s0x%08x", i ? " " : "", bits_of(t.x[i]));
    os << buf;
  }
  os << "]";
}

std::string hex(std::uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, v);
  return buf;
}
// A code or FP32 in hex with its value beside: "0x06 (4)".
std::string shown(std::uint32_t code, int digits, double value) {
  char buf[40];
  std::snprintf(buf, sizeof buf, " (%.9g)", value);
  return hex(code, digits) + buf;
}
std::string shown(float v) { return shown(bits_of(v), 8, v); }

float amax_of(const std::vector<float>& v) { return kernels::amax_cpu(DType::fp32, v.data(), static_cast<std::int64_t>(v.size())); }

// The FP32 midpoints between neighbouring non-negative element values (and the step past max).
std::vector<float> element_midpoints(const Recipe& r) {
  const std::vector<double> grid = element_grid(r);
  std::vector<float> mid;
  for (std::size_t i = 1; i < grid.size(); ++i) mid.push_back(static_cast<float>((grid[i - 1] + grid[i]) / 2));
  return mid;
}

// The effective decode scale of a block as the model stores it (what element value 1 decodes to).
float model_block_scale(const Recipe& r, float g, std::uint8_t scale) {
  return dequantize_element(r, g, scale, encode_element(r, 1.0f));
}

float nudge(float v, int ulps) { return float_from_bits(bits_of(v) + static_cast<std::uint32_t>(ulps)); }

rc::Gen<Tensor> gen_tensor(const Recipe& r, int kind) {
  return rc::gen::exec([r, kind] {
    Tensor t;
    t.shape.recipe = r;
    const int n = t.shape.block();
    t.shape.rows = *rc::gen::inRange(1, 4);
    t.shape.cols = static_cast<std::int64_t>(*rc::gen::inRange(1, 5)) * n;
    const std::uint32_t seed = *rc::gen::arbitrary<std::uint32_t>();
    const int k = *rc::gen::inRange(-12, 12);
    const std::vector<float> mids = element_midpoints(r);
    t.x.resize(static_cast<std::size_t>(t.shape.rows * t.shape.cols));
    for (std::size_t i = 0; i < t.x.size(); ++i) {
      const std::uint32_t h = mix32(seed * 0x9E3779B9u + static_cast<std::uint32_t>(i));
      const std::uint32_t block_h = mix32(seed ^ static_cast<std::uint32_t>(i / n) * 0x85EBCA6Bu);
      float v;
      if (kind == 2 && block_h % 3 == 0) {
        v = (h & 1) ? -0.0f : 0.0f;  // zero blocks
      } else {
        switch (h % 12) {
          case 0: v = 0.0f; break;
          case 1: v = float_from_bits(mix32(h)); break;                              // any bit pattern
          case 2: v = float_from_bits(mix32(h) & 0x807fffffu); break;                // FP32 subnormal
          case 3: case 4: case 5: v = std::ldexp(mids[(h >> 8) % mids.size()], k) * ((h >> 4) & 1 ? -1.0f : 1.0f); break;  // ties at 2^k
          default: v = std::ldexp(static_cast<float>(static_cast<int>(h >> 8 & 0xfff) - 2048), k - 9);
        }
      }
      t.x[i] = v;
    }
    if (kind == 2 && seed % 4 == 0) std::fill(t.x.begin(), t.x.end(), 0.0f);  // an all-zero tensor
    t.input = *rc::gen::weightedElement<DType>({{2, DType::fp32}, {1, DType::bf16}, {1, DType::fp16}});
    for (float& v : t.x)  // rounded once to the input type, so the model sees what the port reads
      v = t.input == DType::bf16 ? float_from_bits(static_cast<std::uint32_t>(bf16_rne_fast(v)) << 16)
                                 : (t.input == DType::fp16 ? static_cast<float>(decode_float(kFP16, fp16_rne_fast(v))) : v);
    return t;
  });
}

// A tensor of 1-2 rows of 1-3 blocks of recipe r, its values zero (drawn inside a generator).
Tensor small_block_tensor(const Recipe& r) {
  Tensor t;
  t.shape.recipe = r;
  t.shape.rows = *rc::gen::inRange(1, 3);
  t.shape.cols = static_cast<std::int64_t>(*rc::gen::inRange(1, 4)) * t.shape.block();
  return t;
}

// Scale-boundary tensors: each block's max puts its scale at, or a few FP32 ulps around, a rounding
// boundary of the scale rule: for E4M3 block scales (bmax / emax) / g at an E4M3 midpoint (where
// x / 6 vs x * RN(1/6), bmax / (6*g) vs (bmax/6)/g part ways); for power-of-two scales bmax / emax
// just above 2^j over a wide range of j (where ceil of a rounded log2 misses) and tiny blocks whose
// exponent clamps at -127. The first element fixes amax (and so g) at 2688 * 2^k times a power of two
// or a random mantissa (the association of bmax / (6 * g) matters only where g is not a power of two).
rc::Gen<Tensor> gen_scale_boundaries(const Recipe& r) {
  return rc::gen::exec([r] {
    Tensor t = small_block_tensor(r);
    const int n = t.shape.block();
    const std::uint32_t seed = *rc::gen::arbitrary<std::uint32_t>();
    const int k = *rc::gen::inRange(-8, 8);
    const float emax = element_max(r);
    t.x.assign(static_cast<std::size_t>(t.shape.rows * t.shape.cols), 0.0f);
    const std::int64_t blocks = t.shape.rows * t.shape.cols / n;
    t.x[0] = std::ldexp(2688.0f, k) * ((seed >> 3) & 1 ? 1.0f + static_cast<float>(mix32(seed) & 0x7fffff) * 0x1p-24f : 1.0f);
    const float g = tensor_scale(r, amax_of(t.x));
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::uint32_t h = mix32(seed + static_cast<std::uint32_t>(b) * 0x9E3779B9u);
      float bmax = 0.0f;
      if (r.scale == BlockScale::e4m3_two_level) {  // an E4M3 midpoint in [2^-9, 448) as the scale
        const int e = static_cast<int>(h % 17) - 9;
        const float mid = std::ldexp(1.0f + static_cast<float>(2 * ((h >> 8) % 8) + 1) / 16.0f, e);
        // The decode-equivalent tensor scale: g, 1/e (encode), amax/D (amax itself).
        const float decode = tensor_param_is_amax(r) ? amax_of(t.x) / r.tensor_divisor
                             : r.tensor_param == TensorParam::encode ? 1.0f / g : g;
        bmax = mid * emax * decode;
      } else if ((h >> 5) % 4 == 0) {  // a tiny block: the exponent clamps at -127
        bmax = std::ldexp(1.0f + static_cast<float>(h >> 12 & 0xff) / 256.0f, -120 - static_cast<int>(h % 6));
      } else {  // bmax / emax just above 2^j
        bmax = std::ldexp(emax, static_cast<int>(h % 200) - 100);
      }
      bmax = nudge(bmax, static_cast<int>((h >> 20) % 5) - 1);
      if (!(std::isfinite(bmax) && bmax > 0.0f && bmax < t.x[0])) continue;
      float* block = &t.x[b * n];
      const int first = b == 0 ? 1 : 0;
      block[first] = bmax;
      for (int i = first + 1; i < n; ++i) {
        const std::uint32_t v = mix32(h ^ static_cast<std::uint32_t>(i) * 0x27d4eb2fu);
        block[i] = bmax * static_cast<float>(v & 0xffff) / 65536.0f * ((v >> 16) & 1 ? -1.0f : 1.0f);
      }
    }
    return t;
  });
}

// Near-tie tensors: each block gets its bmax first, then values within a few FP32 ulps of
// (element midpoint) * (the block's decode scale): where x/D and x*(1/D), BF16 intermediates and
// tie rules part ways.
rc::Gen<Tensor> gen_near_ties(const Recipe& r) {
  return rc::gen::exec([r] {
    Tensor t = small_block_tensor(r);
    const int n = t.shape.block();
    const std::vector<float> mids = element_midpoints(r);
    const std::uint32_t seed = *rc::gen::arbitrary<std::uint32_t>();
    const int k = *rc::gen::inRange(-8, 8);
    t.x.assign(static_cast<std::size_t>(t.shape.rows * t.shape.cols), 0.0f);
    const std::int64_t blocks = t.shape.rows * t.shape.cols / n;
    for (std::int64_t b = 0; b < blocks; ++b)  // block maxima: any mantissa, one binade per tensor
      t.x[b * n] = std::ldexp(1.0f + static_cast<float>(mix32(seed + b) & 0x7fffff) * 0x1p-23f, k);
    const float g = tensor_scale(r, amax_of(t.x));
    std::uint8_t codes[kMaxRecipeBlock];
    for (std::int64_t b = 0; b < blocks; ++b) {
      float* block = &t.x[b * n];
      const float d = model_block_scale(r, g, quantize_block(r, g, block, n, codes));
      for (int i = 1; i < n; ++i) {
        const std::uint32_t h = mix32(seed ^ static_cast<std::uint32_t>(b * n + i) * 0x27d4eb2fu);
        const float tie = mids[h % mids.size()] * d;
        const float v = std::isfinite(tie) && tie > 0 && tie < block[0] ? nudge(tie, static_cast<int>(h >> 16) % 5 - 2) : 0.0f;
        block[i] = (h >> 8) & 1 ? -v : v;
      }
    }
    return t;
  });
}

struct Quantized {
  std::vector<std::uint8_t> codes, scales;
};

Quantized run_quantize(const PortKernel& k, const Tensor& t, float g) {
  const QuantizeShape& s = t.shape;
  Quantized q{std::vector<std::uint8_t>(s.code_bytes() + kGuard, kPoison), std::vector<std::uint8_t>(s.scale_bytes() + kGuard, kPoison)};
  std::vector<std::uint16_t> half(t.input == DType::fp32 ? 0 : t.x.size());  // BF16/FP16 bit patterns
  for (std::size_t i = 0; i < half.size(); ++i)
    half[i] = t.input == DType::bf16 ? static_cast<std::uint16_t>(bits_of(t.x[i]) >> 16) : fp16_rne_fast(t.x[i]);
  const void* x = half.empty() ? static_cast<const void*>(t.x.data()) : half.data();
  const std::string e = k.quantize(s, t.input, x, g, q.codes.data(), q.scales.data()).message();
  if (!e.empty()) RC_FAIL("the port's quantize returned an error: " + e);
  return q;
}

// The port's codes and scales == the model's, nothing written past them; the first difference
// is described with its input bits.
void check_quantize(const PortKernel& k, const Tensor& t, int scale_shift = 0) {
  const QuantizeShape& s = t.shape;
  const Recipe& r = k.recipe;
  const float g = std::ldexp(tensor_scale(r, amax_of(t.x)), -scale_shift);  // shift > 0: a calibrated scale too small
  const Quantized q = run_quantize(k, t, g);
  for (std::size_t i = s.code_bytes(); i < q.codes.size(); ++i) RC_ASSERT(q.codes[i] == kPoison);
  for (std::size_t i = s.scale_bytes(); i < q.scales.size(); ++i) RC_ASSERT(q.scales[i] == kPoison);
  const int n = s.block();
  std::uint8_t want[kMaxRecipeBlock];
  for (std::int64_t row = 0; row < s.rows; ++row)
    for (std::int64_t b = 0; b < s.cols / n; ++b) {
      const float* x = &t.x[row * s.cols + b * n];
      const std::uint8_t want_scale = quantize_block(r, g, x, n, want);
      if (s.scales_per_row()) {
        const std::uint8_t got = q.scales[row * s.scales_per_row() + b];
        if (got != want_scale)
          RC_FAIL("block scale (row " + std::to_string(row) + ", block " + std::to_string(b) + "): expected " +
                  hex(want_scale, 2) + ", port " + hex(got, 2) + " (g " + shown(g) + ")");
      }
      for (int i = 0; i < n; ++i) {
        const std::uint8_t got = kernels::code_at(s, q.codes.data() + row * s.code_bytes_per_row(), b * n + i);
        if (got != want[i])
          RC_FAIL("code (row " + std::to_string(row) + ", col " + std::to_string(b * n + i) + ") of x " +
                  shown(x[i]) + ": expected " + shown(want[i], 2, element_value(r, want[i])) + ", port " +
                  shown(got, 2, element_value(r, got)) + " (scale " + hex(want_scale, 2) + ", g " + shown(g) + ")");
      }
    }
}

struct Bytes {  // arbitrary code and scale bytes and a tensor scale or factor
  QuantizeShape shape;
  std::vector<std::uint8_t> codes, scales;
  float g = 1.0f;
};
void showValue(const Bytes& b, std::ostream& os) {
  os << b.shape.rows << "x" << b.shape.cols << " g/factor " << hex(bits_of(b.g), 8) << " codes";
  for (const auto c : b.codes) os << " " << hex(c, 2);
  os << " scales";
  for (const auto c : b.scales) os << " " << hex(c, 2);
}

rc::Gen<Bytes> gen_bytes(const Recipe& r, bool workspace) {
  return rc::gen::exec([r, workspace] {
    Bytes b;
    b.shape.recipe = r;
    b.shape.rows = *rc::gen::inRange(1, 4);
    b.shape.cols = static_cast<std::int64_t>(*rc::gen::inRange(1, 5)) * b.shape.block();
    const std::uint32_t seed = *rc::gen::arbitrary<std::uint32_t>();
    b.codes.resize(b.shape.code_bytes());
    b.scales.resize(b.shape.scale_bytes());
    // Any byte, one in eight a special: NaN codes (E4M3 0x7F/0xFF, E8M0 0xFF), zero, the largest finite.
    const auto byte = [](std::uint32_t h) {
      constexpr std::uint8_t kSpecial[] = {0x7F, 0xFF, 0x00, 0x80, 0x7E, 0xFE};
      return h % 8 == 0 ? kSpecial[(h >> 3) % 6] : static_cast<std::uint8_t>(h >> 8);
    };
    for (std::size_t i = 0; i < b.codes.size(); ++i) b.codes[i] = byte(mix32(seed + i));
    for (std::size_t i = 0; i < b.scales.size(); ++i) b.scales[i] = byte(mix32(~seed - i));
    const int k = *rc::gen::inRange(-20, 10);
    b.g = std::ldexp(1.0f + static_cast<float>(mix32(seed * 3) & 0x7fffff) * 0x1p-23f, k);
    if (workspace && (seed & 1)) {
      // A factor that puts element 0's exact product within a few FP32 ulps of an E4M3 midpoint:
      // where rounding the product to FP32 first changes the E4M3 code.
      const std::uint8_t code = kernels::code_at(b.shape, b.codes.data(), 0);
      const float v = std::fabs(dequantize_element(r, 1.0f, b.scales.empty() ? 0 : b.scales[0], code));
      Recipe fp8 = r;
      fp8.element = FormatId::e4m3fn;
      const std::vector<float> mids = element_midpoints(fp8);
      const float mid = mids[mix32(seed * 5) % mids.size()];
      // Prefer a factor whose exact product is not the midpoint but rounds to it in FP32: a double-rounding trap.
      if (std::isfinite(v) && v > 0) {
        b.g = nudge(static_cast<float>(static_cast<double>(mid) / v), static_cast<int>((seed >> 8) % 5) - 2);
        for (int k = -3; k <= 3; ++k) {
          const float f = nudge(static_cast<float>(static_cast<double>(mid) / v), k);
          const double exact = static_cast<double>(v) * f;  // 4-bit element x 4-bit scale x 24-bit factor: exact
          if (exact != mid && static_cast<float>(exact) == mid) b.g = f;
        }
      }
      if (!std::isfinite(b.g) || b.g <= 0) b.g = 1.0f;
    }
    return b;
  });
}

props::Outcome quantize_property(const props::RunContext& ctx, const PortKernel& k, int kind) {
  const auto tensors = kind == 1   ? gen_near_ties(k.recipe)
                       : kind == 3 ? gen_scale_boundaries(k.recipe)
                                   : gen_tensor(k.recipe, kind);
  return props::check_random(ctx, [&] { check_quantize(k, *tensors); });
}

// A static (calibrated) tensor scale 2^-1..2^-4 times the one amax gives: elements and block
// scales past their format's max must saturate as the recipe says.
props::Outcome saturation_property(const props::RunContext& ctx, const PortKernel& k) {
  if (k.recipe.scale == BlockScale::e8m0_pow2) return props::skipped("power-of-two recipes take no tensor scale");
  const auto tensors = gen_tensor(k.recipe, 0);
  return props::check_random(ctx, [&] {
    const Tensor t = *tensors;
    check_quantize(k, t, *rc::gen::inRange(1, 5));
  });
}

props::Outcome dequantize_property(const props::RunContext& ctx, const PortKernel& k) {
  if (!k.dequantize) return props::skipped("the port has no dequantize entry point");
  const auto inputs = gen_bytes(k.recipe, false);
  return props::check_random(ctx, [&] {
    const Bytes b = *inputs;
    const QuantizeShape& s = b.shape;
    std::vector<float> y(static_cast<std::size_t>(s.rows * s.cols) + kGuard / 4, -1.0f);
    const std::string e = k.dequantize(s, b.codes.data(), b.scales.data(), b.g, DType::fp32, y.data()).message();
    if (!e.empty()) RC_FAIL("the port's dequantize returned an error: " + e);
    for (std::size_t i = s.rows * s.cols; i < y.size(); ++i) RC_ASSERT(bits_of(y[i]) == bits_of(-1.0f));
    for (std::int64_t row = 0; row < s.rows; ++row)
      for (std::int64_t j = 0; j < s.cols; ++j) {
        const std::uint8_t code = kernels::code_at(s, b.codes.data() + row * s.code_bytes_per_row(), j);
        const std::uint8_t scale = s.scales_per_row() ? b.scales[row * s.scales_per_row() + j / s.block()] : 0;
        const float want = dequantize_element(k.recipe, b.g, scale, code);
        const float got = y[row * s.cols + j];
        const bool same = bits_of(want) == bits_of(got) || (std::isnan(want) && std::isnan(got));  // any NaN payload
        if (!same)
          RC_FAIL("value (row " + std::to_string(row) + ", col " + std::to_string(j) + ") of code " + hex(code, 2) +
                  " scale " + hex(scale, 2) + " g " + shown(b.g) + ": expected " + shown(want) + ", port " + shown(got));
      }
  });
}

props::Outcome workspace_property(const props::RunContext& ctx, const PortKernel& k) {
  if (!k.requantize_e4m3) return props::skipped("the port has no E4M3 workspace entry point");
  const auto inputs = gen_bytes(k.recipe, true);
  return props::check_random(ctx, [&] {
    const Bytes b = *inputs;
    const QuantizeShape& s = b.shape;
    std::vector<std::uint8_t> out(static_cast<std::size_t>(s.rows * s.cols) + kGuard, kPoison);
    const std::string e = k.requantize_e4m3(s, b.codes.data(), b.scales.data(), b.g, out.data()).message();
    if (!e.empty()) RC_FAIL("the port's workspace kernel returned an error: " + e);
    for (std::size_t i = s.rows * s.cols; i < out.size(); ++i) RC_ASSERT(out[i] == kPoison);
    for (std::int64_t row = 0; row < s.rows; ++row)
      for (std::int64_t j = 0; j < s.cols; ++j) {
        const std::uint8_t code = kernels::code_at(s, b.codes.data() + row * s.code_bytes_per_row(), j);
        const std::uint8_t scale = s.scales_per_row() ? b.scales[row * s.scales_per_row() + j / s.block()] : 0;
        const std::uint8_t want = requantize_e4m3(k.recipe, scale, code, b.g);
        const std::uint8_t got = out[row * s.cols + j];
        if (want != got)
          RC_FAIL("workspace (row " + std::to_string(row) + ", col " + std::to_string(j) + ") of code " + hex(code, 2) +
                  " scale " + hex(scale, 2) + " factor " + shown(b.g) + ": expected " +
                  shown(want, 2, decode_float(kE4M3FN, want)) + ", port " + shown(got, 2, decode_float(kE4M3FN, got)));
      }
  });
}

}  // namespace

const std::vector<PortProperty>& port_properties() {
  static const std::vector<PortProperty> all{
      {"quantize-vs-model", "codes and scales of random tensors (ties at 2^k, subnormals, any bits) == the model",
       [](const props::RunContext& c, const PortKernel& k) { return quantize_property(c, k, 0); }},
      {"near-ties-vs-model", "values within 2 FP32 ulps of (element midpoint) * (block decode scale) == the model",
       [](const props::RunContext& c, const PortKernel& k) { return quantize_property(c, k, 1); }},
      {"zero-blocks-vs-model", "zero blocks (+-0) and all-zero tensors == the model (scale and codes)",
       [](const props::RunContext& c, const PortKernel& k) { return quantize_property(c, k, 2); }},
      {"scale-boundaries-vs-model", "block maxima at and a few ulps around the scale rule's rounding boundaries == the model",
       [](const props::RunContext& c, const PortKernel& k) { return quantize_property(c, k, 3); }},
      {"static-scale-saturation-vs-model", "a tensor scale 2-16x too small (a stale calibration): saturated codes and scales == the model",
       [](const props::RunContext& c, const PortKernel& k) { return saturation_property(c, k); }},
      {"dequantize-vs-model", "FP32 values of arbitrary code and scale bytes (NaN scales included) == the model",
       [](const props::RunContext& c, const PortKernel& k) { return dequantize_property(c, k); }},
      {"workspace-e4m3-vs-model", "E4M3 workspace of arbitrary bytes, factors near E4M3 midpoints == the exact product rounded once",
       [](const props::RunContext& c, const PortKernel& k) { return workspace_property(c, k); }},
  };
  return all;
}

std::vector<PortRun> run_port_properties(const PortKernel& k, const std::string& prefix, const props::RunContext& ctx) {
  std::vector<PortRun> runs;
  for (const PortProperty& p : port_properties()) {
    props::RunContext c = ctx;
    c.id = prefix + "/" + p.name;
    c.seed = props::derive_seed(ctx.base_seed, c.id);
    props::Outcome o;
    try {
      o = p.run(c, k);
    } catch (const std::exception& e) {
      o.status = props::Status::failed;
      o.detail = std::string("exception: ") + e.what() + "\n";
      o.replay = props::replay_line(c);
    }
    runs.push_back({p.name, std::move(o)});
  }
  return runs;
}

}  // namespace kvq::ports
