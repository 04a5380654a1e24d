// `kvq bench` rows for the fused RoPE + FP8 + paged append kernel and the unfused pair (GPU):
// bytes moved / median time against a same-run device copy of the same bytes (benchmark.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/benchmark.hpp"
#include "kernels/status.hpp"

namespace kvq::kernels {

// MHA (32 Q / 8 KV heads, head_dim 128, all rotated, NHD) and MLA (16 Q heads, 512 + 64) batches
// of `tokens` new tokens in requests of 256, page_size 16; success or an error (kernels/status.hpp).
Status run_rope_benchmarks(DType dtype, std::int64_t tokens, int repeats, std::vector<BenchRow>* rows_out);

}  // namespace kvq::kernels
