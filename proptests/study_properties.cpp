// Properties of the study machinery (experiments/): the generic block quantizer of the crest study
// equals the recipes' one block quantizer (formats/recipes.hpp) wherever both define a format, so
// the FP6/INT6 formats it adds run the same rules; and the INT closed form is its formula.
#include <cmath>
#include <sstream>
#include <stdexcept>

#include <cstring>

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

std::uint64_t double_bits(double v) {
  std::uint64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// `kvq study qsnr --device cuda` against the CPU: every recipe x block 16, 32 x three distributions
// (2^17 samples, 8 chunks of blocks at block 16), every sum, count and block crest equal bit for bit.
void register_study_gpu_properties() {
  add_property("gpu", "studies/qsnr-device-equals-cpu", Device::cuda, [](const RunContext& ctx) {
    std::string why;
    if (!kernels::device::available(&why)) return skipped(why);
    Tally tally;
    for (const std::string dist : {"gaussian", "kv-keys", "student-t:5"}) {
      const auto d = *experiments::distribution_from_name(dist, &why);
      const std::vector<float> x = experiments::sample(d, 1024, 128, ctx.seed ^ experiments::name_hash(dist));
      for (const NamedRecipe& named : kRecipes)
        for (const int block : {16, 32}) {
          Recipe r = named.recipe;
          const bool tensor = r.scale == BlockScale::tensor_only;
          if (!tensor) r.block = block;
          if (tensor && block == 32) continue;
          const int n = tensor ? kernels::kTensorChunk : block;
          const float g = tensor_scale(r, kernels::amax_cpu(kernels::DType::fp32, x.data(), static_cast<std::int64_t>(x.size())));
          const experiments::QsnrTotals want = experiments::qsnr_totals_cpu(r, n, g, x);
          experiments::QsnrTotals got;
          const std::string label = std::string(named.name) + " block " + std::to_string(n) + " " + dist;
          if (auto e = experiments::device::qsnr_totals(r, n, g, x, &got); !e.empty()) {
            tally.fail(label + ": " + e);
            continue;
          }
          bool same = double_bits(got.sum.err2) == double_bits(want.sum.err2) &&
                      double_bits(got.sum.x2) == double_bits(want.sum.x2) &&
                      double_bits(got.sum.max_abs_error) == double_bits(want.sum.max_abs_error) &&
                      got.sum.clipped == want.sum.clipped && got.sum.clipped_blocks == want.sum.clipped_blocks &&
                      got.crest.size() == want.crest.size();
          for (std::size_t b = 0; same && b < want.crest.size(); ++b) same = double_bits(got.crest[b]) == double_bits(want.crest[b]);
          std::ostringstream os;
          os << label << ": device err2 " << got.sum.err2 << " x2 " << got.sum.x2 << " clipped " << got.sum.clipped
             << ", cpu err2 " << want.sum.err2 << " x2 " << want.sum.x2 << " clipped " << want.sum.clipped;
          if (same) tally.pass();
          else tally.fail(os.str());
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
