// Built without CUDA: the MLA and workspace launchers say so (GPU properties count a skip).
#include "kernels/mla_kernels.hpp"

namespace kvq::kernels::device {

namespace {
constexpr const char* kNoCuda = "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
}

Status mla_requantize_576_to_656(std::int64_t, std::int64_t, const std::uint8_t*, float, KScale, std::uint8_t*, void*) {
  return kNoCuda;
}
Status mla_quantize(const MlaCacheShape&, const std::uint16_t*, const std::int64_t*, std::int64_t, std::uint8_t*, void*) {
  return kNoCuda;
}
Status mla_dequantize(const MlaCacheShape&, const std::uint8_t*, float, DType, void*, void*) { return kNoCuda; }
Status nvfp4_paged_to_workspace(const WorkspaceBatch&, const std::uint8_t*, const std::int32_t*, const std::int32_t*,
                                float, float, std::uint8_t*, std::uint8_t*, void*) {
  return kNoCuda;
}

}  // namespace kvq::kernels::device
