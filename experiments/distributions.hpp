// Seeded sample distributions for the error studies, all with unit variance (power-of-two scales
// make QSNR depend on the absolute scale, so the scale is fixed). The generators use their own
// integer RNG and formulas (not <random>'s implementation-defined distributions), so a seed
// gives the same samples on every platform and compiler.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvq::experiments {

// splitmix64: a stream of 64-bit words from a seed.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform();   // [0, 1), 53 bits
  double gaussian();  // N(0, 1), Box-Muller (both values used)
  double gamma(double shape);  // Gamma(shape, 1), Marsaglia-Tsang

 private:
  std::uint64_t state_;
  std::optional<double> spare_;
};

struct Distribution {
  enum class Kind { gaussian, laplace, student_t, uniform, kv_keys, kv_values } kind = Kind::gaussian;
  double nu = 0;  // student-t degrees of freedom (> 2 for a finite variance)
  std::string name;
};

inline const std::vector<std::string> kDefaultDistributions{"gaussian", "laplace", "student-t:5",
                                                           "uniform",  "kv-keys", "kv-values"};

// "gaussian", "laplace", "student-t:NU", "uniform", "kv-keys", "kv-values"; nullopt if unknown.
std::optional<Distribution> distribution_from_name(const std::string& name, std::string* error);
// Names to distributions (defaults when names is empty); "" or an error naming --dist.
std::string distributions_from_names(const std::vector<std::string>& names, const std::vector<std::string>& defaults,
                                     std::vector<Distribution>* out);

// rows x cols samples, row-major. kv-* treat a row as one token's head vector (cols = head_dim,
// even) at position = row index; the others are i.i.d. Unit variance by construction.
std::vector<float> sample(const Distribution& d, std::int64_t rows, int cols, std::uint64_t seed);

// In place: each run of `block` values (a power of two) multiplied by H * D / sqrt(block), H the
// Walsh-Hadamard matrix and D a random +-1 diagonal drawn per block from the seed (orthogonal, so
// the variance is unchanged).
void rotate_hadamard(std::vector<float>& x, int block, std::uint64_t seed);

}  // namespace kvq::experiments
