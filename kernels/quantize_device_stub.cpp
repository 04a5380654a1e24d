// Built without CUDA: the GPU entry points say so, and GPU properties count a skip.
#include "kernels/lane_quantize.hpp"
#include "kernels/quantize.hpp"

namespace kvq::kernels::device {

namespace {
constexpr const char* kNoCuda = "kvq was built without CUDA (nvcc not found or KVQ_CUDA=OFF)";
}

bool available(std::string* why) {
  *why = kNoCuda;
  return false;
}
Status quantize(const QuantizeShape&, DType, const void*, float, std::uint8_t*, std::uint8_t*, void*) {
  return kNoCuda;
}
Status quantize_lanes(const QuantizeShape&, DType, const void*, float, std::uint8_t*, std::uint8_t*, void*) {
  return kNoCuda;
}
Status dequantize(const QuantizeShape&, const std::uint8_t*, const std::uint8_t*, float, DType, void*, void*) {
  return kNoCuda;
}
Status amax(DType, const void*, std::int64_t, float*, void*) { return kNoCuda; }
Status requantize_e4m3(const QuantizeShape&, const std::uint8_t*, const std::uint8_t*, float, std::uint8_t*, void*) {
  return kNoCuda;
}
Status allocate(void**, std::size_t) { return kNoCuda; }
void release(void*) {}
Status upload(void*, const void*, std::size_t) { return kNoCuda; }
Status download(void*, const void*, std::size_t) { return kNoCuda; }
Status fill(void*, std::uint8_t, std::size_t) { return kNoCuda; }
Status synchronize() { return kNoCuda; }

}  // namespace kvq::kernels::device
