// An example plug-in (proptests/ports/kvq_port.h) that wraps kvq's own kernels, as a port author's library
// would wrap theirs. Built three ways by proptests/ports/CMakeLists.txt:
//   kvq_port_example         host pointers, kvq's CPU twins (recipe nvfp4): passes
//   kvq_port_example_broken  the same with ties rounded up (a bug class of docs/ports.md): caught
//   kvq_port_example_cuda    device pointers, kvq's CUDA kernels (built with CUDA only): passes
#include <string>

#include "formats/recipe_names.hpp"
#include "kernels/quantize.hpp"
#include "proptests/ports/kvq_port.h"

namespace {

thread_local std::string last_error;

kvq::Recipe port_recipe() {
  kvq::Recipe r = kvq::recipe_from_name("nvfp4")->recipe;
#if defined(KVQ_PORT_EXAMPLE_BROKEN)
  r.element_rounding = kvq::Rounding::nearest_away;  // the bug this example ships with
#endif
  return r;
}

bool shape_of(std::int64_t rows, std::int64_t cols, int block, kvq::kernels::QuantizeShape* s) {
  *s = kvq::kernels::QuantizeShape{port_recipe(), rows, cols};
  if (block != s->block()) {
    last_error = "block " + std::to_string(block) + " is not this port's " + std::to_string(s->block());
    return false;
  }
  last_error = kvq::kernels::validate(*s).message();
  return last_error.empty();
}

kvq::kernels::DType dtype_of(int d) {
  return d == KVQ_PORT_BF16 ? kvq::kernels::DType::bf16 : (d == KVQ_PORT_FP16 ? kvq::kernels::DType::fp16 : kvq::kernels::DType::fp32);
}

int status(const kvq::Status& result) {
  last_error = result.message();
  return result.ok() ? 0 : 1;
}

}  // namespace

extern "C" {

int kvq_port_abi_version(void) { return KVQ_PORT_ABI_VERSION; }
const char* kvq_port_recipe(void) { return "nvfp4"; }
const char* kvq_port_last_error(void) { return last_error.c_str(); }

#if defined(KVQ_PORT_EXAMPLE_DEVICE)
int kvq_port_memory(void) { return KVQ_PORT_DEVICE; }
int kvq_port_quantize(const void* x, int dtype, int64_t rows, int64_t cols, int block, float global_scale, uint8_t* codes,
                      uint8_t* scales, void* stream) {
  kvq::kernels::QuantizeShape s;
  if (!shape_of(rows, cols, block, &s)) return 2;
  return status(kvq::kernels::device::quantize(s, dtype_of(dtype), x, global_scale, codes, scales, stream));
}
int kvq_port_dequantize(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, int block,
                        float global_scale, int dtype, void* y, void* stream) {
  kvq::kernels::QuantizeShape s;
  if (!shape_of(rows, cols, block, &s)) return 2;
  return status(kvq::kernels::device::dequantize(s, codes, scales, global_scale, dtype_of(dtype), y, stream));
}
int kvq_port_requantize_e4m3(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, int block,
                             float factor, uint8_t* out, void* stream) {
  kvq::kernels::QuantizeShape s;
  if (!shape_of(rows, cols, block, &s)) return 2;
  return status(kvq::kernels::device::requantize_e4m3(s, codes, scales, factor, out, stream));
}
#else
int kvq_port_memory(void) { return KVQ_PORT_HOST; }
int kvq_port_quantize(const void* x, int dtype, int64_t rows, int64_t cols, int block, float global_scale, uint8_t* codes,
                      uint8_t* scales, void*) {
  kvq::kernels::QuantizeShape s;
  if (!shape_of(rows, cols, block, &s)) return 2;
  return status(kvq::kernels::quantize_cpu(s, dtype_of(dtype), x, global_scale, codes, scales));
}
int kvq_port_dequantize(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, int block,
                        float global_scale, int dtype, void* y, void*) {
  kvq::kernels::QuantizeShape s;
  if (!shape_of(rows, cols, block, &s)) return 2;
  return status(kvq::kernels::dequantize_cpu(s, codes, scales, global_scale, dtype_of(dtype), y));
}
int kvq_port_requantize_e4m3(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, int block,
                             float factor, uint8_t* out, void*) {
  kvq::kernels::QuantizeShape s;
  if (!shape_of(rows, cols, block, &s)) return 2;
  return status(kvq::kernels::requantize_e4m3_cpu(s, codes, scales, factor, out));
}
#endif

}  // extern "C"
