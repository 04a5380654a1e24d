// Quantize / dequantize of a [rows, cols] tensor under a recipe: the CPU twin and the GPU entry
// points (quantize_device.cu, or a stub without CUDA). The layout: kernels/quantize_layout.hpp;
// the per-block code both run: kernels/block_quantize.hpp, kernels/block_dequantize.hpp; memory
// access: kernels/io.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/block_dequantize.hpp"
#include "kernels/block_quantize.hpp"
#include "kernels/io.hpp"
#include "kernels/quantize_layout.hpp"
#include "kernels/status.hpp"

namespace kvq::kernels {

// CPU twins: the same element code as the kernels (formats/recipes.hpp). Return success or an error (kernels/status.hpp).
Status quantize_cpu(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                    std::uint8_t* scales);
Status dequantize_cpu(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                      DType output, void* y);
float amax_cpu(DType input, const void* x, std::int64_t count);  // max |x|, NaN ignored (fmaxf)
// The prefill workspace: rows * cols E4M3 codes from quantized codes and scales (requantize_e4m3);
// factor = tensor decode scale (1 for power-of-two recipes) / workspace decode scale, in FP32.
Status requantize_e4m3_cpu(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales,
                           float factor, std::uint8_t* out);

// GPU: device pointers, an opaque cudaStream_t; returns success or the CUDA error / validation message (kernels/status.hpp).
namespace device {
bool available(std::string* why);
Status quantize(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                std::uint8_t* scales, void* stream);
Status dequantize(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                  DType output, void* y, void* stream);
Status amax(DType input, const void* x, std::int64_t count, float* result, void* stream);  // result: device
Status requantize_e4m3(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float factor,
                       std::uint8_t* out, void* stream);
// Memory, for host code that has no CUDA headers (tests, the CLI).
Status allocate(void** p, std::size_t bytes);
void release(void* p);
Status upload(void* device_dst, const void* host_src, std::size_t bytes);
Status download(void* host_dst, const void* device_src, std::size_t bytes);
Status fill(void* device_dst, std::uint8_t byte, std::size_t bytes);
Status synchronize();
// The same, for a caller's stream (the Python package's CUDA tensors, docs/python.md): select the
// device of its tensors; stream-ordered allocation from a pool of kvq's own per device, which
// keeps its memory for the next call, and release; a copy to the host that returns when the stream
// has reached it.
Status select(int ordinal);
Status allocate_on(void** p, std::size_t bytes, void* stream);
void release_on(void* p, void* stream);
Status download_on(void* host_dst, const void* device_src, std::size_t bytes, void* stream);
// Page-locked host memory mapped into the devices' address space: kernels write *device_view, the
// host reads *host once the stream is done (wait_for: returns when the stream has done its work).
Status allocate_mapped(void** host, void** device_view, std::size_t bytes);
void release_mapped(void* host);
Status wait_for(void* stream);
}  // namespace device

}  // namespace kvq::kernels

