#include "experiments/studies.hpp"

#include <stdexcept>

#include "experiments/distributions.hpp"
#include "experiments/qsnr_device.hpp"

namespace kvq::experiments {

SampleCache::Samples samples_of(const Distribution& d, int rotation_block, const StudyOptions& o, SampleCache& cache) {
  return cache.get(d.name + "/" + std::to_string(rotation_block), [&] {
    const std::uint64_t seed = data_seed(o.seed, d.name);
    std::vector<float> x = sample(d, (o.samples + o.head_dim - 1) / o.head_dim, o.head_dim, seed);
    if (rotation_block) rotate_hadamard(x, rotation_block, seed);
    return x;
  });
}

void select_study_gpu(const StudyOptions& o, std::size_t index) {
  const int count = o.device == "cuda" ? device::gpu_count() : 0;
  if (count <= 0) return;
  if (const std::string e = device::use_gpu(static_cast<int>(index % static_cast<std::size_t>(count))); !e.empty())
    throw std::runtime_error(e);
}

const std::vector<std::pair<std::string, StudyFactory>>& study_factories() {
  static const std::vector<std::pair<std::string, StudyFactory>> factories{
      {"qsnr", make_qsnr_study},         {"crest", make_crest_study},   {"scales", make_scales_study},
      {"attention", make_attention_study}, {"errors", make_errors_study}};
  return factories;
}

}  // namespace kvq::experiments
