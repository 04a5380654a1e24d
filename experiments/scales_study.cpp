// `kvq study scales`: scale rules on the same data. E2M1 blocks under an FP32 (unrounded), E4M3 or
// E8M0 block scale; the E8M0 rules floor/ceil/even/rceil; 4-over-6; tensor scale 448 vs 256; and
// reciprocal-multiply vs exact division, as the fraction of element codes that change against the
// rule each variant departs from (its baseline, same data).
#include <cmath>
#include <optional>

#include "experiments/distributions.hpp"
#include "experiments/quantized_tensor.hpp"
#include "experiments/studies.hpp"

namespace kvq::experiments {
namespace {

struct ScaleVariant {
  std::string name;
  std::optional<Recipe> recipe;  // nullopt: the FP32 block scale bmax/6, not rounded (E2M1 elements)
  std::string baseline;          // the variant it is compared with ("" for none)
  std::string scale;             // what is stored
};

Recipe named(std::string_view n) { return recipe_from_name(n)->recipe; }

std::vector<ScaleVariant> variants() {
  Recipe e4m3_256 = named("nvfp4"), four_over_six_448 = named("nvfp4-4over6-paper"), nvfp4_rcp = named("nvfp4");
  e4m3_256.tensor_divisor = 256.0f * 6.0f;
  four_over_six_448.tensor_divisor = 448.0f * 6.0f;
  nvfp4_rcp.apply = Apply::multiply_reciprocal;
  return {
      {"fp32-scale", std::nullopt, "", "FP32 bmax/6, not rounded"},
      {"e4m3-448", named("nvfp4"), "", "E4M3 RNE(bmax/6/g), g = amax/(448*6) (nvfp4)"},
      {"e4m3-256", e4m3_256, "e4m3-448", "E4M3 RNE(bmax/6/g), g = amax/(256*6)"},
      {"4over6-256", named("nvfp4-4over6-paper"), "e4m3-256", "bmax/6 or bmax/4, g = amax/(256*6) (nvfp4-4over6-paper)"},
      {"4over6-448", four_over_six_448, "e4m3-448", "bmax/6 or bmax/4, g = amax/(448*6)"},
      {"e8m0-floor", named("mxfp4-floor"), "", "E8M0 2^(floor(log2 bmax)-2) (OCP)"},
      {"e8m0-ceil", named("mxfp4-ceil"), "e8m0-floor", "E8M0 2^(ceil(log2 bmax)-2)"},
      {"e8m0-even", named("mxfp4-even"), "e8m0-floor", "E8M0 from bmax rounded to 1 mantissa bit, floor"},
      {"e8m0-rceil", named("mxfp4-rceil"), "e8m0-floor", "E8M0 2^ceil(log2(bmax*(1/6)))"},
      {"e4m3-448-rcp", nvfp4_rcp, "e4m3-448", "as e4m3-448, x * ((1/g)/sf) instead of x / (sf*g)"},
      {"e4m3-448-rcp-approx", named("nvfp4-flashinfer-kv"), "e4m3-448", "FlashInfer KV: rcp.approx.ftz scales"},
      {"fp8-tensor-div", named("fp8-e4m3-tensor"), "", "E4M3 elements, x / (amax/448)"},
      {"fp8-tensor-rcp", named("fp8-e4m3-tensor-rcp"), "fp8-tensor-div", "E4M3 elements, x * (1/(amax/448))"},
  };
}

struct Result {
  std::vector<std::uint8_t> codes;  // one per element
  std::vector<float> values;
  std::int64_t clipped = 0;
};

Result quantize_variant(const ScaleVariant& v, int block, const std::vector<float>& x, std::int64_t rows, int cols,
                        bool on_device) {
  Result out;
  out.values.resize(x.size());
  out.codes.resize(x.size());
  if (v.recipe) {
    Recipe r = *v.recipe;
    if (r.scale != BlockScale::tensor_only) r.block = block;
    const QuantizedTensor q = quantize_tensor(r, x, rows, cols, on_device);  // recipe variants: GPU when asked
    for (std::size_t k = 0; k < x.size(); ++k) {
      out.codes[k] = q.code(static_cast<std::int64_t>(k));
      out.clipped += q.clipped(static_cast<std::int64_t>(k), x[k]);
    }
    out.values = q.values;
    return out;
  }
  const Recipe e2m1 = named("nvfp4");
  for (std::size_t start = 0; start < x.size(); start += block) {
    float bmax = 0;
    for (int i = 0; i < block; ++i) bmax = std::fabs(x[start + i]) > bmax ? std::fabs(x[start + i]) : bmax;
    const float s = bmax / 6.0f;
    for (int i = 0; i < block; ++i) {
      out.codes[start + i] = s == 0.0f ? 0 : encode_element(e2m1, x[start + i] / s);
      out.values[start + i] = element_value(e2m1, out.codes[start + i]) * s;
    }
  }
  return out;
}

std::string measure(const ScaleVariant& v, const ScaleVariant* baseline, int block, const Distribution& d,
                    const StudyOptions& o, SampleCache& cache) {
  const std::uint64_t seed = data_seed(o.seed, d.name);
  const auto samples_ptr = samples_of(d, o.rotate ? (block ? block : kernels::kTensorChunk) : 0, o, cache);
  const std::vector<float>& x = *samples_ptr;
  const std::int64_t samples = static_cast<std::int64_t>(x.size()), rows = samples / o.head_dim;
  const Result q = quantize_variant(v, block, x, rows, o.head_dim, o.device == "cuda");
  double err2 = 0, x2 = 0;
  for (std::size_t k = 0; k < x.size(); ++k) {
    const double dd = static_cast<double>(x[k]) - q.values[k];
    err2 += dd * dd;
    x2 += static_cast<double>(x[k]) * x[k];
  }
  std::string changed_codes, changed_values;
  if (baseline) {
    const Result b = quantize_variant(*baseline, block, x, rows, o.head_dim, o.device == "cuda");
    std::int64_t codes = 0, values = 0;
    for (std::size_t k = 0; k < x.size(); ++k) {
      codes += q.codes[k] != b.codes[k];
      values += bits_of(q.values[k]) != bits_of(b.values[k]);
    }
    changed_codes = csv_number(static_cast<double>(codes) / static_cast<double>(samples));
    changed_values = csv_number(static_cast<double>(values) / static_cast<double>(samples));
  }
  const double n = static_cast<double>(samples);
  return v.name + "," + std::to_string(block) + "," + d.name + "," + std::to_string(samples) + "," + std::to_string(seed) +
         "," + csv_number(-10.0 * std::log10(err2 / x2)) + "," + csv_number(err2 / n) + "," +
         csv_number(static_cast<double>(q.clipped) / n) + "," + v.baseline + "," + changed_codes + "," + changed_values +
         "," + (o.rotate ? "hadamard" : "none");
}

}  // namespace

std::string make_scales_study(const StudyOptions& o, StudyGrid* grid) {
  if (o.samples <= 0) return "--samples must be > 0";
  if (o.head_dim <= 0 || o.head_dim % 16 != 0) return "--head-dim must be a positive multiple of 16";
  std::vector<Distribution> dists;
  if (auto e = distributions_from_names(o.distributions, {"gaussian", "laplace", "kv-keys", "kv-values"}, &dists); !e.empty())
    return e;
  const std::vector<ScaleVariant> all = variants();
  struct Config {
    std::size_t variant;
    int block;
    Distribution dist;
  };
  std::vector<Config> configs;
  for (std::size_t v = 0; v < all.size(); ++v) {
    const bool tensor = all[v].recipe && all[v].recipe->scale == BlockScale::tensor_only;
    for (const int block : tensor ? std::vector<int>{0} : o.blocks) {
      if (!tensor && (block <= 0 || block > kernels::kMaxBlock || o.head_dim % block != 0 || block % 2))
        return "--blocks: " + std::to_string(block) + " must be even, divide head_dim and be at most 128";
      for (const Distribution& d : dists) configs.push_back({v, block, d});
    }
  }
  grid->name = "scales";
  grid->header = "variant,block,dist,samples,seed,qsnr_db,mse,clipped_elements,baseline,codes_changed,values_changed,rotate";
  for (const Config& c : configs)
    grid->labels.push_back(all[c.variant].name + " block " + std::to_string(c.block) + " " + c.dist.name);
  auto cache = std::make_shared<SampleCache>();
  grid->run = [configs, all, o, cache](std::size_t i) {
    select_study_gpu(o, i);
    const Config& c = configs[i];
    const ScaleVariant* baseline = nullptr;
    for (const ScaleVariant& v : all)
      if (v.name == all[c.variant].baseline) baseline = &v;
    return std::vector<std::string>{measure(all[c.variant], baseline, c.block, c.dist, o, *cache)};
  };
  std::string defs = "  \"variants\": [\n";
  for (std::size_t v = 0; v < all.size(); ++v)
    defs += "    {\"name\": " + json_quoted(all[v].name) + ", \"scale\": " + json_quoted(all[v].scale) +
            ", \"baseline\": " + json_quoted(all[v].baseline) + "}" + (v + 1 < all.size() ? ",\n" : "\n");
  std::vector<std::string> dist_names;
  for (const Distribution& d : dists) dist_names.push_back(d.name);
  grid->manifest = defs + "  ],\n  \"distributions\": " + json_list(dist_names) + ",\n  \"head_dim\": " +
                   std::to_string(o.head_dim) + ",\n";
  return {};
}

}  // namespace kvq::experiments
