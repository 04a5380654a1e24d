// Built without CUDA: there is nothing to time.
#include "kernels/benchmark.hpp"

namespace kvq::kernels {

Status run_benchmarks(const std::vector<BenchCase>&, DType, std::int64_t, std::int64_t, int,
                      std::vector<BenchRow>*, std::string*, ScaleSwizzle) {
  return "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
}

Status run_mla_benchmarks(int, std::vector<BenchRow>*) {
  return "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
}

}  // namespace kvq::kernels
