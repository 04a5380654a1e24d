// Quantize, dequantize and amax kernels: the per-block code is kernels/quantize.hpp (the same
// the CPU twin runs). One thread per block, 16-byte loads and stores, grid-stride. The common
// recipe shapes are instantiated with the element format, scale kind, block size and input
// type as constants; anything else runs the generic instantiation (same code, runtime shape).
#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>

#include "formats/recipe_names.hpp"
#include "kernels/device_launch.cuh"
#include "kernels/code_table.cuh"
#include "kernels/quantize_kernel.cuh"
#include "kernels/lane_quantize.hpp"
#include "kernels/quantize.hpp"

namespace kvq::kernels {
namespace {

using namespace quantize_shared;

template <int C, DType T>
__global__ void quantize_kernel(QuantizeShape shape, const void* x, float g, std::uint8_t* codes, std::uint8_t* scales) {
  quantize_body<C, T>(shape, x, g, codes, scales);
}
// 4over6 with 7 thread blocks of 128 an SM (72 registers, 32 bytes of stack) and the pipelined
// 16-bit loop: the fastest measured; (128, 8) spills 104 bytes and runs slower (docs/performance.md).
template <int C, DType T>
__global__ void __launch_bounds__(128, 7)
    quantize_kernel_occupied(QuantizeShape shape, const void* x, float g, std::uint8_t* codes, std::uint8_t* scales) {
  quantize_body<C, T>(shape, x, g, codes, scales);
}


// Fixed shapes: a thread per span of kDequantizeSpan elements (every fixed block is a multiple),
// kDequantizeSpanFp32 for FP32 output: 16 bytes of output a thread, so a warp reads and writes
// contiguous bytes (spans of 8, two 16-byte stores at a 32-byte lane stride, half-fill every sector:
// docs/performance.md); the generic shape: a thread per block.
constexpr bool spans_divide_fixed_blocks() {
  for (const Config& c : kFixed)
    if (c.block % kDequantizeSpan || c.block % kDequantizeSpanFp32) return false;
  return true;
}
static_assert(spans_divide_fixed_blocks(), "every fixed block is a whole number of dequantize spans");
template <int C, DType T>
constexpr int kSpanOf = C == kGeneric ? 0 : T == DType::fp32 ? kDequantizeSpanFp32 : kDequantizeSpan;
// Fixed 4-bit configurations (all with block scales): a span is one word of eight codes (FP32
// output: half a word, four codes).
template <int C>
constexpr bool kNibbleWords = C != kGeneric && format_of(kFixed[C].element).bits() == 4 && kDequantizeSpan == 8 &&
                              kDequantizeSpanFp32 == 4;
// Fixed 8-bit configurations (E4M3, INT8 codes): a span is two words of codes (FP32 output: one).
template <int C>
constexpr bool kByteWords = C != kGeneric && byte_span_codes(kFixed[C].element) && kDequantizeSpan == 8 &&
                            kDequantizeSpanFp32 == 4;
template <int C>
constexpr bool kScalesOf = C == kGeneric || kFixed[C].scale != BlockScale::tensor_only;
template <int C, DType T>
__device__ inline void dequantize_spans(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales,
                                        float g, void* y) {
  const int n = C == kGeneric ? s.block() : kSpanOf<C, T>;
  const int spans_per_block = s.block() / n;
  const std::int64_t total = s.rows * (s.cols / n);
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t block = k / spans_per_block;  // dense rows: block `block` of row 0
    if constexpr (kNibbleWords<C> && T == DType::fp32) {  // span k is half word k
      dequantize_nibbles<kDequantizeSpanFp32>(s.recipe, io::load_half_word(codes + 2 * k), scales[block], g, T, y,
                                              kDequantizeSpanFp32 * k);
      continue;
    } else if constexpr (kNibbleWords<C>) {  // span k is code word k
      dequantize_nibble_word(s.recipe, codes + 4 * k, scales[block], g, T, y, kDequantizeSpan * k);
      continue;
    } else if constexpr (kByteWords<C>) {  // span k is code word k (FP32 output), or word pair k
      constexpr int kCodes = kSpanOf<C, T>;
      std::uint32_t words[2];
      if constexpr (kCodes == 8) {
        io::load_word_pair(codes + 8 * k, words);
      } else {
        words[0] = io::load_word(codes + 4 * k);
      }
      dequantize_bytes<kCodes>(s.recipe, words, kScalesOf<C> ? scales[block] : 0, g, T, y, kCodes * k);
      continue;
    }
    const int first = static_cast<int>(k - block * spans_per_block) * n;
    dequantize_span<kSpanOf<C, T>>(s, codes, scales, g, T, y, 0, block, first, n);
  }
}

// Fixed blocks of 16 4-bit codes under a divisor tensor parameter (encode or amax: ~20
// instructions an element for the per-element division), to BF16 or FP16: decoded by magnitude
// (formats/fast_decode.hpp nibble_entries). A thread per word as dequantize_spans, the two words of
// a block in lanes 2i and 2i + 1: each lane computes four of the block's eight entries (the even
// lane magnitudes 0-3, the odd one 4-7) and the pair trades them. A warp steps as one (the trade
// needs both lanes); spans are whole blocks, so a pair is inside the tensor or outside it whole.
// Code and output alignment as the caller's usual case (4 and 16 bytes).
template <int C, DType T>
constexpr bool kDecodesByEntries = kNibbleWords<C> && T != DType::fp32 && kFixed[C].block == 16 &&
                                   kFixed[C].scale == BlockScale::e4m3_two_level &&
                                   kFixed[C].tensor_param != TensorParam::decode;
template <DType T>
__device__ inline void decode_by_entries(const Recipe& r, std::uint32_t w, std::uint8_t scale, bool inside, float g,
                                         void* y, std::int64_t k) {
  const bool odd = threadIdx.x & 1u;
  const NibbleScaling scaling = nibble_scaling(r, scale, g);
  const NibbleEntries own = nibble_entries(scaling, nibble_format(r.element).mag_shift, odd ? 4 : 0, T == DType::fp16);
  const NibbleEntries partner{__shfl_xor_sync(0xffffffffu, own.low, 1), __shfl_xor_sync(0xffffffffu, own.high, 1),
                              scaling.unsigned_zero ? __shfl_xor_sync(0xffffffffu, own.signs, 1) : own.signs};
  if (!inside) return;
  if (!scaling.nan_free) {  // the general element code (the entries are unused)
    dequantize_nibbles<8>(r, w, scale, g, T, y, kDequantizeSpan * k);
    return;
  }
  std::uint32_t out[4];
  nibble_word_from_entries(w, own, partner, odd, scaling.unsigned_zero, out);
  __stcs(static_cast<uint4*>(y) + k, uint4{out[0], out[1], out[2], out[3]});
}
template <int C, DType T>
__device__ inline void dequantize_by_entries(const QuantizeShape& s, const std::uint8_t* codes,
                                             const std::uint8_t* scales, float g, void* y) {
  static_assert(kDequantizeSpan == 8, "a block of 16 is two words, one a lane");
  const std::int64_t total = s.rows * (s.cols / kDequantizeSpan);
  const unsigned lane = threadIdx.x % 32u;
  for (std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + (threadIdx.x - lane); first < total;
       first += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {  // the warp's first word
    const std::int64_t k = first + lane;
    const bool inside = k < total;
    const std::uint32_t w = inside ? io::load_word<true, true>(codes + 4 * k) : 0u;
    decode_by_entries<T>(s.recipe, w, inside ? scales[k / 2] : std::uint8_t{0}, inside, g, y, k);
  }
}

template <int C, DType T>
__device__ __forceinline__ void dequantize_body(const QuantizeShape& shape, const std::uint8_t* codes,
                                                const std::uint8_t* scales, float g, void* y) {
  const QuantizeShape s = specialise<C>(shape);
  if constexpr (kNibbleWords<C>) {
    const auto address = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
    if (address(codes) % 4 == 0 && address(y) % 16 == 0) {  // the usual case: no per-span alignment tests
      if constexpr (kDecodesByEntries<C, T>) {
        dequantize_by_entries<C, T>(s, static_cast<const std::uint8_t*>(__builtin_assume_aligned(codes, 4)), scales, g,
                                    __builtin_assume_aligned(y, 16));
        return;
      }
      dequantize_spans<C, T>(s, static_cast<const std::uint8_t*>(__builtin_assume_aligned(codes, 4)), scales, g,
                             __builtin_assume_aligned(y, 16));
      return;
    }
  } else if constexpr (kByteWords<C>) {
    const auto address = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
    if (address(codes) % 8 == 0 && address(y) % 16 == 0) {  // the usual case: no per-span alignment tests
      dequantize_spans<C, T>(s, static_cast<const std::uint8_t*>(__builtin_assume_aligned(codes, 8)), scales, g,
                             __builtin_assume_aligned(y, 16));
      return;
    }
  }
  dequantize_spans<C, T>(s, codes, scales, g, y);
}
template <int C, DType T>
__global__ void dequantize_kernel(QuantizeShape shape, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                                  void* y) {
  dequantize_body<C, T>(shape, codes, scales, g, y);
}
// The decode by magnitude (kDecodesByEntries) at most 32 registers (16 thread blocks an SM): it waits
// on its loads, and 35 registers held 14 (docs/performance.md "On an H200").
template <int C, DType T>
__global__ void __launch_bounds__(kThreads, 16)
    dequantize_by_entries_kernel(QuantizeShape shape, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                                 void* y) {
  static_assert(kDecodesByEntries<C, T>);
  dequantize_body<C, T>(shape, codes, scales, g, y);
}

template <int C>
__device__ inline void requantize_words(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales,
                                        float factor, std::uint8_t* out) {
  const int pairs_per_block = s.block() / 16;
  const std::int64_t total = s.rows * (s.cols / 16);
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    requantize_nibble_words<2>(s.recipe, codes + 8 * k, scales[k / pairs_per_block], factor, out + 16 * k);
}
// The 4-bit workspace: a thread per two words of eight codes (every fixed block holds 16k), at
// most 32 registers (16 thread blocks an SM): it waits on its loads, and 40 registers held 12
// (docs/performance.md "On an H200").
template <int C>
__global__ void __launch_bounds__(kThreads, 16)
    requantize_nibbles_kernel(QuantizeShape shape, const std::uint8_t* codes, const std::uint8_t* scales, float factor,
                              std::uint8_t* out) {
  static_assert(kNibbleWords<C> && kFixed[C].block % 16 == 0);
  const QuantizeShape s = specialise<C>(shape);
  const auto address = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  if (address(codes) % 8 == 0 && address(out) % 16 == 0) {  // the usual case: no per-pair alignment tests
    requantize_words<C>(s, static_cast<const std::uint8_t*>(__builtin_assume_aligned(codes, 8)), scales, factor,
                        static_cast<std::uint8_t*>(__builtin_assume_aligned(out, 16)));
  } else {
    requantize_words<C>(s, codes, scales, factor, out);
  }
}
template <int C>
__global__ void requantize_kernel(QuantizeShape shape, const std::uint8_t* codes, const std::uint8_t* scales,
                                  float factor, std::uint8_t* out) {
  const QuantizeShape s = specialise<C>(shape);
  if constexpr (C != kGeneric && byte_span_codes(kFixed[C].element)) {  // a thread per span of sixteen codes
    static_assert(kFixed[C].block % kByteSpan == 0);
    const std::int64_t total = s.rows * (s.cols / kByteSpan);
    constexpr int kSpansPerBlock = kFixed[C].block / kByteSpan;
    for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < total;
         k += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
      requantize_byte_span(s.recipe, codes + kByteSpan * k, s.scales_per_row() ? scales[k / kSpansPerBlock] : 0, factor,
                           out + kByteSpan * k);
    return;
  }
  const std::int64_t total = s.rows * (s.cols / s.block());
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    requantize_one_block<kBlockOf<C>>(s, codes, scales, factor, out, 0, k);
}

// max |x| with NaN ignored (fmaxf): 16-byte loads where aligned, kAmaxLoads of them in flight a
// thread before it reduces any (docs/performance.md "Grids on an H200"), then a warp reduction and
// one atomicMax per warp (non-negative floats order like their bit patterns, inf included). The
// maximum does not depend on the order the values are taken in.
constexpr int kAmaxLoads = 4;
template <DType T>
__global__ void amax_kernel(const void* x, std::int64_t count, unsigned int* result) {
  constexpr int kPerVector = T == DType::fp32 ? 4 : 8;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const bool vector = (reinterpret_cast<std::uintptr_t>(x) & 15) == 0;
  const std::int64_t vectors = vector ? count / kPerVector : 0;
  float m = 0.0f;
  std::int64_t v = first;
  for (; v + (kAmaxLoads - 1) * stride < vectors; v += kAmaxLoads * stride) {
    float values[kAmaxLoads][kPerVector];
    KVQ_UNROLL
    for (int k = 0; k < kAmaxLoads; ++k) io::load_values(T, x, (v + k * stride) * kPerVector, kPerVector, values[k]);
    KVQ_UNROLL
    for (int k = 0; k < kAmaxLoads; ++k)
      for (const float a : values[k]) m = fmaxf(m, fabsf(a));
  }
  for (; v < vectors; v += stride) {
    float values[kPerVector];
    io::load_values(T, x, v * kPerVector, kPerVector, values);
    for (const float a : values) m = fmaxf(m, fabsf(a));
  }
  for (std::int64_t i = vectors * kPerVector + first; i < count; i += stride) m = fmaxf(m, fabsf(load_value(T, x, i)));
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, offset));
  if ((threadIdx.x & 31) == 0) atomicMax(result, __float_as_uint(m));
}

using launch::grid_for;
using launch::status;

static_assert(kThreads == 128, "quantize_kernel_occupied's launch bounds assume 128 threads a block");

}  // namespace

namespace device {

bool available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    *why = std::string("no CUDA device: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return false;
  }
  return true;
}

Status quantize(const QuantizeShape& s, DType input, const void* x, float g, std::uint8_t* codes,
                std::uint8_t* scales, void* stream) {
  if (auto e = validate(s); !e.ok()) return e;
  if (lane_split(s, input)) return quantize_lanes(s, input, x, g, codes, scales, stream);  // kernels/lane_quantize_device.cu
  // Blocks, or spans of 16 input bytes per tensor (kTensorSpansOf; a multiple of 4 or 8 elements).
  const std::int64_t work = s.recipe.scale == BlockScale::tensor_only ? s.rows * s.cols / kTensorSpanOf(input)
                                                                     : s.rows * (s.cols / s.block());
  if (work == 0) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  return status(dispatch(s, input, [&]<int C, DType T>() {
    if constexpr (kLaneSplitOf<C, T> || !kQuantizesOf<C>) {  // lane-split (above), decode-only: no kernel built
      return cudaErrorInvalidValue;
    } else {
      if constexpr (kTensorSpansOf<C> && kFixed[C].use == FixedUse::variant_quantize) {
        // The per-tensor Triton variants' kernel (a runtime recipe): one resident wave
        // (docs/performance.md "Resident grids").
        return launch::launch_resident<quantize_kernel<C, T>>(grid_for(work, kThreads), kThreads, st, s, x, g, codes,
                                                               scales);
      } else if constexpr (kOccupiedOf<C>) {
        quantize_kernel_occupied<C, T><<<grid_for(work, kThreads), kThreads, 0, st>>>(s, x, g, codes, scales);
      } else {
        // A table of g's code terms a thread block, or the next block's loads in flight: 128 blocks
        // an SM (64 with fast memory); else one block a thread (256 blocks an SM with fast memory)
        // (docs/performance.md "Grids").
        constexpr launch::GridCap kCap =
            kTableOf<C> || kPipelinedOf<C, T> ? launch::GridCap(128, 64) : launch::GridCap(launch::kOnePass, 256);
        quantize_kernel<C, T><<<grid_for(work, kThreads, kCap), kThreads, 0, st>>>(s, x, g, codes, scales);
      }
      return cudaGetLastError();
    }
  }));
}

Status dequantize(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                  DType output, void* y, void* stream) {
  if (auto e = validate(s); !e.ok()) return e;
  // Spans (fixed shapes: kDequantizeSpan elements, kDequantizeSpanFp32 to FP32), or more than blocks.
  const std::int64_t work = s.rows * (s.cols / (output == DType::fp32 ? kDequantizeSpanFp32 : kDequantizeSpan));
  if (s.rows * s.cols == 0) return {};
  return status(dispatch(s, output, [&]<int C, DType T>() {
    if constexpr (kDecodesOf<C>) {
      // One span a thread; the decode by magnitude under the amax parameter (the four-over-six
      // package's recipes: the most work a block) 256 blocks an SM, and with fast memory every
      // 4-bit decode (docs/performance.md "Grids").
      constexpr launch::GridCap kCap = [] {
        if constexpr (kDecodesByEntries<C, T>)
          if (kFixed[C].tensor_param == TensorParam::amax) return launch::GridCap(256);
        if constexpr (kNibbleWords<C>) return launch::GridCap(launch::kOnePass, 256);
        return launch::GridCap(launch::kOnePass);
      }();
      const int grid = grid_for(work < 1 ? 1 : work, kThreads, kCap);
      const auto st = static_cast<cudaStream_t>(stream);
      if constexpr (kDecodesByEntries<C, T>) {
        dequantize_by_entries_kernel<C, T><<<grid, kThreads, 0, st>>>(s, codes, scales, g, y);
      } else {
        dequantize_kernel<C, T><<<grid, kThreads, 0, st>>>(s, codes, scales, g, y);
      }
      return cudaGetLastError();
    }
    return cudaErrorInvalidValue;
  }, Use::dequantize));
}

Status requantize_e4m3(const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float factor,
                       std::uint8_t* out, void* stream) {
  if (auto e = validate(s); !e.ok()) return e;
  if (factor != factor) return "factor (workspace scale) must not be NaN";
  const std::int64_t work = s.rows * (s.cols / s.block()) * (s.packed() && s.block() % 16 == 0 ? s.block() / 16 : 1) *
                            (byte_span_codes(s.recipe.element) && s.block() % kByteSpan == 0 ? s.block() / kByteSpan : 1);
  if (work == 0) return {};
  // 256 blocks an SM; 4-bit codes 128 with fast memory (docs/performance.md "Grids")
  const int grid = grid_for(work, kThreads, s.packed() ? launch::GridCap(256, 128) : launch::GridCap(256));
  return status(dispatch(s, DType::fp32, [&]<int C, DType T>() {
    if constexpr (T == DType::fp32 && kDecodesOf<C>) {  // no data type: one instantiation per configuration
      if constexpr (kNibbleWords<C>) {
        requantize_nibbles_kernel<C><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(s, codes, scales, factor,
                                                                                            out);
      } else {
        requantize_kernel<C><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(s, codes, scales, factor, out);
      }
      return cudaGetLastError();
    }
    return cudaErrorInvalidValue;
  }, Use::workspace));
}

Status amax(DType input, const void* x, std::int64_t count, float* result, void* stream) {
  if (count < 0) return "count must be >= 0";
  const auto st = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaMemsetAsync(result, 0, sizeof(float), st);
  if (e == cudaSuccess && count > 0) {
    const int grid = grid_for(count / 8 + 1, 256, launch::GridCap(32, 8));  // docs/performance.md "Grids"
    auto* r = reinterpret_cast<unsigned int*>(result);
    switch (input) {
      case DType::fp32: amax_kernel<DType::fp32><<<grid, 256, 0, st>>>(x, count, r); break;
      case DType::bf16: amax_kernel<DType::bf16><<<grid, 256, 0, st>>>(x, count, r); break;
      case DType::fp16: amax_kernel<DType::fp16><<<grid, 256, 0, st>>>(x, count, r); break;
    }
    e = cudaGetLastError();
  }
  return status(e);
}

Status allocate(void** p, std::size_t bytes) { return status(cudaMalloc(p, bytes ? bytes : 1)); }
void release(void* p) { cudaFree(p); }
Status upload(void* dst, const void* src, std::size_t bytes) {
  return status(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
Status download(void* dst, const void* src, std::size_t bytes) {
  return status(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
Status fill(void* dst, std::uint8_t byte, std::size_t bytes) { return status(cudaMemset(dst, byte, bytes)); }
Status synchronize() { return status(cudaDeviceSynchronize()); }
Status select(int ordinal) { return status(cudaSetDevice(ordinal)); }
namespace {
// A stream-ordered pool per device that keeps its memory between calls: the default pool returns
// memory at every synchronisation, so scratch of tens of MiB would be mapped again at every call.
cudaError_t scratch_pool(cudaMemPool_t* pool) {
  static std::mutex lock;
  static std::map<int, cudaMemPool_t> pools;
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  const std::lock_guard<std::mutex> hold(lock);
  if (const auto found = pools.find(device); found != pools.end()) {
    *pool = found->second;
    return cudaSuccess;
  }
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  e = cudaMemPoolCreate(pool, &props);
  std::uint64_t keep = ~std::uint64_t{0};
  if (e == cudaSuccess) e = cudaMemPoolSetAttribute(*pool, cudaMemPoolAttrReleaseThreshold, &keep);
  if (e == cudaSuccess) pools[device] = *pool;
  return e;
}
}  // namespace

Status allocate_on(void** p, std::size_t bytes, void* stream) {
  cudaMemPool_t pool;
  cudaError_t e = scratch_pool(&pool);
  if (e == cudaSuccess) e = cudaMallocFromPoolAsync(p, bytes ? bytes : 1, pool, static_cast<cudaStream_t>(stream));
  return status(e);
}
void release_on(void* p, void* stream) { cudaFreeAsync(p, static_cast<cudaStream_t>(stream)); }
Status download_on(void* dst, const void* src, std::size_t bytes, void* stream) {
  const auto st = static_cast<cudaStream_t>(stream);
  // A few bytes (counters, amax) through a pinned buffer of the thread's: a copy to pageable memory
  // is staged by the driver, slower for a latency-bound call.
  constexpr std::size_t kPinned = 4096;
  thread_local void* pinned = nullptr;
  if (bytes <= kPinned && (pinned || cudaMallocHost(&pinned, kPinned) == cudaSuccess)) {
    cudaError_t e = cudaMemcpyAsync(pinned, src, bytes, cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    if (e == cudaSuccess) std::memcpy(dst, pinned, bytes);
    return status(e);
  }
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, st);
  return status(e == cudaSuccess ? cudaStreamSynchronize(st) : e);
}

Status allocate_mapped(void** host, void** device_view, std::size_t bytes) {
  cudaError_t e = cudaHostAlloc(host, bytes ? bytes : 1, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e == cudaSuccess) e = cudaHostGetDevicePointer(device_view, *host, 0);
  return status(e);
}
void release_mapped(void* host) { cudaFreeHost(host); }
Status wait_for(void* stream) { return status(cudaStreamSynchronize(static_cast<cudaStream_t>(stream))); }

}  // namespace device
}  // namespace kvq::kernels
