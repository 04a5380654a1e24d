// `kvq study qsnr`: quantization error of every recipe x block size x distribution on the same
// seeded samples (REFERENCE.md section 8 definitions): pooled QSNR, MSE, max |error|, clipping,
// block crest factors. CPU, through the kernels' CPU twins (the code the GPU kernels run).
#include <algorithm>
#include <cmath>

#include "experiments/distributions.hpp"
#include "experiments/quantized_tensor.hpp"
#include "experiments/studies.hpp"

namespace kvq::experiments {
namespace {

struct QsnrConfig {
  NamedRecipe recipe;
  int block = 0;  // 0: per tensor
  Distribution distribution;
};

std::string measure(const QsnrConfig& c, const StudyOptions& o) {
  const std::uint64_t seed = data_seed(o.seed, c.distribution.name);
  Recipe r = c.recipe.recipe;
  if (c.block) r.block = c.block;
  const std::int64_t rows = (o.samples + o.head_dim - 1) / o.head_dim;
  const std::int64_t samples = rows * o.head_dim;
  std::vector<float> x = sample(c.distribution, rows, o.head_dim, seed);
  const int block = c.block ? c.block : kernels::kTensorChunk;
  if (o.rotate) rotate_hadamard(x, block, seed + static_cast<std::uint64_t>(block));
  const QuantizedTensor q = quantize_tensor(r, x, rows, o.head_dim);

  double err2 = 0, x2 = 0, max_abs_error = 0;
  std::int64_t clipped = 0, clipped_blocks = 0;
  std::vector<double> crest;
  for (std::int64_t b = 0; b * block < samples; ++b) {
    bool block_clipped = false;
    double block_max = 0, block_x2 = 0;
    for (int i = 0; i < block; ++i) {
      const std::int64_t k = b * block + i;
      const double xv = x[k], d = xv - static_cast<double>(q.values[k]);
      err2 += d * d;
      x2 += xv * xv;
      block_x2 += xv * xv;
      block_max = std::max(block_max, std::fabs(xv));
      max_abs_error = std::max(max_abs_error, std::fabs(d));
      if (q.clipped(k, x[k])) {  // saturated: beyond the largest value the block can hold
        ++clipped;
        block_clipped = true;
      }
    }
    clipped_blocks += block_clipped ? 1 : 0;
    if (block_x2 > 0) crest.push_back(block_max / std::sqrt(block_x2 / block));
  }
  const double n = static_cast<double>(samples);
  double crest_mean = 0, crest_median = 0;
  if (!crest.empty()) {
    for (const double v : crest) crest_mean += v;
    crest_mean /= static_cast<double>(crest.size());
    std::nth_element(crest.begin(), crest.begin() + static_cast<std::ptrdiff_t>(crest.size() / 2), crest.end());
    crest_median = crest[crest.size() / 2];
  }
  return std::string(c.recipe.name) + "," + std::to_string(c.block) + "," + c.distribution.name + "," +
         std::to_string(samples) + "," + std::to_string(seed) + "," + csv_number(-10.0 * std::log10(err2 / x2)) + "," +
         csv_number(err2 / n) + "," + csv_number(max_abs_error) + "," + csv_number(static_cast<double>(clipped) / n) +
         "," + csv_number(static_cast<double>(clipped_blocks) / static_cast<double>(samples / block)) + "," +
         csv_number(crest_mean) + "," + csv_number(crest_median) + "," + (o.rotate ? "hadamard" : "none");
}

}  // namespace

std::string make_qsnr_study(const StudyOptions& o, StudyGrid* grid) {
  if (o.samples <= 0) return "--samples must be > 0";
  if (o.head_dim <= 0 || o.head_dim % 16 != 0) return "--head-dim must be a positive multiple of 16";
  std::vector<NamedRecipe> recipes;
  std::vector<Distribution> dists;
  if (auto e = recipes_from_names(o.recipes, &recipes); !e.empty()) return e;
  if (auto e = distributions_from_names(o.distributions, kDefaultDistributions, &dists); !e.empty()) return e;
  std::vector<QsnrConfig> configs;
  for (const NamedRecipe& recipe : recipes) {
    const bool tensor = recipe.recipe.scale == BlockScale::tensor_only;
    for (const int block : tensor ? std::vector<int>{0} : o.blocks) {
      if (!tensor && (block <= 0 || block > kernels::kMaxBlock || o.head_dim % block != 0 || (block & (block - 1))))
        return "--blocks: " + std::to_string(block) + " must be a power of two dividing head_dim " +
               std::to_string(o.head_dim) + " and at most " + std::to_string(kernels::kMaxBlock);
      for (const Distribution& d : dists) configs.push_back({recipe, block, d});
    }
  }
  grid->name = "qsnr";
  grid->header =
      "recipe,block,dist,samples,seed,qsnr_db,mse,max_abs_error,clipped_elements,clipped_blocks,crest_mean,"
      "crest_median,rotate";
  for (const QsnrConfig& c : configs)
    grid->labels.push_back(std::string(c.recipe.name) + " block " + std::to_string(c.block) + " " + c.distribution.name +
                           (o.rotate ? " (rotated)" : ""));
  grid->run = [configs, o](std::size_t i) { return std::vector<std::string>{measure(configs[i], o)}; };
  std::vector<std::string> dist_names;
  for (const Distribution& d : dists) dist_names.push_back(d.name);
  grid->manifest = "  \"head_dim\": " + std::to_string(o.head_dim) + ",\n  \"rotate\": " +
                   json_quoted(o.rotate ? "hadamard" : "none") +
                   ",\n  \"qsnr\": \"pooled over the tensor: -10 log10(sum (x - dq)^2 / sum x^2)\",\n"
                   "  \"distributions\": " + json_list(dist_names) + ",\n" + recipes_manifest(recipes);
  return {};
}

}  // namespace kvq::experiments
