#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

#include "kernels/benchmark.hpp"
#include "kernels/device_launch.cuh"
#include "kernels/paged_store.hpp"

namespace kvq::kernels {
namespace {

// Random-looking data with a per-row scale, generated on the device (no zeros-only timing).
__global__ void fill_kernel(DType t, void* x, std::int64_t count, std::int64_t cols) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t h = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    const float unit = static_cast<float>(static_cast<std::int32_t>(h >> 32)) * 0x1p-31f;
    const float v = unit * static_cast<float>(1 + (i / cols) % 7);
    store_value(t, x, i, v);
  }
}

using launch::status;

// The vector copy of copy_rate: 16 bytes a thread and step, grid-stride; the tail byte by byte.
__global__ void copy_kernel(std::uint8_t* dst, const std::uint8_t* src, std::size_t bytes) {
  const std::size_t vectors = bytes / 16, step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  for (std::size_t i = first; i < vectors; i += step)
    reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  for (std::size_t i = vectors * 16 + first; i < bytes; i += step) dst[i] = src[i];
}

bool clocks_settled = false;  // copy_rate's warm-up ran in this process

// Keeps the GPU busy for about `cycles` clock cycles (200,000: about 0.1 ms at H100 clocks), so that
// the events and launches the host queues behind it start back to back: a timed launch's host work
// (argument setup, the launch call) then stays out of its time, as in the FlashInfer peer's timings
// (kernels/bench_flashinfer_rope.py; the PyTorch peers' times still include their launches).
__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
constexpr long long kSpinCycles = 200'000;

}  // namespace

Status copy_rate(void* dst, const void* src, std::size_t bytes, int repeats, double* gbps) {
  const std::size_t half = bytes / 2;
  auto* d = static_cast<std::uint8_t*>(dst);
  const auto* s = static_cast<const std::uint8_t*>(src);
  int sms = 0;
  if (auto e = status(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0)); !e.ok()) return e;
  const std::function<Status()> copies[] = {
      [&] { return status(cudaMemcpyAsync(d, s, half, cudaMemcpyDeviceToDevice)); },
      [&] {
        copy_kernel<<<sms * 8, 256>>>(d, s, half);
        return status(cudaGetLastError());
      }};
  if (!clocks_settled) {  // about 100 ms of copies before the first baseline
    clocks_settled = true;
    double ms = 0;
    if (auto e = time_median(copies[0], 3, &ms); !e.ok()) return e;
    const int rounds = static_cast<int>(std::min(2000.0, 100.0 / std::max(ms, 1e-3)));
    for (int i = 0; i < rounds; ++i)
      if (auto e = copies[i % 2](); !e.ok()) return e;
    if (auto e = status(cudaDeviceSynchronize()); !e.ok()) return e;
  }
  double best = 0;
  for (const auto& copy : copies) {
    double ms = 0;
    if (auto e = time_median(copy, repeats, &ms); !e.ok()) return e;
    best = std::max(best, 2.0 * static_cast<double>(half) / (ms * 1e6));
  }
  *gbps = best;
  return {};
}

Status time_median(const std::function<Status()>& launch, int repeats, double* median_ms) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> times;
  Status e;
  for (int i = 0; i < 3 + repeats && e.ok(); ++i) {
    spin_kernel<<<1, 1>>>(kSpinCycles);
    cudaEventRecord(start);
    e = launch();
    cudaEventRecord(stop);
    if (e.ok()) e = status(cudaEventSynchronize(stop));
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= 3) times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!e.ok()) return e;
  std::sort(times.begin(), times.end());
  *median_ms = times[times.size() / 2];
  return {};
}

namespace {
// The copy rate of a row's `bytes` (half read, half written) between buffers of `capacity` bytes:
// at most 2 x capacity moved, which *copied* gets (BenchRow::copy_bytes).
Status capped_copy_rate(void* dst, const void* src, std::size_t capacity, double bytes, int repeats, double* gbps,
                        double* copied) {
  const std::size_t moved = std::min(static_cast<std::size_t>(bytes), 2 * capacity);
  *copied = static_cast<double>(moved);
  return copy_rate(dst, src, moved, repeats, gbps);
}
}  // namespace

Status run_benchmarks(const std::vector<BenchCase>& cases, DType dtype, std::int64_t rows, std::int64_t cols,
                      int repeats, std::vector<BenchRow>* out, std::string* device_name, ScaleSwizzle paged_swizzle) {
  cudaDeviceProp prop{};
  if (auto e = status(cudaGetDeviceProperties(&prop, 0)); !e.ok()) return e;
  *device_name = prop.name;
  const std::int64_t count = rows * cols;
  const std::size_t in_bytes = static_cast<std::size_t>(count) * bytes_of(dtype);
  void *x = nullptr, *codes = nullptr, *scales = nullptr, *y = nullptr, *copy = nullptr, *m = nullptr;
  Status e = status(cudaMalloc(&x, in_bytes));
  if (e.ok()) e = status(cudaMalloc(&codes, static_cast<std::size_t>(count)));
  if (e.ok()) e = status(cudaMalloc(&scales, static_cast<std::size_t>(count / 16 + 1)));
  if (e.ok()) e = status(cudaMalloc(&y, in_bytes));
  if (e.ok()) e = status(cudaMalloc(&copy, in_bytes));
  if (e.ok()) e = status(cudaMalloc(&m, sizeof(float)));
  if (e.ok()) {
    fill_kernel<<<prop.multiProcessorCount * 8, 256>>>(dtype, x, count, cols);
    e = status(cudaDeviceSynchronize());
  }
  double copied = 0;  // the bytes of the last copy_gbps
  auto copy_gbps = [&](double bytes, double* gbps) {  // bytes/2 read + bytes/2 written, at most the input's
    return capped_copy_rate(copy, x, in_bytes, bytes, repeats, gbps, &copied);
  };
  float amax = 0.0f;  // max |x|
  if (e.ok()) {
    double ms = 0, copy_rate = 0;
    e = time_median([&] { return device::amax(dtype, x, count, static_cast<float*>(m), nullptr); }, repeats, &ms);
    if (e.ok()) e = status(cudaMemcpy(&amax, m, sizeof(float), cudaMemcpyDeviceToHost));
    if (e.ok()) e = copy_gbps(2.0 * static_cast<double>(in_bytes), &copy_rate);
    out->push_back({"amax", "-", name_of(dtype), static_cast<double>(in_bytes), ms, in_bytes / (ms * 1e6), copy_rate, copied});
    // The write-only yardstick: cudaMemset of the input's bytes against a copy moving as many
    // bytes (half read, half written). Dequantize to FP32 is ~89% writes (4.56 bytes an element).
    if (e.ok()) e = time_median([&] { return status(cudaMemsetAsync(y, 0x3c, in_bytes)); }, repeats, &ms);
    if (e.ok()) e = copy_gbps(static_cast<double>(in_bytes), &copy_rate);
    if (e.ok())
      out->push_back({"memset", "- (writes only)", name_of(dtype), static_cast<double>(in_bytes), ms, in_bytes / (ms * 1e6),
                      copy_rate, copied});
  }
  for (const BenchCase& c : cases) {
    if (!e.ok()) break;
    QuantizeShape s{c.recipe, rows, cols};
    const double q_bytes = static_cast<double>(in_bytes + s.code_bytes() + s.scale_bytes());
    // The recipe's own tensor parameter of x (decode scale, encode scale or amax), as a caller
    // passes it: the codes and scales then span the formats as in use (an arbitrary g can saturate
    // every block scale, or make it NaN under a non-saturating cast).
    const float g = c.recipe.scale == BlockScale::e8m0_pow2 ? 1.0f : tensor_scale(c.recipe, amax);
    double ms = 0, copy_rate = 0;
    e = time_median([&] {
          return device::quantize(s, dtype, x, g, static_cast<std::uint8_t*>(codes), static_cast<std::uint8_t*>(scales), nullptr);
        }, repeats, &ms);
    if (e.ok()) e = copy_gbps(q_bytes, &copy_rate);
    out->push_back({"quantize", c.recipe_name, name_of(dtype), q_bytes, ms, q_bytes / (ms * 1e6), copy_rate, copied});
    if (!e.ok()) break;
    e = time_median([&] {
          return device::dequantize(s, static_cast<std::uint8_t*>(codes), static_cast<std::uint8_t*>(scales), g, dtype, y, nullptr);
        }, repeats, &ms);
    if (e.ok()) e = copy_gbps(q_bytes, &copy_rate);
    out->push_back({"dequantize", c.recipe_name, name_of(dtype), q_bytes, ms, q_bytes / (ms * 1e6), copy_rate, copied});
    if (!e.ok() || dtype != DType::bf16) continue;  // the workspace has no input type: one row per recipe
    const double w_bytes = static_cast<double>(s.code_bytes() + s.scale_bytes() + count);
    e = time_median([&] {
          return device::requantize_e4m3(s, static_cast<std::uint8_t*>(codes), static_cast<std::uint8_t*>(scales),
                                         1.0f / 6.0f, static_cast<std::uint8_t*>(y), nullptr);
        }, repeats, &ms);
    if (e.ok()) e = copy_gbps(w_bytes, &copy_rate);
    out->push_back({"workspace", c.recipe_name, "e4m3", w_bytes, ms, w_bytes / (ms * 1e6), copy_rate, copied});
  }
  // Paged store (kernels/paged_store.hpp) for the FP8 per-tensor and NVFP4 recipes: K and V are
  // the two halves of x as [T, 8 heads, cols], block_size 16, the blocks in a shuffled order
  // (fixed seed), no padding, K's and V's tensor parameters that of x; check_slots off (its host check syncs the stream); NVFP4
  // scales swizzled as paged_swizzle says.
  // Bytes: K and V read, slot_mapping read, every cache byte of the T tokens written.
  const std::int64_t paged_heads = 8, paged_tokens = count / (2 * paged_heads * cols) / 16 * 16;
  void* slots = nullptr;
  if (e.ok() && paged_tokens > 0) {
    std::vector<std::int64_t> block_order(static_cast<std::size_t>(paged_tokens / 16)), host_slots;
    std::iota(block_order.begin(), block_order.end(), 0);
    std::shuffle(block_order.begin(), block_order.end(), std::mt19937_64(20261122));
    for (std::int64_t t = 0; t < paged_tokens; ++t) host_slots.push_back(block_order[t / 16] * 16 + t % 16);
    e = status(cudaMalloc(&slots, host_slots.size() * sizeof(std::int64_t)));
    if (e.ok())
      e = status(cudaMemcpy(slots, host_slots.data(), host_slots.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice));
  }
  for (const BenchCase& c : cases) {
    const bool fp8 = c.recipe.element == FormatId::e4m3fn && c.recipe.scale == BlockScale::tensor_only;
    const bool nvfp4 = c.recipe.element == FormatId::e2m1 && c.recipe.scale == BlockScale::e4m3_two_level && c.recipe.block == 16;
    if (!e.ok() || paged_tokens == 0 || (!fp8 && !nvfp4)) continue;
    for (const KvOrder order : {KvOrder::nhd, KvOrder::hnd}) {
      PagedStoreShape s;
      const ScaleSwizzle swizzle = fp8 ? ScaleSwizzle::none : paged_swizzle;
      s.layout = PagedKvLayout{fp8 ? PagedFormat::fp8 : PagedFormat::nvfp4, order, swizzle, paged_tokens / 16, 16,
                               paged_heads, cols};
      s.recipe = c.recipe;
      s.tokens = paged_tokens;
      s.input = dtype;
      s.check_slots = false;
      PagedScales paged_scales;
      paged_scales.k[0] = paged_scales.v[0] = tensor_scale(c.recipe, amax);  // the recipe's parameter of x
      auto* cache = static_cast<std::uint8_t*>(codes);  // count bytes: room for either layout
      const PagedStoreArgs a{x, static_cast<const unsigned char*>(x) + in_bytes / 2, static_cast<const std::int64_t*>(slots),
                             cache, fp8 ? cache + s.layout.buffer_bytes() : nullptr};
      const double p_bytes = static_cast<double>(2 * paged_tokens * paged_heads * cols * bytes_of(dtype) +
                                                 paged_tokens * 8 + (fp8 ? 2 : 1) * s.layout.buffer_bytes());
      double ms = 0, copy_rate = 0;
      e = time_median([&] { return device::paged_store(s, paged_scales, a, nullptr); }, repeats, &ms);
      if (e.ok()) e = copy_gbps(p_bytes, &copy_rate);
      const char* swizzled = swizzle == ScaleSwizzle::v_only ? "-v" : (swizzle == ScaleSwizzle::k_and_v ? "-kv" : "");
      out->push_back({std::string(order == KvOrder::nhd ? "paged-nhd" : "paged-hnd") + swizzled, c.recipe_name,
                      name_of(dtype), p_bytes, ms, p_bytes / (ms * 1e6), copy_rate, copied});
      if (!e.ok()) break;
    }
  }
  for (void* p : {x, codes, scales, y, copy, m, slots}) cudaFree(p);
  return e;
}

}  // namespace kvq::kernels

// MLA layout kernels and the NVFP4 paged -> E4M3 workspace (kernels/mla_kernels.hpp): 2^19
// tokens of each MLA layout (8192 blocks of 64), and a batch of 32 requests x 4096 tokens of an
// NVFP4 cache (block 16, 8 heads, D 128) through shuffled block tables.
#include "kernels/mla_kernels.hpp"

namespace kvq::kernels {
namespace {

std::vector<std::int32_t> shuffled(std::int64_t n) {  // a fixed permutation (xorshift), no device RNG needed
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (std::size_t i = v.size(); i > 1; --i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::swap(v[i - 1], v[x % i]);
  }
  return v;
}

}  // namespace

Status run_mla_benchmarks(int repeats, std::vector<BenchRow>* out) {
  constexpr std::int64_t kBlocks = 8192, kBlockSize = 64, kTokens = kBlocks * kBlockSize;
  const MlaCacheShape c576{MlaLayoutId::fp8_nope_fp8_rope, kBlocks, kBlockSize};
  const MlaCacheShape c656{MlaLayoutId::fp8_nope_block_scale_bf16_rope, kBlocks, kBlockSize};
  const MlaCacheShape cm1{MlaLayoutId::model1_fp8_sparse, kBlocks, kBlockSize};
  const std::size_t x_bytes = static_cast<std::size_t>(kTokens) * 576 * 2;
  void *x = nullptr, *a = nullptr, *b = nullptr, *slots = nullptr, *copy = nullptr;
  Status e = status(cudaMalloc(&x, x_bytes));
  if (e.ok()) e = status(cudaMalloc(&a, x_bytes));
  if (e.ok()) e = status(cudaMalloc(&b, x_bytes));
  if (e.ok()) e = status(cudaMalloc(&copy, x_bytes));
  if (e.ok()) e = status(cudaMalloc(&slots, static_cast<std::size_t>(kTokens) * 8));
  if (e.ok()) {
    const auto perm = shuffled(kTokens);
    const std::vector<std::int64_t> slot_mapping(perm.begin(), perm.end());
    e = status(cudaMemcpy(slots, slot_mapping.data(), slot_mapping.size() * 8, cudaMemcpyHostToDevice));
  }
  if (e.ok()) {
    fill_kernel<<<256, 256>>>(DType::bf16, x, kTokens * 576, 576);
    fill_kernel<<<256, 256>>>(DType::bf16, a, c576.bytes() / 2, 576);  // arbitrary 576-layout bytes
    e = status(cudaDeviceSynchronize());
  }
  const auto row = [&](const char* kernel, const char* what, const char* dtype, double bytes, auto launch) {
    if (!e.ok()) return;
    double ms = 0, copy_rate = 0, copied = 0;
    e = time_median(launch, repeats, &ms);
    if (e.ok()) e = capped_copy_rate(copy, x, x_bytes, bytes, repeats, &copy_rate, &copied);
    out->push_back({kernel, what, dtype, bytes, ms, bytes / (ms * 1e6), copy_rate, copied});
  };
  auto* a8 = static_cast<std::uint8_t*>(a);
  auto* b8 = static_cast<std::uint8_t*>(b);
  const auto* x16 = static_cast<const std::uint16_t*>(x);
  const auto* s64 = static_cast<const std::int64_t*>(slots);
  for (const KScale mode : {KScale::fold, KScale::drop})
    row("requant", mode == KScale::fold ? "mla 576->656 fold" : "mla 576->656 drop", "e4m3",
        static_cast<double>(c576.bytes() + c656.bytes()),
        [&] { return device::mla_requantize_576_to_656(kBlocks, kBlockSize, a8, 0.5f, mode, b8, nullptr); });
  for (const MlaCacheShape& c : {c656, cm1}) {
    const double bytes = static_cast<double>(kTokens * c.desc().dims() * 2 + kTokens * 8 + c.bytes());
    const char* what = c.layout == MlaLayoutId::model1_fp8_sparse ? "mla model1" : "mla 656";
    row("quantize", what, "bf16", bytes,
        [&] { return device::mla_quantize(c, x16, s64, kTokens, b8, nullptr); });
    row("dequantize", what, "bf16", static_cast<double>(c.bytes() + kTokens * c.desc().dims() * 2),
        [&] { return device::mla_dequantize(c, b8, 1.0f, DType::bf16, a, nullptr); });
  }
  // NVFP4 paged cache -> E4M3 workspaces for K and V.
  WorkspaceBatch w{Recipe{}, Nvfp4PageGeometry{0, 16, 8, 128}, 32, 256, 32 * 4096};
  w.pages.num_blocks = w.batch * w.max_blocks_per_seq;
  void *tables = nullptr, *cu = nullptr;
  if (e.ok()) e = status(cudaMalloc(&tables, static_cast<std::size_t>(w.pages.num_blocks) * 4));
  if (e.ok()) e = status(cudaMalloc(&cu, static_cast<std::size_t>(w.batch + 1) * 4));
  if (e.ok() && static_cast<std::size_t>(std::max(w.pages.cache_bytes(), w.workspace_bytes())) > x_bytes)
    e = "workspace benchmark does not fit its buffers";
  if (e.ok()) {
    const auto pages = shuffled(w.pages.num_blocks);
    std::vector<std::int32_t> starts;
    for (std::int64_t r = 0; r <= w.batch; ++r) starts.push_back(static_cast<std::int32_t>(r * 4096));
    e = status(cudaMemcpy(tables, pages.data(), pages.size() * 4, cudaMemcpyHostToDevice));
    if (e.ok()) e = status(cudaMemcpy(cu, starts.data(), starts.size() * 4, cudaMemcpyHostToDevice));
  }
  row("workspace", "nvfp4 paged K+V", "e4m3", static_cast<double>(w.pages.cache_bytes() + 2 * w.workspace_bytes()),
      [&] {
        return device::nvfp4_paged_to_workspace(w, a8, static_cast<const std::int32_t*>(tables),
                                                static_cast<const std::int32_t*>(cu), 1.0f / 6.0f, 1.0f / 6.0f, b8,
                                                static_cast<std::uint8_t*>(copy), nullptr);
      });
  for (void* p : {x, a, b, slots, copy, tables, cu}) cudaFree(p);
  return e;
}

}  // namespace kvq::kernels
