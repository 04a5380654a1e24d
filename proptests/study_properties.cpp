// Properties of the study machinery (experiments/): the generic block quantizer of the crest study
// equals the recipes' one block quantizer (formats/recipes.hpp) wherever both define a format, so
// the FP6/INT6 formats it adds run the same rules; and the INT closed form is its formula.
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "experiments/block_formats.hpp"
#include "experiments/distributions.hpp"
#include "experiments/qsnr_device.hpp"
#include "experiments/studies.hpp"
#include "experiments/study_runner.hpp"
#include "kernels/quantize.hpp"
#include "formats/float_bits.hpp"
#include "formats/recipe_names.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/harness/rapidcheck_bridge.hpp"

namespace kvq::props {
namespace {

using experiments::BlockFormat;
using experiments::BlockScaleKind;

// Finite blocks: m * 2^k, m in [-2000, 2000], one scale per block, or zeros.
rc::Gen<std::vector<float>> gen_finite_block(int n) {
  return rc::gen::exec([n] {
    const int k = *rc::gen::inRange(-40, 40);
    if (*rc::gen::inRange(0, 16) == 0) return std::vector<float>(n, 0.0f);
    return *rc::gen::container<std::vector<float>>(
        n, rc::gen::map(rc::gen::inRange(-2000, 2001), [k](int m) { return std::ldexp(static_cast<float>(m), k - 8); }));
  });
}

void register_study_properties() {
  struct Twin {
    BlockFormat format;
    std::string_view recipe;
  };
  static constexpr auto e8m0 = BlockScaleKind::e8m0_floor;
  static constexpr auto e4m3 = BlockScaleKind::e4m3_two_level;
  // The study's recipes (experiments::block_format_recipe) are the named engine recipes where one
  // exists: the same codes, scales and values on random finite blocks.
  for (const Twin& t : {Twin{{"MXFP4", FormatId::e2m1, false, e8m0}, "mxfp4-floor"},
                        Twin{{"MXINT4", FormatId::int4, true, e8m0}, "mxint4"},
                        Twin{{"MXINT8", FormatId::int8, true, e8m0}, "mxint8"},
                        Twin{{"MXFP8", FormatId::e4m3fn, false, e8m0}, "mxfp8-e4m3-floor"},
                        Twin{{"NVFP4", FormatId::e2m1, false, e4m3}, "nvfp4"}, Twin{{"NVINT4", FormatId::int4, true, e4m3}, "nvint4"}}) {
    add_property("studies", "block-formats/" + std::string(t.format.name) + "-equals-" + std::string(t.recipe),
                 Device::cpu, [t](const RunContext& ctx) {
                   const Recipe r = recipe_from_name(t.recipe)->recipe;
                   const Recipe study = experiments::block_format_recipe(t.format, r.block);
                   const auto blocks = rc::gen::container<std::vector<std::vector<float>>>(
                       3, gen_finite_block(r.block));
                   return check_random(ctx, [&] {
                     const std::vector<std::vector<float>> x = *blocks;
                     float amax = 0;
                     for (const auto& b : x)
                       for (const float v : b) amax = std::fabs(v) > amax ? std::fabs(v) : amax;
                     const float g = tensor_scale(r, amax);
                     if (t.format.scale == e4m3)  // g is the two-level recipes' tensor scale only
                       RC_ASSERT(bits_of(g) == bits_of(tensor_scale(study, amax)));
                     const Format element = format_of(r.element);
                     std::vector<std::uint8_t> codes(r.block), expected(r.block);
                     std::vector<float> y(r.block);
                     for (const auto& b : x) {
                       experiments::quantize_block_format(t.format, g, b.data(), r.block, codes.data(), y.data());
                       const std::uint8_t scale = quantize_block(r, g, b.data(), r.block, expected.data());
                       for (int i = 0; i < r.block; ++i) {
                         RC_ASSERT(hex_code(element, codes[i]) == hex_code(element, expected[i]));
                         RC_ASSERT(hex_code(kFP32, bits_of(y[i])) ==
                                   hex_code(kFP32, bits_of(dequantize_element(r, g, scale, expected[i]))));
                       }
                     }
                   });
                 });
  }
  // The samplers' transforms (experiments/samplers.hpp) against libm and long double: log_ieee within
  // 3 ulp of std::log on the uniform draws' grid, near 1 and over the normal range (log_ieee's own
  // error: s = f/(2+f) two roundings, 2^-52 relative on the leading 2s, at most 2 ulp, and the last
  // addition half an ulp; glibc's log within 1 ulp; 3.5 apart at most); sincos_turns within
  // 2^-50 of sin and cos of 2 pi t in long double (64-bit significand) over t in [0, 1), its quadrant
  // edges included. A wrong coefficient, quadrant or exponent step moves them far past these bounds.
  add_property("studies", "samplers/transforms-match-libm", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    experiments::CounterRng rng(ctx.seed, 0);
    auto ulps = [](double a, double b) {
      const std::int64_t d = static_cast<std::int64_t>(bits_of(a)) - static_cast<std::int64_t>(bits_of(b));
      return (a < 0) != (b < 0) ? std::int64_t{1} << 62 : (d < 0 ? -d : d);
    };
    for (int i = 0; i < 4 * ctx.cases; ++i) {
      const int kind = i % 4;
      double x = rng.uniform_open0();                                              // the draws' grid
      if (kind == 1) x = 1.0 + std::ldexp(rng.uniform() - 0.5, -20);             // near 1
      if (kind == 2) x = std::ldexp(1.0 + rng.uniform(), static_cast<int>(rng.next() % 2040) - 1020);  // normals
      if (kind == 3) x = std::ldexp(1.0, static_cast<int>(rng.next() % 2040) - 1020);  // powers of two
      const double got = experiments::log_ieee(x), want = std::log(x);
      if (ulps(got, want) <= 3 || (got == 0 && want == 0)) {
        tally.pass();
      } else {
        std::ostringstream os;
        os << std::hexfloat << "log_ieee(" << x << ") = " << got << ", std::log " << want;
        tally.fail(os.str());
      }
    }
    const long double two_pi = 6.283185307179586476925286766559005768L;
    for (int i = 0; i < 4 * ctx.cases; ++i) {
      double t = rng.uniform();
      if (i % 4 == 1) t = std::ldexp(static_cast<double>(rng.next() % 4), -2);                  // quadrant edges
      if (i % 4 == 2) t = std::nextafter(std::ldexp(static_cast<double>(rng.next() % 4 + 1), -2), 0.0);  // just below
      double s = 0, c = 0;
      experiments::sincos_turns(t, &s, &c);
      const long double a = two_pi * static_cast<long double>(t);
      const double ds = static_cast<double>(std::fabs(static_cast<long double>(s) - std::sin(a)));
      const double dc = static_cast<double>(std::fabs(static_cast<long double>(c) - std::cos(a)));
      if (ds <= 0x1p-50 && dc <= 0x1p-50) {
        tally.pass();
      } else {
        std::ostringstream os;
        os << std::hexfloat << "sincos_turns(" << t << "): sin " << s << " (off " << ds << "), cos " << c << " (off " << dc << ")";
        tally.fail(os.str());
      }
    }
    return tally.outcome(ctx);
  });
  // Each distribution's 2^20 samples have mean 0 and variance 1 within six standard errors (the
  // variance's from the samples' fourth moment), and the i.i.d. ones put the
  // expected share of samples in |x| < 1 (Gaussian erf(1/sqrt 2), Laplace 1 - e^-sqrt2, uniform
  // 1/sqrt3) within six binomial standard errors.
  add_property("studies", "samplers/moments", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    struct Case {
      const char* dist;
      double inside;  // P(|x| < 1), or < 0: not checked
    };
    for (const Case c : {Case{"gaussian", std::erf(1.0 / std::sqrt(2.0))}, Case{"laplace", 1.0 - std::exp(-std::sqrt(2.0))},
                         Case{"uniform", 1.0 / std::sqrt(3.0)}, Case{"student-t:5", -1}, Case{"kv-keys", -1},
                         Case{"kv-values", -1}}) {
      std::string why;
      const auto d = *experiments::distribution_from_name(c.dist, &why);
      const std::vector<float> x = experiments::sample(d, 8192, 128, ctx.seed ^ experiments::name_hash(c.dist));
      const double n = static_cast<double>(x.size());
      double sum = 0, sum2 = 0, sum4 = 0, inside = 0;
      for (const float v : x) {
        const double v2 = static_cast<double>(v) * v;
        sum += v;
        sum2 += v2;
        sum4 += v2 * v2;
        inside += std::fabs(v) < 1.0f;
      }
      const double mean = sum / n, var = sum2 / n - mean * mean, share = inside / n;
      const double var_error = std::sqrt((sum4 / n - (sum2 / n) * (sum2 / n)) / n);
      const bool ok = std::fabs(mean) <= 6.0 / std::sqrt(n) && std::fabs(var - 1.0) <= 6.0 * var_error &&
                      (c.inside < 0 || std::fabs(share - c.inside) <= 6.0 * std::sqrt(c.inside * (1 - c.inside) / n));
      std::ostringstream os;
      os << c.dist << ": mean " << mean << ", variance " << var << ", share |x| < 1 " << share << " (expected " << c.inside << ")";
      if (ok) tally.pass();
      else tally.fail(os.str());
    }
    return tally.outcome(ctx);
  });
  // The INT closed form is 10 log10(12 (2^(b-1) - 1)^2 / (rho kappa)^2): at rho = kappa = 1 an INT8
  // block gives 10 log10(12 * 127^2) = 52.8679 dB, and each doubling of rho * kappa costs 20 log10 2.
  add_property("studies", "model/int-closed-form", Device::cpu, [](const RunContext& ctx) {
    const BlockFormat int8{"MXINT8", FormatId::int8, true, BlockScaleKind::e8m0_floor};
    const double at1 = experiments::model_qsnr_db(int8, 1.0, 1.0), at4 = experiments::model_qsnr_db(int8, 2.0, 2.0);
    Tally tally;
    std::ostringstream os;
    os << "INT8 model at rho = kappa = 1: " << at1 << " dB (expected 52.8679); at rho = kappa = 2: " << at4;
    if (std::fabs(at1 - 52.86789) < 5e-5 && std::fabs((at1 - at4) - 40.0 * std::log10(2.0)) < 1e-9) tally.pass();
    else tally.fail(os.str());
    return tally.outcome(ctx);
  });
}

// `kvq study qsnr --device cuda` against the CPU, samples and all: every recipe x block 16, 32 x three
// distributions (2^17 samples, 8 chunks of blocks at block 16), with and without the Hadamard
// rotation; every sum and count, and the crest factors' sum and median, equal bit for bit.
void register_study_gpu_properties() {
  add_property("gpu", "studies/qsnr-device-equals-cpu", Device::cuda, [](const RunContext& ctx) {
    std::string why;
    if (!kernels::device::available(&why)) return skipped(why);
    Tally tally;
    for (const std::string dist : {"gaussian", "kv-keys", "student-t:5"}) {
      const auto d = *experiments::distribution_from_name(dist, &why);
      const std::uint64_t seed = ctx.seed ^ experiments::name_hash(dist);
      for (const NamedRecipe& named : kRecipes)
        for (const int block : {16, 32}) {
          Recipe r = named.recipe;
          const bool tensor = r.scale == BlockScale::tensor_only;
          if (!tensor) r.block = block;
          if (tensor && block == 32) continue;
          const int n = tensor ? kernels::kTensorChunk : block;
          const int rotation = dist == "kv-keys" ? n : 0;
          std::vector<float> x = experiments::sample(d, 1024, 128, seed);
          if (rotation) experiments::rotate_hadamard(x, rotation, seed);
          const float g = tensor_scale(r, kernels::amax_cpu(kernels::DType::fp32, x.data(), static_cast<std::int64_t>(x.size())));
          const experiments::QsnrTotals want = experiments::qsnr_totals_cpu(r, n, g, x);
          experiments::QsnrTotals got;
          const std::string label = std::string(named.name) + " block " + std::to_string(n) + " " + dist +
                                    (rotation ? " rotated" : "");
          if (auto e = experiments::device::qsnr_totals_sampled(r, n, d, 1024, 128, seed, rotation, &got); !e.empty()) {
            tally.fail(label + ": " + e);
            continue;
          }
          bool same = bits_of(got.sum.err2) == bits_of(want.sum.err2) &&
                      bits_of(got.sum.x2) == bits_of(want.sum.x2) &&
                      bits_of(got.sum.max_abs_error) == bits_of(want.sum.max_abs_error) &&
                      got.sum.clipped == want.sum.clipped && got.sum.clipped_blocks == want.sum.clipped_blocks &&
                      bits_of(got.sum.crest_sum) == bits_of(want.sum.crest_sum) &&
                      got.sum.crest_blocks == want.sum.crest_blocks &&
                      bits_of(got.crest_median) == bits_of(want.crest_median);
          std::ostringstream os;
          os << label << ": device err2 " << got.sum.err2 << " x2 " << got.sum.x2 << " clipped " << got.sum.clipped
             << " crest median " << got.crest_median << ", cpu err2 " << want.sum.err2 << " x2 " << want.sum.x2
             << " clipped " << want.sum.clipped << " crest median " << want.crest_median;
          if (same) tally.pass();
          else tally.fail(os.str());
        }
    }
    return tally.outcome(ctx);
  });
  // The samplers on the GPU draw the host's samples bit for bit (samplers.hpp: integer RNG, correctly
  // rounded operations): every distribution, an odd count (the last pair half written), the kv kinds'
  // tables, and Hadamard rotations of 16 and 128.
  add_property("gpu", "studies/samples-device-equal-host", Device::cuda, [](const RunContext& ctx) {
    std::string why;
    if (!kernels::device::available(&why)) return skipped(why);
    Tally tally;
    struct Case {
      const char* dist;
      std::int64_t rows;
      int cols, rotation;
    };
    for (const Case c : {Case{"gaussian", 4096, 128, 0}, Case{"gaussian", 1001, 3, 0}, Case{"laplace", 4096, 128, 0},
                         Case{"uniform", 4096, 128, 16}, Case{"student-t:5", 4096, 128, 0},
                         Case{"student-t:2.5", 1001, 3, 0}, Case{"kv-keys", 8192, 128, 0}, Case{"kv-keys", 4096, 64, 128},
                         Case{"kv-values", 4096, 128, 16}}) {
      const auto d = *experiments::distribution_from_name(c.dist, &why);
      const std::uint64_t seed = ctx.seed ^ experiments::name_hash(c.dist);
      std::vector<float> want = experiments::sample(d, c.rows, c.cols, seed), got;
      if (c.rotation) experiments::rotate_hadamard(want, c.rotation, seed);
      const std::string label = std::string(c.dist) + " " + std::to_string(c.rows) + "x" + std::to_string(c.cols) +
                                (c.rotation ? " rotated by " + std::to_string(c.rotation) : "");
      if (auto e = experiments::device::samples(d, c.rows, c.cols, seed, c.rotation, &got); !e.empty()) {
        tally.fail(label + ": " + e);
        continue;
      }
      std::size_t differ = 0, first = want.size();
      for (std::size_t i = 0; i < want.size(); ++i)
        if (bits_of(got[i]) != bits_of(want[i]) && differ++ == 0) first = i;
      if (differ == 0) {
        tally.pass();
      } else {
        std::ostringstream os;
        os << label << ": " << differ << " of " << want.size() << " samples differ; first at " << first << ": device "
           << hex_code(kFP32, bits_of(got[first])) << ", host " << hex_code(kFP32, bits_of(want[first]));
        tally.fail(os.str());
      }
    }
    return tally.outcome(ctx);
  });
  // `kvq study errors|scales|attention --device cuda` quantize through the GPU kernels: every CSV row
  // of a small grid equals the CPU run's, character for character (all recipes, two distributions).
  add_property("gpu", "studies/errors-scales-attention-device-equals-cpu", Device::cuda, [](const RunContext& ctx) {
    std::string why;
    if (!kernels::device::available(&why)) return skipped(why);
    Tally tally;
    experiments::StudyOptions o;
    o.samples = 1 << 14;
    o.seed = ctx.seed;
    o.distributions = {"gaussian", "kv-keys"};
    o.seq_lens = {256};
    o.heads = 2;
    o.queries = 4;
    for (const auto& [name, make] : experiments::study_factories()) {
      if (name != "errors" && name != "scales" && name != "attention") continue;
      experiments::StudyGrid cpu, cuda;
      o.device = "cpu";
      std::string e = make(o, &cpu);
      o.device = "cuda";
      if (e.empty()) e = make(o, &cuda);
      if (!e.empty()) throw std::runtime_error(name + ": " + e);
      for (std::size_t i = 0; i < cpu.labels.size(); ++i) {
        const std::vector<std::string> want = cpu.run(i), got = cuda.run(i);
        if (got == want) {
          tally.pass();
        } else {
          std::ostringstream os;
          os << name << " configuration " << i << " (" << cpu.labels[i] << "): device rows differ from the CPU's; first CPU row "
             << (want.empty() ? std::string("none") : want[0]) << ", device " << (got.empty() ? std::string("none") : got[0]);
          tally.fail(os.str());
        }
      }
    }
    return tally.outcome(ctx);
  });
}

}  // namespace

KVQ_REGISTER_PROPERTIES(register_study_properties);
KVQ_REGISTER_PROPERTIES(register_study_gpu_properties);

}  // namespace kvq::props
