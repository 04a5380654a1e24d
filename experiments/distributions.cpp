#include "experiments/distributions.hpp"

#include <cmath>
#include <stdexcept>

#include "kernels/cpu_rows.hpp"

namespace kvq::experiments {

std::optional<Distribution> distribution_from_name(const std::string& name, std::string* error) {
  Distribution d;
  d.name = name;
  using K = Distribution::Kind;
  if (name == "gaussian") return d;
  if (name == "laplace") { d.kind = K::laplace; return d; }
  if (name == "uniform") { d.kind = K::uniform; return d; }
  if (name == "kv-keys") { d.kind = K::kv_keys; return d; }
  if (name == "kv-values") { d.kind = K::kv_values; return d; }
  if (name.rfind("student-t:", 0) == 0) {
    d.kind = K::student_t;
    try {
      std::size_t used = 0;
      d.nu = std::stod(name.substr(10), &used);
      if (used != name.size() - 10) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      *error = "student-t needs a number of degrees of freedom, e.g. student-t:5, got '" + name + "'";
      return std::nullopt;
    }
    if (!(d.nu > 2.0) || !(d.nu <= 1e6)) {  // inf hung the gamma sampler; past 1e6 use gaussian
      *error = "student-t:NU needs 2 < NU <= 1e6 (finite variance; gaussian beyond), got " + name.substr(10);
      return std::nullopt;
    }
    return d;
  }
  *error = "unknown distribution '" + name + "' (gaussian, laplace, student-t:NU, uniform, kv-keys, kv-values)";
  return std::nullopt;
}

std::string distributions_from_names(const std::vector<std::string>& names, const std::vector<std::string>& defaults,
                                     std::vector<Distribution>* out) {
  for (const std::string& name : names.empty() ? defaults : names) {
    std::string error;
    const auto d = distribution_from_name(name, &error);
    if (!d) return "--dist: " + error;
    out->push_back(*d);
  }
  return {};
}

namespace {

// Per-channel standard deviations of the synthetic KV head vectors, normalised to mean square 1.
// Keys: a smooth spread plus 4 outlier channels (x8) in the lowest-frequency RoPE pairs (NeoX
// layout: pair j = (i, i + cols/2), frequency falls with j); values: the smooth spread only.
std::vector<double> channel_sigmas(int cols, bool outliers) {
  std::vector<double> s(cols);
  for (int c = 0; c < cols; ++c) s[c] = 0.5 + 0.5 * (1.0 + std::sin(0.37 * c));  // in [0.5, 1.5]
  if (outliers) {
    const int h = cols / 2;
    for (const int j : {h - 1, h - 2}) {
      s[j] *= 8.0;
      s[j + h] *= 8.0;
    }
  }
  double mean_square = 0;
  for (const double v : s) mean_square += v * v;
  mean_square /= cols;
  for (double& v : s) v /= std::sqrt(mean_square);
  return s;
}

}  // namespace

SamplerTables sampler_tables(const Distribution& d, int cols) {
  SamplerTables t;
  if (d.kind != Distribution::Kind::kv_keys && d.kind != Distribution::Kind::kv_values) return t;
  if (cols <= 0 || cols % 2) throw std::invalid_argument("kv-* distributions need an even head_dim");
  t.sigma = channel_sigmas(cols, d.kind == Distribution::Kind::kv_keys);
  for (int j = 0; j < cols / 2; ++j)  // NeoX RoPE, base 10000: pair j turns 10000^(-2j/cols) / 2 pi a position
    t.turns.push_back(std::pow(10000.0, -2.0 * j / cols) / 6.283185307179586);
  return t;
}

SamplerParams sampler_params(const Distribution& d, int cols, const SamplerTables& tables) {
  return {d.kind, d.nu, cols, tables.sigma.empty() ? nullptr : tables.sigma.data(),
          tables.turns.empty() ? nullptr : tables.turns.data()};
}

std::int64_t pair_count(std::int64_t rows, int cols) { return (rows * cols + 1) / 2; }

std::vector<float> sample(const Distribution& d, std::int64_t rows, int cols, std::uint64_t seed) {
  const SamplerTables tables = sampler_tables(d, cols);
  const SamplerParams params = sampler_params(d, cols, tables);
  const std::int64_t count = rows * cols;
  std::vector<float> x(static_cast<std::size_t>(count));
  kernels::for_ranges(pair_count(rows, cols), count, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t p = first; p < last; ++p) {
      double a = 0, b = 0;
      std::int64_t i = 0, j = 0;
      sample_pair(params, seed, p, &a, &b);
      pair_elements(params, p, &i, &j);
      x[static_cast<std::size_t>(i)] = static_cast<float>(a);
      if (j < count) x[static_cast<std::size_t>(j)] = static_cast<float>(b);
    }
  });
  return x;
}

std::uint64_t rotation_seed(std::uint64_t data_seed, int block) {
  return (data_seed + static_cast<std::uint64_t>(block)) ^ 0x4861646Dull;
}

void rotate_hadamard(std::vector<float>& x, int block, std::uint64_t seed) {
  if (block <= 0 || block > kMaxRotationBlock || (block & (block - 1)) != 0)
    throw std::invalid_argument("Hadamard rotation needs a power-of-two block of at most " +
                                std::to_string(kMaxRotationBlock));
  const std::uint64_t rotation = rotation_seed(seed, block);
  const std::int64_t blocks = static_cast<std::int64_t>(x.size()) / block;
  kernels::for_ranges(blocks, static_cast<std::int64_t>(x.size()), [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t b = first; b < last; ++b) rotate_block(x.data() + b * block, block, rotation, b);
  });
}

}  // namespace kvq::experiments
