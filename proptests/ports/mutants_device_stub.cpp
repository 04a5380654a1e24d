// Without CUDA: the device mutants report that there is no device (their properties are skipped).
#include "proptests/ports/mutant_bodies.hpp"

namespace kvq::ports::device {

Status swap_nibbles(std::uint8_t*, std::int64_t, void*) { return "built without CUDA"; }
Status dequantize(const kernels::QuantizeShape&, const MutantBugs&, const std::uint8_t*, const std::uint8_t*, float,
                  kernels::DType, void*, void*) {
  return "built without CUDA";
}
Status requantize_e4m3(const kernels::QuantizeShape&, WorkspaceRounding, const std::uint8_t*, const std::uint8_t*, float,
                       std::uint8_t*, void*) {
  return "built without CUDA";
}

}  // namespace kvq::ports::device
