// The lane-split quantize kernel (kernels/lane_quantize.hpp): eight lanes a 128-element block,
// sixteen elements each (two 16-byte loads of BF16/FP16, one 16-byte store of codes); the block
// max by three shuffles among the eight lanes; lane 0 stores the scale. Its own translation unit, so the
// 4-bit packed paths of quantize_device.cu do not share its compile.
#include <cuda_runtime.h>

#include "kernels/device_launch.cuh"
#include "kernels/lane_quantize.hpp"

namespace kvq::kernels {
namespace {

constexpr int kLanes = 128 / kLaneSpan;  // a block's lanes: aligned groups of eight in a warp
static_assert(32 % kLanes == 0);

template <DType T>
__global__ void quantize_lanes_kernel(QuantizeShape shape, const void* x, float g, std::uint8_t* codes,
                                      std::uint8_t* scales) {
  QuantizeShape s = shape;
  s.recipe.element = FormatId::e4m3fn;  // lane_split recipes as constants where the code branches on them
  s.recipe.scale = BlockScale::e8m0_pow2;
  s.recipe.block = 128;
  const std::int64_t total = s.rows * (s.cols / kLaneSpan);  // a multiple of kLanes: whole blocks
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;  // blockDim: a multiple of 32
  // The lanes of a block run the loop the same number of times (k and stride step by multiples of
  // kLanes), so the group's mask holds every lane it names.
  const unsigned group = ((1u << kLanes) - 1u) << (threadIdx.x & (32u - kLanes));
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < total; k += stride) {
    float v[kLaneSpan];
    io::load_values(T, x, kLaneSpan * k, kLaneSpan, v);
    SpanMax m = span_max(v);
    KVQ_UNROLL
    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
      const SpanMax other{__shfl_xor_sync(group, m.max, offset), __shfl_xor_sync(group, static_cast<int>(m.nan), offset) != 0};
      m = combine(m, other);
    }
    const BlockPlan p = plan_block(s.recipe, g, m.max, m.nan);
    std::uint32_t words[kLaneSpan / 4];
    encode_span(s.recipe, p, v, words);
    io::store_words(codes + kLaneSpan * k, words, kLaneSpan / 4);
    if (k % kLanes == 0) scales[k / kLanes] = p.scale_code;
  }
}

}  // namespace

namespace device {

std::string quantize_lanes(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                           std::uint8_t* scales, void* stream) {
  if (auto e = validate(s); !e.empty()) return e;
  if (!lane_split(s))
    return "recipe: the lane-split quantizer takes E4M3 elements with E8M0 blocks of 128";
  const std::int64_t work = s.rows * (s.cols / kLaneSpan);
  if (work == 0) return {};
  constexpr int kThreads = 256;
  const int grid = launch::grid_for(work, kThreads);
  const auto st = static_cast<cudaStream_t>(stream);
  switch (input) {
    case DType::fp32: quantize_lanes_kernel<DType::fp32><<<grid, kThreads, 0, st>>>(s, x, g, codes, scales); break;
    case DType::bf16: quantize_lanes_kernel<DType::bf16><<<grid, kThreads, 0, st>>>(s, x, g, codes, scales); break;
    case DType::fp16: quantize_lanes_kernel<DType::fp16><<<grid, kThreads, 0, st>>>(s, x, g, codes, scales); break;
  }
  return launch::status(cudaGetLastError());
}

}  // namespace device
}  // namespace kvq::kernels
