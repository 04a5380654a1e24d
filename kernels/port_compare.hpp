// The device comparator: a port's outputs in GPU memory against kvq's expected codes and scales
// (written by device::quantize in kvq's layout, kernels/quantize_layout.hpp), counted per chunk of
// rows, so that the host copies back only the counts and then the few rows that differ
// (docs/python.md "CUDA tensors"). The rule of each comparison is the host's
// (oracle/verify.cpp compare): kernels/port_layout.hpp.
#pragma once

#include <cstdint>

#include "kernels/port_layout.hpp"
#include "kernels/quantize.hpp"

namespace kvq::kernels {

// A port's outputs on the device; x is [rows, cols] of the QuantizeShape the comparison is given.
struct DevicePort {
  const std::uint8_t* codes = nullptr;
  bool codes_packed = true;  // 4-bit codes two a byte (else one a byte); 8-bit codes: ignored
  NibbleOrder nibbles = NibbleOrder::low_first;
  const std::uint8_t* scales = nullptr;  // block scales in scale_layout (none per tensor)
  ScaleLayout scale_layout = ScaleLayout::row_major;
  const void* dequantized = nullptr;  // the port's dequantize of its own codes, or none
  DType dequantized_type = DType::fp32;
};

// Rows a chunk counts; a multiple of 128, so that every scale layout keeps a chunk's scales
// contiguous (kernels/port_layout.hpp).
inline constexpr std::int64_t kCompareChunkRows = 256;
enum CompareCount : int { kCodeMismatches, kScaleMismatches, kDequantizedMismatches, kCompareCounts };
KVQ_HD constexpr std::int64_t compare_chunks(std::int64_t rows) { return (rows + kCompareChunkRows - 1) / kCompareChunkRows; }
// The counters of a comparison, in device memory: counts[k], the mismatches of kind k in all;
// counts[kCompareTicket], the thread blocks that have finished (back at zero after a launch); then
// counts[chunk_counter(k, chunk, chunks)], those of kind k among rows [chunk * kCompareChunkRows, ...).
inline constexpr int kCompareTicket = kCompareCounts;
KVQ_HD constexpr std::int64_t chunk_counter(int kind, std::int64_t chunk, std::int64_t chunks) {
  return kCompareTicket + 1 + kind * chunks + chunk;
}
KVQ_HD constexpr std::int64_t compare_counters(std::int64_t rows) { return chunk_counter(kCompareCounts, 0, compare_chunks(rows)); }

// Where a comparing kernel counts. counts: compare_counters(rows) counters in device memory, zeroed
// before the launch unless `zero` says they hold zeros already. totals: the device's view of
// kCompareCounts counters in host memory mapped into its address space (device::allocate_mapped),
// where the last thread block to finish copies counts[0, kCompareCounts): the host reads them once
// the stream is done, with no copy queued after the kernel (docs/performance.md "Python: kvq.verify
// on CUDA tensors").
struct CompareCounters {
  unsigned long long* counts = nullptr;
  bool zero = false;
  unsigned long long* totals = nullptr;
};

#if defined(__CUDACC__)
// The end of a comparing kernel, reached by every thread of every block: the last block to finish
// (each block takes a ticket once its threads' counts are visible device-wide) copies the totals to
// the mapped host counters and sets the ticket back to zero for the next launch.
__device__ inline void publish_totals(const CompareCounters& c) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (atomicAdd(c.counts + kCompareTicket, 1ull) != gridDim.x - 1ull) return;
  __threadfence();
  for (int k = 0; k < kCompareCounts; ++k) c.totals[k] = atomicAdd(c.counts + k, 0ull);
  c.counts[kCompareTicket] = 0;
}
#endif

// What the quantize kernels' body would store, compared with the port's bytes at the same place
// (kvq's layout) and each differing element or scale counted as compare_port counts it: the fused
// comparison (device::quantize_compare). A pointer-like value: + moves it, and the per-block code
// calls its store members (kernels/block_quantize.hpp put_words, put_bytes, put_byte).
struct CompareSink {
  const std::uint8_t* port = nullptr;  // the port's buffer
  std::int64_t offset = 0;             // the byte this sink points at
  std::int64_t bytes_per_row = 1;      // a row's bytes in this buffer
  std::int64_t chunks = 0;
  int kind = kCodeMismatches;
  bool nibbles = false;  // packed 4-bit codes: a byte holds two elements
  unsigned long long* counts = nullptr;

  KVQ_HD CompareSink operator+(std::int64_t k) const {
    CompareSink s = *this;
    s.offset += k;
    return s;
  }
  KVQ_HD void store_words(const std::uint32_t* words, int count) const {
    int w = 0;
    for (; w + 1 < count; w += 2) {  // eight bytes a load where aligned (an NVFP4 block's codes)
      std::uint32_t theirs[2];
      io::load_word_pair(port + offset + 4 * w, theirs);
      if (theirs[0] != words[w]) note(offset + 4 * w, theirs[0] ^ words[w], 4);
      if (theirs[1] != words[w + 1]) note(offset + 4 * w + 4, theirs[1] ^ words[w + 1], 4);
    }
    if (w < count) {
      const std::uint32_t theirs = io::load_word(port + offset + 4 * w);
      if (theirs != words[w]) note(offset + 4 * w, theirs ^ words[w], 4);
    }
  }
  KVQ_HD void store_bytes(const std::uint8_t* bytes, int count) const {
    for (int i = 0; i < count; ++i)
      if (port[offset + i] != bytes[i]) note(offset + i, port[offset + i] ^ bytes[i], 1);
  }
  KVQ_HD void store_byte(std::int64_t index, std::uint8_t byte) const {
    if (port[offset + index] != byte) note(offset + index, port[offset + index] ^ byte, 1);
  }
  // `bytes` bytes from byte `at` differ by `diff` (their XOR, little-endian): each differing byte is
  // counted (its differing nibbles, packed) in its row's chunk.
  KVQ_HD void note(std::int64_t at, std::uint32_t diff, int bytes) const {
#if defined(__CUDA_ARCH__)
    for (int i = 0; i < bytes; ++i) {
      const std::uint32_t d = (diff >> (8 * i)) & 0xFFu;
      if (!d) continue;
      const unsigned long long n = nibbles ? ((d & 0x0Fu) != 0) + ((d & 0xF0u) != 0) : 1;
      const std::int64_t chunk = (at + i) / bytes_per_row / kCompareChunkRows;
      atomicAdd(counts + kind, n);
      atomicAdd(counts + chunk_counter(kind, chunk, chunks), n);
    }
#else
    (void)at, (void)diff, (void)bytes;
#endif
  }
};

namespace device {
// kvq's quantize kernel for the recipe with CompareSink outputs: x read once and the port's codes
// and scales (kvq's layout: packed low nibble first, row-major scales) read once, nothing written but
// the counters (as compare_port's). Built for the fixed configurations from BF16/FP16 input; *fused
// false, nothing launched, for the others (FP32 input, the engine variants' kernels, the lane-split
// quantizers): use quantize and compare_port.
Status quantize_compare(const QuantizeShape& s, DType input, const void* x, float g, const std::uint8_t* port_codes,
                        const std::uint8_t* port_scales, const CompareCounters& counters, bool* fused, void* stream);
// The port's outputs against kvq's expected codes and scales, counted in `counters` as
// quantize_compare counts. g: the tensor decode scale of the port's dequantize (the model's decode
// of the port's codes). Both functions set counters.totals to zeros before the launch (a shape
// with nothing to compare launches nothing).
Status compare_port(const QuantizeShape& s, float g, const std::uint8_t* expected_codes,
                    const std::uint8_t* expected_scales, const DevicePort& port, const CompareCounters& counters,
                    void* stream);
}  // namespace device

}  // namespace kvq::kernels
