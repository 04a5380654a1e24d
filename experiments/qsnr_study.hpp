// `kvq study qsnr`: quantization error of every recipe x block size x distribution on the same
// seeded samples (REFERENCE.md section 8 definitions): pooled QSNR, MSE, max |error|, clipping,
// block crest factors. CPU, through the kernels' CPU twins (the code the GPU kernels run).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace kvq::experiments {

struct QsnrOptions {
  std::vector<std::string> recipes;        // names as `kvq recipes` prints them
  std::vector<int> blocks{16, 32};         // block recipes; per-tensor recipes run once (block 0)
  std::vector<std::string> distributions;  // distribution_from_name
  std::int64_t samples = std::int64_t{1} << 20;
  std::uint64_t seed = 20261122;
  bool rotate = false;  // random Hadamard rotation of each block before quantization
  int head_dim = 128;   // samples are rows of head_dim values
  int shard_index = 0, shard_count = 1;  // run configurations with index % count == index
};

struct QsnrRow {
  std::string recipe;
  int block = 0;
  std::string distribution;
  bool rotated = false;
  std::int64_t samples = 0;
  std::uint64_t seed = 0;
  double qsnr_db = 0, mse = 0, max_abs_error = 0;
  double clipped_elements = 0;  // fraction of elements beyond the largest value of their block
  double clipped_blocks = 0;    // fraction of blocks with a clipped element
  double crest_mean = 0, crest_median = 0;  // max|x| / rms(x) per block (blocks of 16 per tensor)
};

// Validates the options ("" or a message naming the argument), then runs the configurations of
// this shard, printing one progress line each to `progress`.
std::string run_qsnr_study(const QsnrOptions& o, std::ostream& progress, std::vector<QsnrRow>* rows);

void write_qsnr_csv(const std::vector<QsnrRow>& rows, std::ostream& out);
void write_qsnr_manifest(const QsnrOptions& o, const std::vector<QsnrRow>& rows, double seconds, std::ostream& out);

}  // namespace kvq::experiments
