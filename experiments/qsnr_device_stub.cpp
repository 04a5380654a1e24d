// Built without CUDA: the qsnr study's GPU path says so (qsnr_totals reports it before launching).
#include "experiments/qsnr_device.hpp"

namespace kvq::experiments::device {

int gpu_count() { return 0; }
int current_gpu() { return 0; }
std::string open_gpus(int) { return "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)"; }
std::string use_gpu(int) { return "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)"; }

std::string launch_samples(const SamplerParams&, std::uint64_t, std::int64_t, std::int64_t, float*) {
  return "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
}
std::string launch_rotation(float*, std::int64_t, int, std::uint64_t) {
  return "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
}

std::string launch_median_select(const double*, std::int64_t, unsigned*, SelectState*) {
  return "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
}

std::string launch_qsnr_sums(const Recipe&, int, const float*, const float*, std::int64_t, BlockPartial*, ChunkSum*, double*) {
  return "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
}

}  // namespace kvq::experiments::device
