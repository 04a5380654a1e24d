// The lane-split quantize kernel (kernels/lane_quantize.hpp): kBlock / 16 lanes a block, sixteen
// elements each (two 16-byte loads of BF16/FP16, four of FP32; one 16- or 8-byte store of codes);
// the block max by shuffles among the block's lanes; the block's first lane stores the scale. Its
// own translation unit, so the per-block paths of quantize_device.cu do not share its compile.
#include <cuda_runtime.h>

#include "kernels/device_launch.cuh"
#include "kernels/lane_quantize.hpp"

namespace kvq::kernels {
namespace {

// V: an engine variant's index in kLaneVariants (its whole recipe a constant), or -1 (the
// reference rules: the fields the code branches on as constants).
template <FormatId E, int kBlock, DType T, int V = -1>
__global__ void quantize_lanes_kernel(QuantizeShape shape, const void* x, std::uint8_t* codes, std::uint8_t* scales) {
  constexpr int kLanes = kBlock / kLaneSpan;  // a block's lanes: aligned groups in a warp
  static_assert(32 % kLanes == 0);
  QuantizeShape s = shape;
  if constexpr (V >= 0) {
    constexpr Recipe kVariant = kLaneVariantRecipe<V>;
    s.recipe = kVariant;
  } else {
    s.recipe = with_reference_arithmetic(s.recipe);
    s.recipe.element = E;
    s.recipe.scale = BlockScale::e8m0_pow2;
    s.recipe.block = kBlock;
    if (kBlock == 32) s.recipe.element_rounding = Rounding::nearest_even;
  }
  constexpr int kWords = format_of(E).bits() == 4 ? kLaneSpan / 8 : kLaneSpan / 4;
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
    const BlockPlan p = lane_plan(s.recipe, m);
    std::uint32_t words[kLaneSpan / 4];
    encode_span(s, p, m, v, words);
    io::store_words(codes + 4 * kWords * k, words, kWords);
    if (k % kLanes == 0) scales[k / kLanes] = p.scale_code;
  }
}

template <FormatId E, int kBlock, int V = -1>
cudaError_t launch_lanes(const QuantizeShape& s, DType input, const void* x, std::uint8_t* codes, std::uint8_t* scales,
                         cudaStream_t st) {
  constexpr int kThreads = 256;
  // One span a thread; 128 blocks an SM with fast memory (docs/performance.md "Grids")
  const int grid = launch::grid_for(s.rows * (s.cols / kLaneSpan), kThreads, launch::GridCap(launch::kOnePass, 128));
  switch (input) {
    case DType::fp32: quantize_lanes_kernel<E, kBlock, DType::fp32, V><<<grid, kThreads, 0, st>>>(s, x, codes, scales); break;
    case DType::bf16:
    case DType::fp16:
      if constexpr (E == FormatId::e4m3fn) {  // tiles of 128, MXFP8 blocks of 32, the lane variants
        if (input == DType::bf16) quantize_lanes_kernel<E, kBlock, DType::bf16, V><<<grid, kThreads, 0, st>>>(s, x, codes, scales);
        else quantize_lanes_kernel<E, kBlock, DType::fp16, V><<<grid, kThreads, 0, st>>>(s, x, codes, scales);
        break;
      } else {
        return cudaErrorInvalidValue;  // other 16-bit blocks of 32 run per block (quantize_device.cu)
      }
  }
  return cudaGetLastError();
}

}  // namespace

namespace device {

// The kernel of engine variant `variant` (lane_variant_of: its index in kLaneVariants, or -1).
template <int V = 0>
cudaError_t launch_lane_variant(int variant, const QuantizeShape& s, DType input, const void* x, std::uint8_t* codes,
                                std::uint8_t* scales, cudaStream_t st) {
  if constexpr (V == kLaneVariantCount) {
    return cudaErrorInvalidValue;
  } else {
    if (variant == V)
      return launch_lanes<kLaneVariantRecipe<V>.element, kLaneVariantRecipe<V>.block, V>(s, input, x, codes, scales, st);
    return launch_lane_variant<V + 1>(variant, s, input, x, codes, scales, st);
  }
}

Status quantize_lanes(const QuantizeShape& s, DType input, const void* x, float, std::uint8_t* codes,
                      std::uint8_t* scales, void* stream) {
  if (auto e = validate_lane_split(s, input); !e.ok()) return e;
  if (s.rows * s.cols == 0) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaErrorInvalidValue;
  if (is_engine_variant(s.recipe)) {
    e = launch_lane_variant(lane_variant_of(s.recipe), s, input, x, codes, scales, st);
  } else if (s.recipe.block == 128) {
    e = launch_lanes<FormatId::e4m3fn, 128>(s, input, x, codes, scales, st);
  } else {
    switch (s.recipe.element) {  // block 32: FP32 input, or E4M3 from any (lane_split)
      case FormatId::e2m1: e = launch_lanes<FormatId::e2m1, 32>(s, input, x, codes, scales, st); break;
      case FormatId::int4: e = launch_lanes<FormatId::int4, 32>(s, input, x, codes, scales, st); break;
      case FormatId::e4m3fn: e = launch_lanes<FormatId::e4m3fn, 32>(s, input, x, codes, scales, st); break;
      case FormatId::int8: e = launch_lanes<FormatId::int8, 32>(s, input, x, codes, scales, st); break;
      default: break;
    }
  }
  return launch::status(e);
}

}  // namespace device
}  // namespace kvq::kernels
