// Seeded sample distributions for the error studies, all with unit variance (power-of-two scales
// make QSNR depend on the absolute scale, so the scale is fixed). The samples are samplers.hpp's
// pairs (their own integer RNG and transforms of correctly rounded operations, not <random>'s
// implementation-defined distributions or libm), so a seed gives the same samples on every platform
// and compiler, and on a GPU the host's (experiments/qsnr_device.hpp); the kv-* tables come from the
// host's libm (docs/studies.md "Samples").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "experiments/samplers.hpp"

namespace kvq::experiments {

struct Distribution {
  using Kind = SampleKind;
  Kind kind = Kind::gaussian;
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

// The tables a distribution's pairs read (kv kinds: per-channel deviations and per-pair RoPE turns
// for head size cols; empty otherwise), computed on the host, and the parameters pointing at them.
struct SamplerTables {
  std::vector<double> sigma, turns;
};
SamplerTables sampler_tables(const Distribution& d, int cols);
SamplerParams sampler_params(const Distribution& d, int cols, const SamplerTables& tables);
// The pairs of rows x cols samples (the last pair's second element lies past an odd count).
std::int64_t pair_count(std::int64_t rows, int cols);

// rows x cols samples, row-major. kv-* treat a row as one token's head vector (cols = head_dim,
// even) at position = row index; the others are i.i.d. Unit variance by construction.
std::vector<float> sample(const Distribution& d, std::int64_t rows, int cols, std::uint64_t seed);

// In place: each run of `block` values (a power of two up to kMaxRotationBlock) multiplied by
// H * D / sqrt(block), H the Walsh-Hadamard matrix and D a random +-1 diagonal drawn per block from
// the seed (orthogonal, so the variance is unchanged): samplers.hpp's rotate_block, block by block.
void rotate_hadamard(std::vector<float>& x, int block, std::uint64_t seed);
// The seed rotate_hadamard gives rotate_block (the data's seed and the block size mixed in).
std::uint64_t rotation_seed(std::uint64_t data_seed, int block);

}  // namespace kvq::experiments
