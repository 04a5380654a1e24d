#include "experiments/distributions.hpp"

#include <cmath>
#include <stdexcept>

namespace kvq::experiments {

std::uint64_t Rng::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }

double Rng::gaussian() {
  if (spare_) {
    const double v = *spare_;
    spare_.reset();
    return v;
  }
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double two_pi = 6.283185307179586;
  spare_ = r * std::sin(two_pi * u2);
  return r * std::cos(two_pi * u2);
}

double Rng::gamma(double shape) {
  if (shape < 1.0) return gamma(shape + 1.0) * std::pow(1.0 - uniform(), 1.0 / shape);
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = gaussian();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

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

std::vector<float> sample(const Distribution& d, std::int64_t rows, int cols, std::uint64_t seed) {
  using K = Distribution::Kind;
  Rng rng(seed);
  std::vector<float> x(static_cast<std::size_t>(rows) * cols);
  if (d.kind == K::kv_keys || d.kind == K::kv_values) {
    if (cols % 2) throw std::invalid_argument("kv-* distributions need an even head_dim");
    const std::vector<double> sigma = channel_sigmas(cols, d.kind == K::kv_keys);
    const int h = cols / 2;
    std::vector<double> v(cols);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) v[c] = sigma[c] * rng.gaussian();
      if (d.kind == K::kv_keys) {  // NeoX RoPE at position r, base 10000 (rotation keeps the variance)
        for (int j = 0; j < h; ++j) {
          const double angle = static_cast<double>(r) * std::pow(10000.0, -2.0 * j / cols);
          const double a = v[j], b = v[j + h], co = std::cos(angle), si = std::sin(angle);
          v[j] = a * co - b * si;
          v[j + h] = b * co + a * si;
        }
      }
      for (int c = 0; c < cols; ++c) x[r * cols + c] = static_cast<float>(v[c]);
    }
    return x;
  }
  for (float& out : x) {
    double v = 0;
    switch (d.kind) {
      case K::gaussian: v = rng.gaussian(); break;
      case K::laplace: {  // b = 1/sqrt(2): variance 2b^2 = 1
        const double u = rng.uniform() - 0.5;
        v = -(1.0 / std::sqrt(2.0)) * (u < 0 ? -1.0 : 1.0) * std::log(1.0 - 2.0 * std::fabs(u));
        break;
      }
      case K::uniform: v = (2.0 * rng.uniform() - 1.0) * std::sqrt(3.0); break;  // U(-sqrt3, sqrt3)
      case K::student_t: {  // z / sqrt(chi2_nu / nu), scaled by sqrt((nu-2)/nu) to unit variance
        const double chi2 = 2.0 * rng.gamma(d.nu / 2.0);
        v = rng.gaussian() / std::sqrt(chi2 / d.nu) * std::sqrt((d.nu - 2.0) / d.nu);
        break;
      }
      default: break;
    }
    out = static_cast<float>(v);
  }
  return x;
}

void rotate_hadamard(std::vector<float>& x, int block, std::uint64_t seed) {
  if (block <= 0 || (block & (block - 1)) != 0) throw std::invalid_argument("Hadamard rotation needs a power-of-two block");
  Rng rng(seed ^ 0x4861646Dull);
  std::vector<double> v(block);
  const double norm = 1.0 / std::sqrt(static_cast<double>(block));
  for (std::size_t start = 0; start + block <= x.size(); start += block) {
    for (int i = 0; i < block; ++i) v[i] = (rng.next() & 1 ? -1.0 : 1.0) * x[start + i];
    for (int len = 1; len < block; len *= 2)  // fast Walsh-Hadamard transform
      for (int i = 0; i < block; i += 2 * len)
        for (int j = i; j < i + len; ++j) {
          const double a = v[j], b = v[j + len];
          v[j] = a + b;
          v[j + len] = a - b;
        }
    for (int i = 0; i < block; ++i) x[start + i] = static_cast<float>(v[i] * norm);
  }
}

}  // namespace kvq::experiments
