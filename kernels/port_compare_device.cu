// The device comparator (kernels/port_compare.hpp): one thread a (row, block) unit, grid-stride;
// the code bytes are compared a word at a time where the port keeps kvq's layout, element by
// element only where a word differs (or the layout is another); the counters of a chunk are touched
// only by a unit that differs, so an exact port costs one read of both outputs.
#include <cuda_runtime.h>

#include "kernels/device_launch.cuh"
#include "kernels/lane_quantize.hpp"
#include "kernels/port_compare.hpp"
#include "kernels/quantize_kernel.cuh"

namespace kvq::kernels {
namespace {

// The codes of unit (row, b), n elements from column b * n, against the port's.
__device__ int code_mismatches(const QuantizeShape& s, const std::uint8_t* expected_row, const DevicePort& p,
                               std::int64_t row, std::int64_t b, int n, bool same_bytes) {
  const std::int64_t first_col = b * n;
  if (same_bytes) {  // the port's bytes are laid out as kvq's: equal bytes, equal codes
    const int bytes = s.packed() ? n / 2 : n;
    const std::uint8_t* mine = expected_row + (s.packed() ? first_col / 2 : first_col);
    const std::uint8_t* theirs = p.codes + row * s.code_bytes_per_row() + (s.packed() ? first_col / 2 : first_col);
    bool equal = true;
    if (bytes % 4 == 0) {
      for (int k = 0; k < bytes; k += 4) equal &= io::load_word(mine + k) == io::load_word(theirs + k);
    } else {
      for (int k = 0; k < bytes; ++k) equal &= mine[k] == theirs[k];
    }
    if (equal) return 0;
  }
  const bool four_bit = s.packed();
  int count = 0;
  for (int i = 0; i < n; ++i) {
    const std::int64_t col = first_col + i;
    const std::uint8_t want = code_at(s, expected_row, col);
    const std::uint8_t got = port_element_code(p.codes, four_bit, four_bit && p.codes_packed, p.nibbles, row * s.cols + col);
    count += want != got;
  }
  return count;
}

__global__ void compare_kernel(QuantizeShape s, float g, const std::uint8_t* expected_codes,
                               const std::uint8_t* expected_scales, DevicePort p, CompareCounters counters) {
  unsigned long long* counts = counters.counts;
  const int n = s.block();
  const std::int64_t per_row = s.cols / n, units = s.rows * per_row, chunks = compare_chunks(s.rows);
  const std::int64_t S = s.scales_per_row();
  const bool same_bytes = !s.packed() || (p.codes_packed && p.nibbles == NibbleOrder::low_first);
  for (std::int64_t u = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; u < units;
       u += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = u / per_row, b = u % per_row;
    std::uint8_t got_scale = 0;
    int scale_mismatch = 0;
    if (S) {
      got_scale = p.scales[scale_index(p.scale_layout, S, row, b)];
      scale_mismatch = expected_scales[row * S + b] != got_scale;
    }
    const std::uint8_t* expected_row = expected_codes + row * s.code_bytes_per_row();
    const int codes = code_mismatches(s, expected_row, p, row, b, n, same_bytes);
    int values = 0;
    if (p.dequantized) {
      const bool four_bit = s.packed();
      for (int i = 0; i < n; ++i) {
        const std::int64_t k = row * s.cols + b * n + i;
        const std::uint8_t got = port_element_code(p.codes, four_bit, four_bit && p.codes_packed, p.nibbles, k);
        const float model = in_port_dtype(p.dequantized_type, dequantize_element(s.recipe, g, got_scale, got));
        values += !dequantized_matches(load_value(p.dequantized_type, p.dequantized, k), model);
      }
    }
    if (codes | scale_mismatch | values) {
      const std::int64_t chunk = row / kCompareChunkRows;
      const int found[kCompareCounts] = {codes, scale_mismatch, values};
      for (int kind = 0; kind < kCompareCounts; ++kind) {
        if (!found[kind]) continue;
        atomicAdd(counts + kind, static_cast<unsigned long long>(found[kind]));
        atomicAdd(counts + chunk_counter(kind, chunk, chunks), static_cast<unsigned long long>(found[kind]));
      }
    }
  }
  publish_totals(counters);
}

// The kernels built with comparing outputs: the reference fixed configurations from 16-bit input
// (the engines' KV caches), not lane-split. The rest (FP32 input, the engine variants' kernels) run
// quantize + compare_port: one more instantiation of each would double the compile time of this
// unit for inputs that are rarely that large.
template <int C, DType T>
constexpr bool kFusedOf = quantize_shared::kReferenceOf<C> && T != DType::fp32 && !quantize_shared::kLaneSplitOf<C, T>;

template <int C, DType T>
__global__ void quantize_compare_kernel(QuantizeShape shape, const void* x, float g, CompareSink codes, CompareSink scales,
                                        CompareCounters counters) {
  quantize_shared::quantize_body<C, T>(shape, x, g, codes, scales);
  publish_totals(counters);
}

// The counters zeroed unless they hold zeros.
cudaError_t start_counting(const CompareCounters& c, std::int64_t rows, cudaStream_t st) {
  return c.zero ? cudaSuccess : cudaMemsetAsync(c.counts, 0, sizeof(unsigned long long) * compare_counters(rows), st);
}

}  // namespace

namespace device {

Status quantize_compare(const QuantizeShape& s, DType input, const void* x, float g, const std::uint8_t* port_codes,
                        const std::uint8_t* port_scales, const CompareCounters& counters, bool* fused, void* stream) {
  using namespace quantize_shared;
  *fused = false;
  if (auto e = validate(s); !e.ok()) return e;
  if (lane_split(s, input)) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  const std::int64_t chunks = compare_chunks(s.rows);
  cudaError_t e = start_counting(counters, s.rows, st);
  const std::int64_t work = s.recipe.scale == BlockScale::tensor_only ? s.rows * s.cols / kTensorSpanOf(input)
                                                                     : s.rows * (s.cols / s.block());
  *fused = true;
  if (e != cudaSuccess || work == 0) return launch::status(e);  // nothing to compare: done
  const CompareSink codes{port_codes, 0, s.code_bytes_per_row(), chunks, kCodeMismatches, s.packed(), counters.counts};
  const CompareSink scales{port_scales, 0, s.scales_per_row() ? s.scales_per_row() : 1, chunks, kScaleMismatches, false,
                           counters.counts};
  cudaError_t launched = cudaSuccess;
  e = dispatch(s, input, [&]<int C, DType T>() {
    if constexpr (kFusedOf<C, T>) {
      quantize_compare_kernel<C, T><<<launch::grid_for(work, kThreads), kThreads, 0, st>>>(s, x, g, codes, scales,
                                                                                            counters);
      launched = cudaGetLastError();
    } else {
      *fused = false;  // no comparing form of this kernel: the caller quantizes and compares
    }
    return cudaSuccess;
  });
  return launch::status(e != cudaSuccess ? e : launched);
}

Status compare_port(const QuantizeShape& s, float g, const std::uint8_t* expected_codes,
                    const std::uint8_t* expected_scales, const DevicePort& port, const CompareCounters& counters,
                    void* stream) {
  if (auto e = validate(s); !e.ok()) return e;
  const auto st = static_cast<cudaStream_t>(stream);
  cudaError_t e = start_counting(counters, s.rows, st);
  const std::int64_t units = s.rows * (s.cols / s.block());
  if (e == cudaSuccess && units > 0) {
    compare_kernel<<<launch::grid_for(units, 256), 256, 0, st>>>(s, g, expected_codes, expected_scales, port, counters);
    e = cudaGetLastError();
  }
  return launch::status(e);
}

}  // namespace device
}  // namespace kvq::kernels
