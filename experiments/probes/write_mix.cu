// How fast can a kernel read one byte for every eight it writes (dequantize to FP32's traffic: 4-bit
// codes and a scale byte per 16 in, four bytes an element out)? Memory-only kernels with that mix,
// each timed against a copy of the same bytes in the same run (docs/performance.md "What bounds each
// kernel"), in interleaved rounds. No arithmetic on the values: what the access pattern alone allows.
//
//   nvcc -O3 -arch=sm_90 experiments/probes/write_mix.cu -o /tmp/write_mix && /tmp/write_mix [ROUNDS]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                   \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

constexpr std::int64_t kElements = 64ll << 20;  // FP32 output of 256 MiB
// The copy baseline moves as many bytes (half read, half written) as a row: codes, scales and output.
constexpr std::int64_t kMoved = kElements / 2 + kElements / 16 + kElements * 4;
constexpr std::int64_t kCopyVectors = kMoved / 2 / 16;

__global__ void copy16(uint4* dst, const uint4* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// A thread a span of 4 codes: two bytes and the block's scale byte in, 16 bytes out (the current
// dequantize kernel's pattern for FP32 output).
__global__ void span4(const std::uint16_t* codes, const std::uint8_t* scales, uint4* y, std::int64_t spans) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < spans;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t c = __ldg(codes + k), s = __ldg(scales + k / 4);
    __stcs(y + k, uint4{c, c ^ s, c + s, s});
  }
}

// The same with the scale byte left out (how much its load costs).
__global__ void span4_noscale(const std::uint16_t* codes, uint4* y, std::int64_t spans) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < spans;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t c = __ldg(codes + k);
    __stcs(y + k, uint4{c, c, c, c});
  }
}

// Plain (write-back) stores instead of streaming ones.
__global__ void span4_plain(const std::uint16_t* codes, const std::uint8_t* scales, uint4* y, std::int64_t spans) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < spans;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t c = __ldg(codes + k), s = __ldg(scales + k / 4);
    y[k] = uint4{c, c ^ s, c + s, s};
  }
}

// The next span's loads issued before this span's store (software pipelined: one read in flight
// while the previous span is written).
__global__ void span4_ahead(const std::uint16_t* codes, const std::uint8_t* scales, uint4* y, std::int64_t spans) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k >= spans) return;
  std::uint32_t c = __ldg(codes + k), s = __ldg(scales + k / 4);
  for (; k < spans; k += step) {
    const std::int64_t next = k + step;
    std::uint32_t cn = 0, sn = 0;
    if (next < spans) cn = __ldg(codes + next), sn = __ldg(scales + next / 4);
    __stcs(y + k, uint4{c, c ^ s, c + s, s});
    c = cn, s = sn;
  }
}

// A thread a span of 16 codes (one block): 8 bytes and the scale in, 64 bytes out as four 16-byte
// stores, store j of a warp covering 512 contiguous bytes (lane l writes chunk 32j + l of the
// warp's 128, whose codes it loaded as 4 two-byte loads: the loads coalesce the same way).
__global__ void warp_block16(const std::uint16_t* codes, const std::uint8_t* scales, uint4* y, std::int64_t spans) {
  const unsigned lane = threadIdx.x % 32u;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  for (std::int64_t w = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) / 32; w * 128 < spans;
       w += warps) {
    std::uint32_t c[4], s[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::int64_t k = w * 128 + 32 * j + lane;
      c[j] = k < spans ? __ldg(codes + k) : 0u;
      s[j] = k < spans ? __ldg(scales + k / 4) : 0u;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::int64_t k = w * 128 + 32 * j + lane;
      if (k < spans) __stcs(y + k, uint4{c[j], c[j] ^ s[j], c[j] + s[j], s[j]});
    }
  }
}

// A thread a span of 8 codes: four bytes in, 32 bytes out as two 16-byte stores at a 32-byte lane
// stride (each store half-fills the warp's sectors).
__global__ void span8_strided(const std::uint32_t* codes, const std::uint8_t* scales, uint4* y, std::int64_t spans8) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < spans8;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t c = __ldg(codes + k), s = __ldg(scales + k / 2);
    __stcs(y + 2 * k, uint4{c, c ^ s, c + s, s});
    __stcs(y + 2 * k + 1, uint4{s, c + s, c ^ s, c});
  }
}

float time_ms(void (*launch)(), int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < reps + 3; ++i) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 3) t.push_back(ms);
  }
  CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Buffers {
  std::uint16_t* codes;
  std::uint8_t* scales;
  uint4* y;
  uint4* copy_src;
  uint4* copy_dst;
  int sms;
  int grid_mult;
};

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  Buffers b{};
  CHECK(cudaDeviceGetAttribute(&b.sms, cudaDevAttrMultiProcessorCount, 0));
  const std::int64_t code_bytes = kElements / 2, scale_bytes = kElements / 16, out_bytes = kElements * 4;
  const double moved = static_cast<double>(kMoved);
  CHECK(cudaMalloc(&b.codes, code_bytes));
  CHECK(cudaMalloc(&b.scales, scale_bytes));
  CHECK(cudaMalloc(&b.y, out_bytes));
  CHECK(cudaMalloc(&b.copy_src, kCopyVectors * 16));
  CHECK(cudaMalloc(&b.copy_dst, kCopyVectors * 16));
  CHECK(cudaMemset(b.codes, 0x5a, code_bytes));
  CHECK(cudaMemset(b.scales, 0x3c, scale_bytes));
  CHECK(cudaMemset(b.copy_src, 0x11, kCopyVectors * 16));
  struct Row {
    const char* name;
    void (*launch)();
  };
  static Buffers* g;
  g = &b;
  const Row rows[] = {
      {"copy (memcpy)", [] { CHECK(cudaMemcpyAsync(g->copy_dst, g->copy_src, kCopyVectors * 16, cudaMemcpyDeviceToDevice)); }},
      {"copy (16-byte kernel)", [] { copy16<<<g->sms * 8, 256>>>(g->copy_dst, g->copy_src, kCopyVectors); }},
      {"memset (writes only)", [] { CHECK(cudaMemsetAsync(g->y, 0x3c, kElements * 4)); }},
      {"span4 x2 waves", [] { span4<<<g->sms * 32, 128>>>(g->codes, g->scales, g->y, kElements / 4); }},
      {"span4 x1 wave", [] { span4<<<g->sms * 16, 128>>>(g->codes, g->scales, g->y, kElements / 4); }},
      {"span4 x8 waves", [] { span4<<<g->sms * 128, 128>>>(g->codes, g->scales, g->y, kElements / 4); }},
      {"span4 one pass", [] { span4<<<(unsigned)(kElements / 4 / 256), 256>>>(g->codes, g->scales, g->y, kElements / 4); }},
      {"span4 no scale", [] { span4_noscale<<<g->sms * 32, 128>>>(g->codes, g->y, kElements / 4); }},
      {"span4 plain stores", [] { span4_plain<<<g->sms * 32, 128>>>(g->codes, g->scales, g->y, kElements / 4); }},
      {"span4 load ahead", [] { span4_ahead<<<g->sms * 16, 128>>>(g->codes, g->scales, g->y, kElements / 4); }},
      {"warp block16", [] { warp_block16<<<g->sms * 16, 128>>>(g->codes, g->scales, g->y, kElements / 4); }},
      {"span8 strided", [] { span8_strided<<<g->sms * 32, 128>>>(reinterpret_cast<const std::uint32_t*>(g->codes), g->scales, g->y, kElements / 8); }},
  };
  constexpr int kRows = sizeof(rows) / sizeof(rows[0]);
  std::vector<std::vector<double>> gbps(kRows);
  for (int i = 0; i < 200; ++i) rows[0].launch();  // clocks settle
  CHECK(cudaDeviceSynchronize());
  for (int r = 0; r < rounds; ++r)
    for (int i = 0; i < kRows; ++i) {
      const float ms = time_ms(rows[i].launch, 20);
      const double bytes = i < 2 ? static_cast<double>(kCopyVectors * 32) : i == 2 ? static_cast<double>(kElements * 4) : moved;
      gbps[i].push_back(bytes / (ms * 1e6));
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double copy = std::max(median(gbps[0]), median(gbps[1]));
  std::printf("%d rounds, %.1f MB moved a row (FP32 dequantize of %lld elements); copy %.0f GB/s\n", rounds, moved / 1e6,
              static_cast<long long>(kElements), copy);
  for (int i = 0; i < kRows; ++i)
    std::printf("%-24s %7.0f GB/s  %6.1f%% of copy\n", rows[i].name, median(gbps[i]), 100.0 * median(gbps[i]) / copy);
  return 0;
}
