// The studies of `kvq study` (docs/studies.md), each built as a grid for the one runner
// (study_runner.hpp): qsnr, crest, scales, attention, errors.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "experiments/sample_cache.hpp"
#include "experiments/study_runner.hpp"

namespace kvq::experiments {

struct StudyOptions {
  std::vector<std::string> recipes;        // names as `kvq recipes` prints them; empty: the study's default
  std::vector<int> blocks{16, 32};         // block recipes; per-tensor recipes run once (block 0)
  std::vector<std::string> distributions;  // distribution_from_name; empty: the study's default
  std::int64_t samples = std::int64_t{1} << 20;
  std::uint64_t seed = 20261122;
  bool rotate = false;                     // random Hadamard rotation of each block before quantization
  int head_dim = 128;                      // samples are rows of head_dim values
  std::vector<int> seq_lens{512, 2048, 8192};  // attention: keys per head
  int heads = 4;                           // attention: independent heads per configuration
  int queries = 16;                        // attention: query rows per head
  std::string device = "cpu";              // qsnr: "cpu" or "cuda" (the same sums on the GPU)
};

struct Distribution;

// The samples of a distribution at the options' size and seed (rows of head_dim values), each
// block of rotation_block values Hadamard-rotated when it is not 0; drawn once per cache.
SampleCache::Samples samples_of(const Distribution& d, int rotation_block, const StudyOptions& o, SampleCache& cache);

using StudyFactory = std::function<std::string(const StudyOptions&, StudyGrid*)>;

// "" and the grid, or a message naming the bad argument.
std::string make_qsnr_study(const StudyOptions& o, StudyGrid* grid);
std::string make_crest_study(const StudyOptions& o, StudyGrid* grid);
std::string make_scales_study(const StudyOptions& o, StudyGrid* grid);
std::string make_attention_study(const StudyOptions& o, StudyGrid* grid);
std::string make_errors_study(const StudyOptions& o, StudyGrid* grid);

// With --device cuda: this host thread's GPU for configuration `index` (GPU index % count, so a
// study spreads over every visible GPU); throws on a CUDA error. Does nothing on the CPU.
void select_study_gpu(const StudyOptions& o, std::size_t index);

// name -> factory, in the order `kvq study all` runs them.
const std::vector<std::pair<std::string, StudyFactory>>& study_factories();

}  // namespace kvq::experiments
