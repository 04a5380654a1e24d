// Quantize/dequantize kernels: the CPU twin against the oracle (CI), the GPU kernels
// against the CPU twin byte for byte (GPU), every output byte written exactly once
// (two runs over different poison bytes agree) and nothing past the outputs touched.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <sstream>

#include "formats/float_bits.hpp"
#include "formats/recipe_names.hpp"
#include "kernels/cpu_rows.hpp"
#include "kernels/device_grid.hpp"
#include "kernels/quantize.hpp"
#include "oracle/recipes_oracle.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/harness/mix32.hpp"
#include "proptests/harness/rapidcheck_bridge.hpp"

namespace kvq::props {
namespace {

using kernels::DType;
using kernels::QuantizeShape;

constexpr std::size_t kGuard = 64;  // bytes after every output that must stay untouched

struct Problem {
  QuantizeShape shape;
  DType input = DType::fp32;
  std::vector<std::uint8_t> x;  // raw input bytes
};

void showValue(const Problem& p, std::ostream& os) {
  os << p.shape.rows << "x" << p.shape.cols << " " << kernels::name_of(p.input) << " (" << p.x.size() << " bytes)";
}

// Inputs drawn from one seed: scaled values with zeros, ties, subnormals, specials mixed in.
std::vector<std::uint8_t> make_input(DType t, std::int64_t count, std::uint64_t seed) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(count) * kernels::bytes_of(t));
  kernels::for_ranges(count, count, [&](std::int64_t first, std::int64_t last) {  // each element from its index alone
    for (std::int64_t i = first; i < last; ++i) {
      const std::uint32_t h = mix32(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(i));
      float v;
      switch (h % 16) {
        case 0: v = 0.0f; break;
        case 1: v = float_from_bits(mix32(h)); break;                            // any bit pattern
        case 2: v = std::ldexp(static_cast<float>((h >> 8) % 15) * 0.25f, static_cast<int>(h >> 20) % 8); break;  // ties
        case 3: v = float_from_bits(mix32(h) & 0x807fffffu); break;              // FP32 subnormal
        default: v = std::ldexp(static_cast<float>(static_cast<int>(h >> 8 & 0xfff) - 2048), static_cast<int>(seed % 24) - 20);
      }
      if (t == DType::fp32) {
        std::memcpy(&out[i * 4], &v, 4);
      } else {
        const auto b = static_cast<std::uint16_t>(encode_float(t == DType::bf16 ? kBF16 : kFP16, Conversion{}, v));
        std::memcpy(&out[i * 2], &b, 2);
      }
    }
  });
  return out;
}

rc::Gen<Problem> gen_problem(Recipe r, DType t, int max_rows) {
  return rc::gen::exec([=] {
    Problem p;
    p.shape.recipe = r;
    p.input = t;
    p.shape.rows = *rc::gen::inRange(1, max_rows + 1);
    p.shape.cols = static_cast<std::int64_t>(*rc::gen::inRange(1, 9)) * p.shape.block();
    p.x = make_input(t, p.shape.rows * p.shape.cols, *rc::gen::arbitrary<std::uint32_t>());
    return p;
  });
}

struct Outputs {
  std::vector<std::uint8_t> codes, scales, y;
};

Outputs poisoned(const QuantizeShape& s, DType output, std::uint8_t poison) {
  Outputs o;
  o.codes.assign(s.code_bytes() + kGuard, poison);
  o.scales.assign(s.scale_bytes() + kGuard, poison);
  o.y.assign(s.rows * s.cols * kernels::bytes_of(output) + kGuard, poison);
  return o;
}

std::string guards_intact(const Outputs& o, const QuantizeShape& s, DType output, std::uint8_t poison) {
  auto check = [&](const std::vector<std::uint8_t>& v, std::size_t used, const char* what) -> std::string {
    for (std::size_t i = used; i < v.size(); ++i)
      if (v[i] != poison) return std::string(what) + " written past its end at byte " + std::to_string(i);
    return {};
  };
  auto e = check(o.codes, s.code_bytes(), "codes");
  if (e.empty()) e = check(o.scales, s.scale_bytes(), "scales");
  if (e.empty()) e = check(o.y, s.rows * s.cols * kernels::bytes_of(output), "dequantized output");
  return e;
}

std::vector<std::uint8_t> used(const std::vector<std::uint8_t>& v, std::int64_t bytes) {
  return {v.begin(), v.begin() + bytes};
}

float g_for(const Problem& p) { return tensor_scale(p.shape.recipe, kernels::amax_cpu(p.input, p.x.data(), p.shape.rows * p.shape.cols)); }

Outputs run_cpu(const Problem& p, DType output, std::uint8_t poison) {
  Outputs o = poisoned(p.shape, output, poison);
  const float g = g_for(p);
  auto e = kernels::quantize_cpu(p.shape, p.input, p.x.data(), g, o.codes.data(), o.scales.data());
  if (e.ok()) e = kernels::dequantize_cpu(p.shape, o.codes.data(), o.scales.data(), g, output, o.y.data());
  if (!e.ok()) throw std::runtime_error(e.message());
  return o;
}

std::string run_gpu(const Problem& p, DType output, std::uint8_t poison, Outputs* o, float* amax) {
  *o = poisoned(p.shape, output, poison);
  void *x = nullptr, *codes = nullptr, *scales = nullptr, *y = nullptr, *m = nullptr;
  kvq::Status e = kernels::device::allocate(&x, p.x.size());
  if (e.ok()) e = kernels::device::allocate(&codes, o->codes.size());
  if (e.ok()) e = kernels::device::allocate(&scales, o->scales.size());
  if (e.ok()) e = kernels::device::allocate(&y, o->y.size());
  if (e.ok()) e = kernels::device::allocate(&m, sizeof(float));
  if (e.ok()) e = kernels::device::upload(x, p.x.data(), p.x.size());
  if (e.ok()) e = kernels::device::upload(codes, o->codes.data(), o->codes.size());
  if (e.ok()) e = kernels::device::upload(scales, o->scales.data(), o->scales.size());
  if (e.ok()) e = kernels::device::upload(y, o->y.data(), o->y.size());
  if (e.ok()) e = kernels::device::amax(p.input, x, p.shape.rows * p.shape.cols, static_cast<float*>(m), nullptr);
  if (e.ok()) e = kernels::device::download(amax, m, sizeof(float));
  const float g = tensor_scale(p.shape.recipe, *amax);
  auto* c = static_cast<std::uint8_t*>(codes);
  auto* s = static_cast<std::uint8_t*>(scales);
  if (e.ok()) e = kernels::device::quantize(p.shape, p.input, x, g, c, s, nullptr);
  if (e.ok()) e = kernels::device::dequantize(p.shape, c, s, g, output, y, nullptr);
  if (e.ok()) e = kernels::device::synchronize();
  if (e.ok()) e = kernels::device::download(o->codes.data(), codes, o->codes.size());
  if (e.ok()) e = kernels::device::download(o->scales.data(), scales, o->scales.size());
  if (e.ok()) e = kernels::device::download(o->y.data(), y, o->y.size());
  for (void* ptr : {x, codes, scales, y, m}) kernels::device::release(ptr);
  return e.message();
}

const DType kDTypes[] = {DType::fp32, DType::bf16, DType::fp16};

struct WorkspaceProblem {
  QuantizeShape shape;
  std::vector<std::uint8_t> codes, scales;
  float factor = 1.0f;
};

void showValue(const WorkspaceProblem& w, std::ostream& os) {
  os << w.shape.rows << "x" << w.shape.cols << " factor " << hex_code(kFP32, bits_of(w.factor));
}

std::vector<std::uint8_t> run_workspace_cpu(const WorkspaceProblem& w, std::uint8_t poison) {
  std::vector<std::uint8_t> out(w.shape.rows * w.shape.cols + kGuard, poison);
  const kvq::Status e = kernels::requantize_e4m3_cpu(w.shape, w.codes.data(), w.scales.data(), w.factor, out.data());
  if (!e.ok()) throw std::runtime_error(e.message());
  return out;
}

std::string run_workspace_gpu(const WorkspaceProblem& w, std::uint8_t poison, std::vector<std::uint8_t>* out) {
  out->assign(w.shape.rows * w.shape.cols + kGuard, poison);
  void *codes = nullptr, *scales = nullptr, *y = nullptr;
  kvq::Status e = kernels::device::allocate(&codes, w.codes.size());
  if (e.ok()) e = kernels::device::allocate(&scales, w.scales.size());
  if (e.ok()) e = kernels::device::allocate(&y, out->size());
  if (e.ok()) e = kernels::device::upload(codes, w.codes.data(), w.codes.size());
  if (e.ok()) e = kernels::device::upload(scales, w.scales.data(), w.scales.size());
  if (e.ok()) e = kernels::device::upload(y, out->data(), out->size());
  if (e.ok())
    e = kernels::device::requantize_e4m3(w.shape, static_cast<std::uint8_t*>(codes), static_cast<std::uint8_t*>(scales),
                                         w.factor, static_cast<std::uint8_t*>(y), nullptr);
  if (e.ok()) e = kernels::device::synchronize();
  if (e.ok()) e = kernels::device::download(out->data(), y, out->size());
  for (void* p : {codes, scales, y}) kernels::device::release(p);
  return e.message();
}

void register_kernel_properties() {
  for (const NamedRecipe& named : kRecipes) {
    for (const DType t : kDTypes) {
      const Recipe r = named.recipe;
      const std::string base = std::string(named.name) + "/" + kernels::name_of(t);
      // CPU twin == oracle, block by block, with packing and layout; dequantized output == oracle.
      add_property("kernels", base + "/cpu-twin-vs-oracle", Device::cpu, [r, t](const RunContext& ctx) {
        const auto problems = gen_problem(r, t, 6);
        return check_random(ctx, [&] {
          const Problem p = *problems;
          const QuantizeShape& s = p.shape;
          const Outputs a = run_cpu(p, t, 0x00), b = run_cpu(p, t, 0xFF);
          // Every output byte written, whatever was there before.
          RC_ASSERT(used(a.codes, s.code_bytes()) == used(b.codes, s.code_bytes()));
          RC_ASSERT(used(a.scales, s.scale_bytes()) == used(b.scales, s.scale_bytes()));
          RC_ASSERT(used(a.y, a.y.size() - kGuard) == used(b.y, b.y.size() - kGuard));
          RC_ASSERT(guards_intact(a, s, t, 0x00).empty());
          RC_ASSERT(guards_intact(b, s, t, 0xFF).empty());
          const float g = oracle::recipe_tensor_scale(r, kernels::amax_cpu(t, p.x.data(), s.rows * s.cols));
          const int n = s.block();
          const Format out_format = t == DType::fp32 ? kFP32 : (t == DType::bf16 ? kBF16 : kFP16);
          for (std::int64_t row = 0; row < s.rows; ++row) {
            for (std::int64_t blk = 0; blk < s.cols / n; ++blk) {
              std::vector<float> values(n);
              for (int i = 0; i < n; ++i) values[i] = kernels::load_value(t, p.x.data(), row * s.cols + blk * n + i);
              const auto expected = oracle::recipe_quantize_block(r, g, values);
              if (s.scales_per_row()) RC_ASSERT(a.scales[row * s.scales_per_row() + blk] == expected.scale);
              for (int i = 0; i < n; ++i) {
                const std::int64_t j = blk * n + i;
                RC_ASSERT(kernels::code_at(s, a.codes.data() + row * s.code_bytes_per_row(), j) == expected.codes[i]);
                const std::uint32_t dq = oracle::recipe_dequantize_element(r, g, expected.scale, expected.codes[i]);
                const std::uint64_t want = oracle::round_to_format(out_format, Conversion{}, oracle::real_of(kFP32, dq));
                std::uint64_t got = 0;
                std::memcpy(&got, &a.y[(row * s.cols + j) * kernels::bytes_of(t)], kernels::bytes_of(t));
                RC_ASSERT(hex_code(out_format, got) == hex_code(out_format, want));
              }
            }
          }
        });
      });
      // GPU kernels == CPU twin, byte for byte, on larger tensors.
      add_property("gpu", "kernels/" + base + "/device-vs-cpu-twin", Device::cuda, [r, t](const RunContext& ctx) {
        std::string why;
        if (!kernels::device::available(&why)) return skipped(why);
        const auto problems = gen_problem(r, t, 300);
        RunContext fewer = ctx;
        fewer.cases = std::max(1, ctx.cases / 10);
        return check_random(fewer, [&] {
          const Problem p = *problems;
          const Outputs want = run_cpu(p, t, 0x00);
          for (const std::uint8_t poison : {std::uint8_t{0x00}, std::uint8_t{0xFF}}) {
            Outputs got;
            float amax = 0;
            const std::string e = run_gpu(p, t, poison, &got, &amax);
            RC_ASSERT(e.empty());
            RC_ASSERT(bits_of(amax) == bits_of(kernels::amax_cpu(t, p.x.data(), p.shape.rows * p.shape.cols)));
            RC_ASSERT(guards_intact(got, p.shape, t, poison).empty());
            RC_ASSERT(used(got.codes, p.shape.code_bytes()) == used(want.codes, p.shape.code_bytes()));
            RC_ASSERT(used(got.scales, p.shape.scale_bytes()) == used(want.scales, p.shape.scale_bytes()));
            RC_ASSERT(used(got.y, want.y.size() - kGuard) == used(want.y, want.y.size() - kGuard));
          }
        });
      });
    }
  }
  for (const NamedRecipe& named : kRecipes) {
    for (const DType t : kDTypes) {
      const Recipe r = named.recipe;
      add_property("gpu", "kernels/" + std::string(named.name) + "/" + kernels::name_of(t) + "/device-vs-cpu-twin-large",
                   Device::cuda, [r, t](const RunContext& ctx) {
                     std::string why;
                     if (!kernels::device::available(&why)) return skipped(why);
                     // 80,000 rows x 8 blocks, on grids of 4 thread blocks an SM (kernels/device_grid.hpp):
                     // more blocks and elements than one grid covers, whatever cap the launches measured fastest
                     Problem p;
                     p.shape = QuantizeShape{r, 80000, 0};
                     p.shape.cols = 8 * p.shape.block();
                     p.input = t;
                     p.x = make_input(t, p.shape.rows * p.shape.cols, ctx.seed);
                     const Outputs want = run_cpu(p, t, 0x00);
                     Outputs got;
                     float amax = 0;
                     Tally tally;
                     const kernels::device::GridCapOverride grid(4);
                     const std::string e = run_gpu(p, t, 0xFF, &got, &amax);
                     if (!e.empty()) throw std::runtime_error(e);
                     const bool same = used(got.codes, p.shape.code_bytes()) == used(want.codes, p.shape.code_bytes()) &&
                                       used(got.scales, p.shape.scale_bytes()) == used(want.scales, p.shape.scale_bytes()) &&
                                       used(got.y, want.y.size() - kGuard) == used(want.y, want.y.size() - kGuard) &&
                                       guards_intact(got, p.shape, t, 0xFF).empty() &&
                                       bits_of(amax) == bits_of(kernels::amax_cpu(t, p.x.data(), p.shape.rows * p.shape.cols));
                     if (same) tally.pass(); else tally.fail("80000-row tensor (or its amax) differs from the CPU twin");
                     return tally.outcome(ctx);
                   });
    }
  }
  // The prefill workspace (NVFP4 -> E4M3, and every other recipe): arbitrary code and scale bytes
  // and an FP32 factor; the twin equals the oracle's exact product rounded once (CI), the GPU
  // kernel equals the twin byte for byte with poisoned outputs (gpu).
  for (const NamedRecipe& named : kRecipes) {
    const Recipe r = named.recipe;
    const auto workspace = [r](int max_rows) {
      return rc::gen::exec([=] {
        WorkspaceProblem w;
        w.shape = QuantizeShape{r, *rc::gen::inRange(1, max_rows + 1), 0};
        w.shape.cols = static_cast<std::int64_t>(*rc::gen::inRange(1, 9)) * w.shape.block();
        const std::uint32_t seed = *rc::gen::arbitrary<std::uint32_t>();
        w.codes.resize(w.shape.code_bytes());
        w.scales.resize(w.shape.scale_bytes());
        for (std::size_t i = 0; i < w.codes.size(); ++i) w.codes[i] = static_cast<std::uint8_t>(mix32(seed + i));
        for (std::size_t i = 0; i < w.scales.size(); ++i) w.scales[i] = static_cast<std::uint8_t>(mix32(~seed - i));
        w.factor = *rc::gen::weightedOneOf<float>({
            {4, rc::gen::map(rc::gen::inRange(-30, 10), [](int k) { return std::ldexp(1.0f / 6.0f, k); })},
            {4, rc::gen::map(rc::gen::arbitrary<std::uint32_t>(), [](std::uint32_t b) { return float_from_bits(b & 0x7fffffffu); })},
            {1, rc::gen::element(0.0f, INFINITY, 0x1p-149f, kFp32Max)}});
        RC_PRE(!std::isnan(w.factor));
        return w;
      });
    };
    add_property("kernels", std::string(named.name) + "/workspace-e4m3/cpu-twin-vs-oracle", Device::cpu,
                 [r, workspace](const RunContext& ctx) {
                   const auto problems = workspace(6);
                   return check_random(ctx, [&] {
                     const WorkspaceProblem w = *problems;
                     const QuantizeShape& s = w.shape;
                     const std::vector<std::uint8_t> out = run_workspace_cpu(w, 0xA5);
                     const std::int64_t n = s.rows * s.cols;
                     RC_ASSERT(used(out, n) == used(run_workspace_cpu(w, 0x5A), n));  // every byte written
                     for (std::int64_t row = 0; row < s.rows; ++row)
                       for (std::int64_t j = 0; j < s.cols; ++j) {
                         const std::uint8_t code = kernels::code_at(s, w.codes.data() + row * s.code_bytes_per_row(), j);
                         const std::uint8_t scale = s.scales_per_row() ? w.scales[row * s.scales_per_row() + j / s.block()] : 0;
                         RC_ASSERT(hex_code(kE4M3FN, out[row * s.cols + j]) ==
                                   hex_code(kE4M3FN, oracle::recipe_requantize_e4m3(r, scale, code, w.factor)));
                       }
                     for (std::size_t i = n; i < out.size(); ++i) RC_ASSERT(out[i] == 0xA5);  // nothing past the end
                   });
                 });
    add_property("gpu", "kernels/" + std::string(named.name) + "/workspace-e4m3/device-vs-cpu-twin", Device::cuda,
                 [workspace](const RunContext& ctx) {
                   std::string why;
                   if (!kernels::device::available(&why)) return skipped(why);
                   const auto problems = workspace(300);
                   return check_random(ctx, [&] {
                     const WorkspaceProblem w = *problems;
                     const std::vector<std::uint8_t> want = run_workspace_cpu(w, 0xA5);
                     std::vector<std::uint8_t> got;
                     const std::string e = run_workspace_gpu(w, 0xA5, &got);
                     RC_ASSERT(e.empty());
                     RC_ASSERT(got == want);
                   });
                 });
  }
  // The kernels' input loads (fast paths) against the oracle, every BF16 and FP16 pattern.
  add_property("kernels", "input-loads-exact-for-every-bf16-and-fp16", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    for (const DType t : {DType::bf16, DType::fp16}) {
      const Format f = t == DType::bf16 ? kBF16 : kFP16;
      for (std::uint32_t b = 0; b < (1u << 16); ++b) {
        const std::uint16_t bits[2] = {static_cast<std::uint16_t>(b), 0};  // 4 bytes: load_value's FP32 branch reads 4
        const oracle::Real want = oracle::real_of(f, bits[0]);
        const oracle::Real got = oracle::real_of_float(kernels::load_value(t, bits, 0));
        const bool ok = want.kind == got.kind && want.negative == got.negative && want.magnitude == got.magnitude;
        if (ok) {
          tally.pass();
        } else {
          tally.fail(std::string(kernels::name_of(t)) + " " + hex_code(f, bits[0]));
        }
      }
    }
    return tally.outcome(ctx);
  });
  // Bad shapes are errors that name the argument, from the twin and the launchers alike.
  add_property("kernels", "validation-errors-name-the-argument", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    auto expect = [&](QuantizeShape s, const char* word) {
      const kvq::Status e = kernels::validate(s);
      if (e.message().find(word) != std::string::npos) {
        tally.pass();
      } else {
        tally.fail("expected an error naming '" + std::string(word) + "', got '" + e.message() + "'");
      }
    };
    QuantizeShape s{recipe_from_name("nvfp4")->recipe, 2, 24};
    expect(s, "multiple of the block size 16");
    s.cols = 0;
    expect(s, "cols");
    s.cols = 32;
    s.rows = -1;
    expect(s, "rows");
    s.rows = 1;
    s.recipe.block = 128;
    expect(s, "block");
    s.recipe.block = 16;
    if (kernels::validate(s).ok()) tally.pass(); else tally.fail("valid shape rejected: " + kernels::validate(s).message());
    s.recipe.element = FormatId::e5m2;
    expect(s, "element");
    // An empty tensor is valid and writes nothing.
    QuantizeShape empty{recipe_from_name("nvfp4")->recipe, 0, 32};
    std::uint8_t codes[4] = {0xA5, 0xA5, 0xA5, 0xA5}, scales[4] = {0xA5, 0xA5, 0xA5, 0xA5};
    const float none[1] = {1.0f};
    const kvq::Status e = kernels::quantize_cpu(empty, DType::fp32, none, 1.0f, codes, scales);
    if (e.ok() && codes[0] == 0xA5 && scales[0] == 0xA5) tally.pass(); else tally.fail("empty tensor: '" + e.message() + "' or a write");
    return tally.outcome(ctx);
  });
}
KVQ_REGISTER_PROPERTIES(register_kernel_properties);

}  // namespace
}  // namespace kvq::props
