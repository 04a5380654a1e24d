#include "experiments/qsnr_study.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <stdexcept>

#include "experiments/distributions.hpp"
#include "formats/names.hpp"
#include "formats/recipe_names.hpp"
#include "kernels/quantize.hpp"

#ifndef KVQ_COMMIT
#define KVQ_COMMIT "unknown"
#endif

namespace kvq::experiments {
namespace {

struct Config {
  NamedRecipe recipe;
  int block = 0;
  Distribution distribution;
};

std::uint64_t name_hash(const std::string& s) {  // FNV-1a: a seed per distribution name
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

// The samples depend on (seed, distribution) only, so every recipe and block sees the same data.
std::uint64_t data_seed(std::uint64_t seed, const std::string& distribution) { return seed ^ name_hash(distribution); }

QsnrRow measure(const Config& c, const QsnrOptions& o) {
  QsnrRow row;
  row.recipe = std::string(c.recipe.name);
  row.block = c.block;
  row.distribution = c.distribution.name;
  row.rotated = o.rotate;
  row.seed = data_seed(o.seed, c.distribution.name);
  Recipe r = c.recipe.recipe;
  if (c.block) r.block = c.block;
  const std::int64_t rows = (o.samples + o.head_dim - 1) / o.head_dim;
  row.samples = rows * o.head_dim;
  std::vector<float> x = sample(c.distribution, rows, o.head_dim, row.seed);
  const int block = c.block ? c.block : kernels::kTensorChunk;
  if (o.rotate) rotate_hadamard(x, block, row.seed + static_cast<std::uint64_t>(block));

  const kernels::QuantizeShape s{r, rows, o.head_dim};
  std::vector<std::uint8_t> codes(s.code_bytes()), scales(s.scale_bytes());
  std::vector<float> y(x.size());
  const float g = tensor_scale(r, kernels::amax_cpu(kernels::DType::fp32, x.data(), row.samples));
  std::string e = kernels::quantize_cpu(s, kernels::DType::fp32, x.data(), g, codes.data(), scales.data());
  if (e.empty()) e = kernels::dequantize_cpu(s, codes.data(), scales.data(), g, kernels::DType::fp32, y.data());
  if (!e.empty()) throw std::runtime_error(e);

  const Format ef = format_of(r.element);
  double err2 = 0, x2 = 0;
  std::int64_t clipped = 0, clipped_blocks = 0;
  std::vector<double> crest;
  for (std::int64_t b = 0; b * block < row.samples; ++b) {
    bool block_clipped = false;
    double block_max = 0, block_x2 = 0;
    for (int i = 0; i < block; ++i) {
      const std::int64_t k = b * block + i;
      const double xv = x[k], d = xv - static_cast<double>(y[k]);
      err2 += d * d;
      x2 += xv * xv;
      block_x2 += xv * xv;
      block_max = std::max(block_max, std::fabs(xv));
      row.max_abs_error = std::max(row.max_abs_error, std::fabs(d));
      const std::uint8_t code = kernels::code_at(s, codes.data() + (k / o.head_dim) * s.code_bytes_per_row(), k % o.head_dim);
      if ((code & ef.magnitude_mask()) == ef.max_finite_code() && std::fabs(xv) > std::fabs(static_cast<double>(y[k]))) {
        ++clipped;  // saturated: beyond the largest value the block can hold
        block_clipped = true;
      }
    }
    clipped_blocks += block_clipped ? 1 : 0;
    if (block_x2 > 0) crest.push_back(block_max / std::sqrt(block_x2 / block));
  }
  const double n = static_cast<double>(row.samples);
  row.qsnr_db = -10.0 * std::log10(err2 / x2);
  row.mse = err2 / n;
  row.clipped_elements = clipped / n;
  row.clipped_blocks = static_cast<double>(clipped_blocks) / static_cast<double>(row.samples / block);
  if (!crest.empty()) {
    double sum = 0;
    for (const double v : crest) sum += v;
    row.crest_mean = sum / static_cast<double>(crest.size());
    std::nth_element(crest.begin(), crest.begin() + crest.size() / 2, crest.end());
    row.crest_median = crest[crest.size() / 2];
  }
  return row;
}

}  // namespace

std::string run_qsnr_study(const QsnrOptions& o, std::ostream& progress, std::vector<QsnrRow>* rows) {
  if (o.samples <= 0) return "--samples must be > 0";
  if (o.head_dim <= 0 || o.head_dim % 16 != 0) return "--head-dim must be a positive multiple of 16";
  if (o.shard_count <= 0 || o.shard_index < 0 || o.shard_index >= o.shard_count)
    return "--shard I/N needs 0 <= I < N";
  std::vector<Config> grid;
  std::vector<Distribution> dists;
  for (const std::string& name : o.distributions) {
    std::string error;
    const auto d = distribution_from_name(name, &error);
    if (!d) return "--dist: " + error;
    dists.push_back(*d);
  }
  for (const std::string& name : o.recipes) {
    const auto recipe = recipe_from_name(name);
    if (!recipe) return "--recipes: unknown recipe '" + name + "' (see kvq recipes)";
    const bool tensor = recipe->recipe.scale == BlockScale::tensor_only;
    for (const int block : tensor ? std::vector<int>{0} : o.blocks) {
      if (!tensor && (block <= 0 || block > kernels::kMaxBlock || o.head_dim % block != 0 || (block & (block - 1))))
        return "--blocks: " + std::to_string(block) + " must be a power of two dividing head_dim " +
               std::to_string(o.head_dim) + " and at most " + std::to_string(kernels::kMaxBlock);
      for (const Distribution& d : dists) grid.push_back({*recipe, block, d});
    }
  }
  std::size_t done = 0, mine = 0;
  for (std::size_t i = 0; i < grid.size(); ++i) mine += static_cast<int>(i % o.shard_count) == o.shard_index;
  for (std::size_t i = 0; i < grid.size(); ++i) {
    if (static_cast<int>(i % o.shard_count) != o.shard_index) continue;
    const QsnrRow row = measure(grid[i], o);
    rows->push_back(row);
    progress << "[" << ++done << "/" << mine << "] " << row.recipe << " block " << row.block << " " << row.distribution
             << (row.rotated ? " (rotated)" : "") << ": " << std::fixed << std::setprecision(2) << row.qsnr_db
             << " dB\n" << std::defaultfloat << std::flush;
  }
  return {};
}

void write_qsnr_csv(const std::vector<QsnrRow>& rows, std::ostream& out) {
  out << "recipe,block,dist,samples,seed,qsnr_db,mse,max_abs_error,clipped_elements,clipped_blocks,crest_mean,"
         "crest_median,rotate\n";
  out << std::setprecision(17);
  for (const QsnrRow& r : rows)
    out << r.recipe << "," << r.block << "," << r.distribution << "," << r.samples << "," << r.seed << "," << r.qsnr_db
        << "," << r.mse << "," << r.max_abs_error << "," << r.clipped_elements << "," << r.clipped_blocks << ","
        << r.crest_mean << "," << r.crest_median << "," << (r.rotated ? "hadamard" : "none") << "\n";
}

void write_qsnr_manifest(const QsnrOptions& o, const std::vector<QsnrRow>& rows, double seconds, std::ostream& out) {
  auto quoted = [](std::string_view s) {
    std::string q = "\"";
    for (const char c : s) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return q + "\"";
  };
  out << "{\n  \"study\": \"qsnr\",\n  \"commit\": " << quoted(KVQ_COMMIT) << ",\n  \"device\": \"cpu\",\n"
      << "  \"seed\": " << o.seed << ",\n  \"samples_requested\": " << o.samples << ",\n  \"head_dim\": " << o.head_dim
      << ",\n  \"rotate\": " << quoted(o.rotate ? "hadamard" : "none") << ",\n  \"shard\": " << quoted(std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count))
      << ",\n  \"qsnr\": \"pooled over the tensor: -10 log10(sum (x - dq)^2 / sum x^2)\",\n  \"rows\": " << rows.size()
      << ",\n  \"seconds\": " << seconds << ",\n  \"distributions\": [";
  for (std::size_t i = 0; i < o.distributions.size(); ++i) out << (i ? ", " : "") << quoted(o.distributions[i]);
  out << "],\n  \"recipes\": [\n";
  for (std::size_t i = 0; i < o.recipes.size(); ++i) {
    const auto r = recipe_from_name(o.recipes[i]);
    out << "    {\"name\": " << quoted(r->name) << ", \"element\": " << quoted(name_of(r->recipe.element))
        << ", \"default_block\": " << r->recipe.block << ", \"scales\": " << quoted(r->scales) << "}"
        << (i + 1 < o.recipes.size() ? ",\n" : "\n");
  }
  out << "  ]\n}\n";
}

}  // namespace kvq::experiments
