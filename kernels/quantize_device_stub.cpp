// Built without CUDA: the GPU entry points say so, and GPU properties count a skip.
#include "kernels/lane_quantize.hpp"
#include "kernels/port_compare.hpp"
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
Status select(int) { return kNoCuda; }
Status allocate_on(void**, std::size_t, void*) { return kNoCuda; }
void release_on(void*, void*) {}
Status download_on(void*, const void*, std::size_t, void*) { return kNoCuda; }
Status allocate_mapped(void**, void**, std::size_t) { return kNoCuda; }
void release_mapped(void*) {}
Status wait_for(void*) { return kNoCuda; }
Status quantize_compare(const QuantizeShape&, DType, const void*, float, const std::uint8_t*, const std::uint8_t*,
                        const CompareCounters&, bool* fused, void*) {
  *fused = false;
  return kNoCuda;
}
Status compare_port(const QuantizeShape&, float, const std::uint8_t*, const std::uint8_t*, const DevicePort&,
                    const CompareCounters&, void*) {
  return kNoCuda;
}

}  // namespace kvq::kernels::device
