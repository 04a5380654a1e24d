// Built without CUDA: the RoPE + append launchers say so.
#include "kernels/rope_append.hpp"
#include "kernels/rope_benchmark.hpp"

namespace kvq::kernels::device {

namespace {
constexpr const char* kNoCuda = "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
}

Status rope_append(const RopeShape&, const RopeInputs&, const QOutputs&, const KvBuffers&, const PageTable&, void*, int) {
  return kNoCuda;
}
Status rope_quantize(const RopeShape&, const RopeInputs&, const QOutputs&, const KvBuffers&, const std::int32_t*,
                     void*, int) {
  return kNoCuda;
}
Status append_paged(const RopeShape&, const KvBuffers&, const KvBuffers&, const PageTable&, void*) { return kNoCuda; }

}  // namespace kvq::kernels::device

namespace kvq::kernels {
Status run_rope_benchmarks(DType, std::int64_t, int, std::vector<BenchRow>*) {
  return "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
}
}  // namespace kvq::kernels
