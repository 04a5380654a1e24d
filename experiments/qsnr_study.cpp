// `kvq study qsnr`: quantization error of every recipe x block size x distribution on the same
// seeded samples (docs/studies.md definitions): pooled QSNR, MSE, max |error|, clipping,
// block crest factors. The sums are qsnr_partials.hpp's, on the CPU or (--device cuda) the GPU.
#include <algorithm>
#include <cmath>
#include <condition_variable>
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

// The visible GPUs, each lent to one configuration at a time: a configuration takes whichever is free
// (configurations differ in cost, so a fixed i % count split left GPUs idle while one finished).
class GpuPool {
 public:
  explicit GpuPool(int count) : busy_(static_cast<std::size_t>(std::max(count, 1)), false) {
    if (count > 1) opened_ = device::open_gpus(count);  // the contexts at once, not one by one
  }
  const std::string& opened() const { return opened_; }
  struct Lease {
    explicit Lease(GpuPool& pool) : pool(pool) {
      std::unique_lock<std::mutex> hold(pool.lock_);
      pool.freed_.wait(hold, [&] { return std::find(pool.busy_.begin(), pool.busy_.end(), false) != pool.busy_.end(); });
      index = static_cast<int>(std::find(pool.busy_.begin(), pool.busy_.end(), false) - pool.busy_.begin());
      pool.busy_[static_cast<std::size_t>(index)] = true;
    }
    ~Lease() {
      {
        const std::lock_guard<std::mutex> hold(pool.lock_);
        pool.busy_[static_cast<std::size_t>(index)] = false;
      }
      pool.freed_.notify_one();
    }
    GpuPool& pool;
    int index = 0;
  };

 private:
  std::mutex lock_;
  std::condition_variable freed_;
  std::vector<bool> busy_;
  std::string opened_;
};

std::string measure(const QsnrConfig& c, const StudyOptions& o, SampleCache& cache) {
  const std::uint64_t seed = data_seed(o.seed, c.distribution.name);
  Recipe r = c.recipe.recipe;
  if (c.block) r.block = c.block;
  const int block = c.block ? c.block : kernels::kTensorChunk;
  const int rotation_block = o.rotate ? block : 0;
  const std::int64_t rows = (o.samples + o.head_dim - 1) / o.head_dim;  // as samples_of draws them
  const std::int64_t samples = rows * o.head_dim;
  QsnrTotals t;
  if (o.device == "cuda") {  // on the next free GPU of all visible ones
    static GpuPool pool(device::gpu_count());
    const GpuPool::Lease gpu(pool);
    std::string e = pool.opened();
    if (e.empty() && device::gpu_count() > 0) e = device::use_gpu(gpu.index);
    if (e.empty()) e = device::qsnr_totals_sampled(r, block, c.distribution, rows, o.head_dim, seed, rotation_block, &t);
    if (!e.empty()) throw std::runtime_error(e);
  } else {  // the same samples drawn here (samplers.hpp: the same bits)
    const auto x = samples_of(c.distribution, rotation_block, o, cache);
    const float g = tensor_scale(r, kernels::amax_cpu(kernels::DType::fp32, x->data(), samples));
    t = qsnr_totals_cpu(r, block, g, *x);
  }
  const double crest_mean = t.sum.crest_blocks ? t.sum.crest_sum / static_cast<double>(t.sum.crest_blocks) : 0.0;
  const double n = static_cast<double>(samples);
  return std::string(c.recipe.name) + "," + std::to_string(c.block) + "," + c.distribution.name + "," +
         std::to_string(samples) + "," + std::to_string(seed) + "," + csv_number(-10.0 * std::log10(t.sum.err2 / t.sum.x2)) +
         "," + csv_number(t.sum.err2 / n) + "," + csv_number(t.sum.max_abs_error) + "," +
         csv_number(static_cast<double>(t.sum.clipped) / n) + "," +
         csv_number(static_cast<double>(t.sum.clipped_blocks) / static_cast<double>(samples / block)) + "," +
         csv_number(crest_mean) + "," + csv_number(t.crest_median) + "," + (o.rotate ? "hadamard" : "none");
}

}  // namespace

static_assert(kMaxRotationBlock >= kernels::kMaxBlock, "--rotate hadamard must rotate every block the grid allows");

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
  grid->run = [configs, o, cache](std::size_t i) { return std::vector<std::string>{measure(configs[i], o, *cache)}; };
  std::vector<std::string> dist_names;
  for (const Distribution& d : dists) dist_names.push_back(d.name);
  grid->manifest = "  \"head_dim\": " + std::to_string(o.head_dim) + ",\n  \"rotate\": " +
                   json_quoted(o.rotate ? "hadamard" : "none") +
                   ",\n  \"qsnr\": \"pooled over the tensor: -10 log10(sum (x - dq)^2 / sum x^2)\",\n"
                   "  \"distributions\": " + json_list(dist_names) + ",\n" + recipes_manifest(recipes);
  return {};
}

}  // namespace kvq::experiments
