// `kvq study qsnr`: quantization error of every recipe x block size x distribution on the same
// seeded samples (docs/studies.md definitions): pooled QSNR, MSE, max |error|, clipping,
// block crest factors. The sums are qsnr_partials.hpp's, on the CPU or (--device cuda) the GPU.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "experiments/distributions.hpp"
#include "experiments/qsnr_device.hpp"
#include "experiments/quantized_tensor.hpp"
#include "experiments/sample_cache.hpp"
#include "experiments/studies.hpp"

namespace kvq::experiments {
namespace {

struct QsnrConfig {
  NamedRecipe recipe;
  int block = 0;  // 0: per tensor
  Distribution distribution;
};

std::string measure(const QsnrConfig& c, std::size_t index, const StudyOptions& o, SampleCache& cache) {
  const std::uint64_t seed = data_seed(o.seed, c.distribution.name);
  Recipe r = c.recipe.recipe;
  if (c.block) r.block = c.block;
  const int block = c.block ? c.block : kernels::kTensorChunk;
  const auto samples_ptr = samples_of(c.distribution, o.rotate ? block : 0, o, cache);
  const std::vector<float>& x = *samples_ptr;
  const std::int64_t samples = static_cast<std::int64_t>(x.size());
  const float g = tensor_scale(r, kernels::amax_cpu(kernels::DType::fp32, x.data(), samples));
  QsnrTotals t;
  if (o.device == "cuda") {  // every visible GPU: configuration i on GPU i % count, one job at a time each
    static std::array<std::mutex, 64> gpus;
    const int count = std::max(1, std::min<int>(device::gpu_count(), static_cast<int>(gpus.size())));
    const int gpu = static_cast<int>(index % static_cast<std::size_t>(count));
    const std::lock_guard<std::mutex> guard(gpus[gpu]);
    std::string e = device::gpu_count() > 0 ? device::use_gpu(gpu) : "";
    if (e.empty()) e = device::qsnr_totals(r, block, g, x, &t);
    if (!e.empty()) throw std::runtime_error(e);
  } else {
    t = qsnr_totals_cpu(r, block, g, x);
  }
  std::vector<double> crest;
  for (const double v : t.crest)
    if (v >= 0) crest.push_back(v);
  const double n = static_cast<double>(samples);
  double crest_mean = 0, crest_median = 0;
  if (!crest.empty()) {
    for (const double v : crest) crest_mean += v;
    crest_mean /= static_cast<double>(crest.size());
    std::nth_element(crest.begin(), crest.begin() + static_cast<std::ptrdiff_t>(crest.size() / 2), crest.end());
    crest_median = crest[crest.size() / 2];
  }
  return std::string(c.recipe.name) + "," + std::to_string(c.block) + "," + c.distribution.name + "," +
         std::to_string(samples) + "," + std::to_string(seed) + "," + csv_number(-10.0 * std::log10(t.sum.err2 / t.sum.x2)) +
         "," + csv_number(t.sum.err2 / n) + "," + csv_number(t.sum.max_abs_error) + "," +
         csv_number(static_cast<double>(t.sum.clipped) / n) + "," +
         csv_number(static_cast<double>(t.sum.clipped_blocks) / static_cast<double>(samples / block)) + "," +
         csv_number(crest_mean) + "," + csv_number(crest_median) + "," + (o.rotate ? "hadamard" : "none");
}

}  // namespace

std::string make_qsnr_study(const StudyOptions& o, StudyGrid* grid) {
  if (o.samples <= 0) return "--samples must be > 0";
  if (o.head_dim <= 0 || o.head_dim % 16 != 0) return "--head-dim must be a positive multiple of 16";
  if (o.device != "cpu" && o.device != "cuda") return "--device is cpu or cuda, got '" + o.device + "'";
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
  auto cache = std::make_shared<SampleCache>();
  grid->run = [configs, o, cache](std::size_t i) { return std::vector<std::string>{measure(configs[i], i, o, *cache)}; };
  std::vector<std::string> dist_names;
  for (const Distribution& d : dists) dist_names.push_back(d.name);
  grid->manifest = "  \"head_dim\": " + std::to_string(o.head_dim) + ",\n  \"rotate\": " +
                   json_quoted(o.rotate ? "hadamard" : "none") +
                   ",\n  \"qsnr\": \"pooled over the tensor: -10 log10(sum (x - dq)^2 / sum x^2)\",\n"
                   "  \"distributions\": " + json_list(dist_names) + ",\n" + recipes_manifest(recipes);
  return {};
}

}  // namespace kvq::experiments
