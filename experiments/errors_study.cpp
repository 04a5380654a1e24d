// `kvq study errors`: per-element error distributions of each recipe (its own block size), as
// histograms: in units of the block's decode scale (the error on the element grid), relative
// (log10 |x - dq| / |x|) and absolute (log10 |x - dq|; unit-variance data).
#include <cmath>
#include <map>

#include "experiments/distributions.hpp"
#include "experiments/quantized_tensor.hpp"
#include "experiments/studies.hpp"

namespace kvq::experiments {
namespace {

constexpr int kScaleBins = 100;  // over [-G, G], G = the element grid's largest gap
constexpr double kLogBin = 0.1;  // decades
constexpr double kRelativeLow = -10, kAbsoluteLow = -12, kLogHigh = 2;

double largest_gap(Format f) {
  return max_finite(f) - finite_value(f, f.max_finite_code() - 1);
}

std::vector<std::string> measure(const NamedRecipe& recipe, const Distribution& d, const StudyOptions& o,
                                 SampleCache& cache) {
  const std::uint64_t seed = data_seed(o.seed, d.name);
  const auto samples_ptr = samples_of(d, 0, o, cache);
  const std::vector<float>& x = *samples_ptr;
  const std::int64_t samples = static_cast<std::int64_t>(x.size()), rows = samples / o.head_dim;
  const QuantizedTensor q = quantize_tensor(recipe.recipe, x, rows, o.head_dim, o.device == "cuda");
  const double gap = largest_gap(format_of(recipe.recipe.element));
  std::map<int, std::int64_t> scale_units, relative, absolute;  // bin index -> count
  std::int64_t exact = 0;
  auto log_bin = [](double v, double low) {
    const double l = std::log10(v);
    return static_cast<int>(std::floor((std::min(std::max(l, low), kLogHigh - 1e-9) - low) / kLogBin));
  };
  for (std::int64_t k = 0; k < samples; ++k) {
    const double err = static_cast<double>(x[k]) - q.values[k];
    const double s = q.decode_scale(k);
    if (s > 0) {
      const double u = std::min(std::max(err / s, -gap), gap * (1 - 1e-12));
      ++scale_units[static_cast<int>(std::floor((u + gap) / (2 * gap) * kScaleBins))];
    }
    if (err == 0) {
      ++exact;
      continue;
    }
    if (x[k] != 0) ++relative[log_bin(std::fabs(err / x[k]), kRelativeLow)];
    ++absolute[log_bin(std::fabs(err), kAbsoluteLow)];
  }
  const std::string head = std::string(recipe.name) + "," +
                           std::to_string(recipe.recipe.scale == BlockScale::tensor_only ? 0 : recipe.recipe.block) + "," +
                           d.name + "," + std::to_string(samples) + "," + std::to_string(seed) + ",";
  std::vector<std::string> out{head + "exact,0,0," + std::to_string(exact)};
  for (const auto& [b, n] : scale_units)
    out.push_back(head + "scale_units," + csv_number(-gap + 2 * gap * b / kScaleBins) + "," +
                  csv_number(-gap + 2 * gap * (b + 1) / kScaleBins) + "," + std::to_string(n));
  for (const auto& [kind, bins, low] : {std::tuple{"log10_relative", &relative, kRelativeLow},
                                        std::tuple{"log10_absolute", &absolute, kAbsoluteLow}})
    for (const auto& [b, n] : *bins)
      out.push_back(head + kind + "," + csv_number(low + b * kLogBin) + "," + csv_number(low + (b + 1) * kLogBin) + "," +
                    std::to_string(n));
  return out;
}

}  // namespace

std::string make_errors_study(const StudyOptions& o, StudyGrid* grid) {
  if (o.samples <= 0) return "--samples must be > 0";
  if (o.head_dim <= 0 || o.head_dim % 128 != 0) return "--head-dim must be a positive multiple of 128 (MLA tiles)";
  std::vector<NamedRecipe> recipes;
  std::vector<Distribution> dists;
  if (auto e = recipes_from_names(o.recipes, &recipes); !e.empty()) return e;
  if (auto e = distributions_from_names(o.distributions, {"gaussian", "kv-keys"}, &dists); !e.empty()) return e;
  struct Config {
    NamedRecipe recipe;
    Distribution dist;
  };
  std::vector<Config> configs;
  for (const NamedRecipe& r : recipes)
    for (const Distribution& d : dists) configs.push_back({r, d});
  grid->name = "errors";
  grid->header = "recipe,block,dist,samples,seed,kind,lo,hi,count";
  for (const Config& c : configs) grid->labels.push_back(std::string(c.recipe.name) + " " + c.dist.name);
  auto cache = std::make_shared<SampleCache>();
  grid->run = [configs, o, cache](std::size_t i) {
    select_study_gpu(o, i);
    return measure(configs[i].recipe, configs[i].dist, o, *cache);
  };
  std::vector<std::string> dist_names;
  for (const Distribution& d : dists) dist_names.push_back(d.name);
  grid->manifest =
      "  \"kinds\": {\"exact\": \"elements with x == dq\", \"scale_units\": \"(x - dq) / block decode scale, 100 bins "
      "over +-(largest element gap), ends clamped\", \"log10_relative\": \"log10 |x - dq| / |x|, 0.1-decade bins from "
      "-10 (clamped)\", \"log10_absolute\": \"log10 |x - dq|, 0.1-decade bins from -12 (clamped)\"},\n"
      "  \"distributions\": " + json_list(dist_names) + ",\n  \"head_dim\": " + std::to_string(o.head_dim) + ",\n" +
      recipes_manifest(recipes);
  return {};
}

}  // namespace kvq::experiments
