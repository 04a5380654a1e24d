// Built when kvq has no CUDA: every GPU property reports a counted skip.
#include "proptests/gpu/format_sweeps.hpp"

namespace kvq::gpu {

DeviceInfo device_info() {
  DeviceInfo info;
  info.why = "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
  return info;
}
namespace {
SweepResult without_cuda() {
  SweepResult r;
  r.error = "built without CUDA";
  return r;
}
}  // namespace

SweepResult sweep_intrinsic(int) { return without_cuda(); }
SweepResult sweep_fast_path(int) { return without_cuda(); }
SweepResult sweep_runs(Format, const Conversion&, const std::uint32_t*, const std::uint16_t*, std::uint32_t,
                       const std::uint32_t*, int) {
  return without_cuda();
}
SweepResult sweep_rcp_approx(const std::uint8_t*, std::size_t) { return without_cuda(); }
SweepResult sweep_div_full(const std::uint8_t*, std::size_t) { return without_cuda(); }
std::string device_codes(Format, const Conversion&, std::uint64_t, std::uint32_t, std::uint16_t*, double*) {
  return "built without CUDA";
}

}  // namespace kvq::gpu
