#include <cuda_runtime.h>

#include <algorithm>
#include <numeric>

#include "kernels/device_launch.cuh"
#include "kernels/rope_append.hpp"
#include "kernels/rope_benchmark.hpp"

namespace kvq::kernels {
namespace {

using launch::status;

// Device buffers of one benchmark, freed together.
struct Buffers {
  std::vector<void*> owned;
  Status error;
  template <typename T>
  T* make(std::int64_t count, std::uint8_t fill) {
    void* p = nullptr;
    if (error.ok()) error = status(cudaMalloc(&p, static_cast<std::size_t>(std::max<std::int64_t>(count, 1)) * sizeof(T)));
    if (error.ok()) owned.push_back(p);
    if (error.ok()) error = status(cudaMemset(p, fill, static_cast<std::size_t>(count) * sizeof(T)));
    return static_cast<T*>(p);
  }
  template <typename T>
  T* upload(const std::vector<T>& host) {
    T* p = make<T>(static_cast<std::int64_t>(host.size()), 0);
    if (error.ok()) error = status(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
  }
  ~Buffers() {
    for (void* p : owned) cudaFree(p);
  }
};

Status bench_one(const RopeShape& s, int repeats, std::vector<BenchRow>* out) {
  constexpr int kRequest = 256;
  Buffers b;
  const std::int64_t in_bytes = bytes_of(s.input);
  const std::int64_t q_elems = s.tokens * s.q_heads * s.head_dim, kv_elems = s.tokens * s.kv_heads * s.head_dim;
  RopeInputs in;
  in.q_rope = b.make<std::uint8_t>(s.tokens * s.q_heads * s.rope_dim * in_bytes, 0x3C);  // BF16 0x3C3C ~ 0.0115
  in.q_nope = b.make<std::uint8_t>(s.tokens * s.q_heads * s.nope_dim() * in_bytes, 0x3C);
  in.k_rope = b.make<std::uint8_t>(s.tokens * s.kv_heads * s.rope_dim * in_bytes, 0x3C);
  in.k_nope = b.make<std::uint8_t>(s.tokens * s.kv_heads * s.nope_dim() * in_bytes, 0x3C);
  in.v = s.mla() ? nullptr : b.make<std::uint8_t>(kv_elems * in_bytes, 0x3C);
  in.cos_sin_cache = b.make<float>(s.max_pos * s.rope_dim, 0x3F);  // 0.747
  std::vector<std::int32_t> positions(s.tokens), batch_indices(s.tokens), indptr(s.batch + 1), indices(s.num_page_indices);
  for (std::int64_t i = 0; i < s.tokens; ++i) {
    positions[i] = static_cast<std::int32_t>(i % kRequest);
    batch_indices[i] = static_cast<std::int32_t>(i / kRequest);
  }
  for (std::int64_t r = 0; r <= s.batch; ++r) indptr[r] = static_cast<std::int32_t>(r * (kRequest / s.page_size));
  std::iota(indices.begin(), indices.end(), 0);
  in.pos_ids = b.upload(positions);
  const PageTable t{b.upload(indptr), b.upload(indices), b.upload(batch_indices), in.pos_ids};
  const QOutputs q{b.make<std::uint8_t>(s.q_rope_bytes(), 0), b.make<std::uint8_t>(s.q_nope_bytes(), 0)};
  const std::int64_t slots = s.cache_slots();
  const KvBuffers cache{b.make<std::uint8_t>(s.k_bytes(slots), 0), b.make<std::uint8_t>(s.v_bytes(slots), 0),
                        b.make<std::uint8_t>(s.ckv_bytes(slots), 0), b.make<std::uint8_t>(s.kpe_bytes(slots), 0)};
  const KvBuffers mid{b.make<std::uint8_t>(s.k_bytes(s.tokens), 0), b.make<std::uint8_t>(s.v_bytes(s.tokens), 0),
                      b.make<std::uint8_t>(s.ckv_bytes(s.tokens), 0), b.make<std::uint8_t>(s.kpe_bytes(s.tokens), 0)};
  // Bytes each kernel must move: inputs, one cos/sin row and four indices per token, FP8 outputs.
  const double kv_out = static_cast<double>(s.mla() ? s.tokens * s.head_dim : 2 * kv_elems);
  const double inputs = static_cast<double>((q_elems + (s.mla() ? s.tokens * s.head_dim : 2 * kv_elems)) * in_bytes +
                                            s.tokens * (s.rope_dim * 4 + 16));
  const double fused_bytes = inputs + static_cast<double>(q_elems) + kv_out;
  const double append_bytes = 2 * kv_out + static_cast<double>(s.tokens * 16);
  const std::int64_t copy_bytes = static_cast<std::int64_t>(fused_bytes / 2);
  auto* copy_src = b.make<std::uint8_t>(copy_bytes, 0);
  auto* copy_dst = b.make<std::uint8_t>(copy_bytes, 0);
  if (!b.error.ok()) return b.error;
  const std::string label = std::string(name_of(s.attention)) + "-" + name_of(s.style) + "-" + std::to_string(s.tokens);
  double copy_gbps = 0;
  Status e = copy_rate(copy_dst, copy_src, 2 * static_cast<std::size_t>(copy_bytes), repeats, &copy_gbps);
  auto row = [&](const char* kernel, double bytes, const std::function<Status()>& launch) {
    double ms = 0;
    if (e.ok()) e = time_median(launch, repeats, &ms);
    if (e.ok()) out->push_back({kernel, label, name_of(s.input), bytes, ms, bytes / (ms * 1e6), copy_gbps});
  };
  row("rope-fused", fused_bytes, [&] { return device::rope_append(s, in, q, cache, t, nullptr); });
  row("rope-quant", fused_bytes, [&] { return device::rope_quantize(s, in, q, mid, t.batch_indices, nullptr); });
  row("rope-append", append_bytes, [&] { return device::append_paged(s, mid, cache, t, nullptr); });
  row("rope-pair", fused_bytes + append_bytes, [&] {
    Status err = device::rope_quantize(s, in, q, mid, t.batch_indices, nullptr);
    return err.ok() ? device::append_paged(s, mid, cache, t, nullptr) : err;
  });
  return e;
}

}  // namespace

Status run_rope_benchmarks(DType dtype, std::int64_t tokens, int repeats, std::vector<BenchRow>* rows_out) {
  const std::int64_t n = (tokens + 255) / 256 * 256;  // whole requests of 256 tokens, 16 pages each
  RopeShape mha{.input = dtype, .tokens = n, .batch = n / 256, .q_heads = 32, .kv_heads = 8, .head_dim = 128,
                .rope_dim = 128, .max_pos = 256, .page_size = 16, .num_pages = n / 16, .num_page_indices = n / 16};
  RopeShape mla = mha;
  mla.attention = Attention::mla;
  mla.q_heads = 16;
  mla.kv_heads = 1;
  mla.head_dim = 576;
  mla.rope_dim = 64;
  Status e = bench_one(mha, repeats, rows_out);
  if (e.ok()) {
    mha.style = RopeStyle::gptj;
    e = bench_one(mha, repeats, rows_out);
  }
  return e.ok() ? bench_one(mla, repeats, rows_out) : e;
}

}  // namespace kvq::kernels
