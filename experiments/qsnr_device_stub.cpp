// Built without CUDA: the qsnr study's GPU path says so (qsnr_totals reports it before launching).
#include "experiments/qsnr_device.hpp"

namespace kvq::experiments::device {

int gpu_count() { return 0; }
std::string use_gpu(int) { return "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)"; }

std::string launch_qsnr_sums(const Recipe&, int, float, const float*, std::int64_t, BlockPartial*, ChunkSum*, double*) {
  return "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
}

}  // namespace kvq::experiments::device
