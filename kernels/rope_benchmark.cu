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
  Buffers b;
  const std::int64_t in_bytes = bytes_of(s.input);
  const std::int64_t kv_elems = s.tokens * s.kv_heads * s.head_dim;
  RopeInputs in;
  in.q_rope = b.make<std::uint8_t>(s.tokens * s.q_heads * s.rope_dim * in_bytes, 0x3C);  // BF16 0x3C3C ~ 0.0115
  in.q_nope = b.make<std::uint8_t>(s.tokens * s.q_heads * s.nope_dim() * in_bytes, 0x3C);
  in.k_rope = b.make<std::uint8_t>(s.tokens * s.kv_heads * s.rope_dim * in_bytes, 0x3C);
  in.k_nope = b.make<std::uint8_t>(s.tokens * s.kv_heads * s.nope_dim() * in_bytes, 0x3C);
  in.v = s.mla() ? nullptr : b.make<std::uint8_t>(kv_elems * in_bytes, 0x3C);
  in.cos_sin_cache = b.make<float>(s.max_pos * s.rope_dim, 0x3F);  // 0.747
  std::vector<std::int32_t> positions(s.tokens), batch_indices(s.tokens), indptr(s.batch + 1), indices(s.num_page_indices);
  for (std::int64_t i = 0; i < s.tokens; ++i) {
    positions[i] = static_cast<std::int32_t>(i % kRopeBenchRequest);
    batch_indices[i] = static_cast<std::int32_t>(i / kRopeBenchRequest);
  }
  for (std::int64_t r = 0; r <= s.batch; ++r) indptr[r] = static_cast<std::int32_t>(r * (kRopeBenchRequest / s.page_size));
  std::iota(indices.begin(), indices.end(), 0);
  in.pos_ids = b.upload(positions);
  const PageTable t{b.upload(indptr), b.upload(indices), b.upload(batch_indices), in.pos_ids};
  const QOutputs q{b.make<std::uint8_t>(s.q_rope_bytes(), 0), b.make<std::uint8_t>(s.q_nope_bytes(), 0)};
  const std::int64_t slots = s.cache_slots();
  const KvBuffers cache{b.make<std::uint8_t>(s.k_bytes(slots), 0), b.make<std::uint8_t>(s.v_bytes(slots), 0),
                        b.make<std::uint8_t>(s.ckv_bytes(slots), 0), b.make<std::uint8_t>(s.kpe_bytes(slots), 0)};
  const KvBuffers mid{b.make<std::uint8_t>(s.k_bytes(s.tokens), 0), b.make<std::uint8_t>(s.v_bytes(s.tokens), 0),
                      b.make<std::uint8_t>(s.ckv_bytes(s.tokens), 0), b.make<std::uint8_t>(s.kpe_bytes(s.tokens), 0)};
  const RopeBenchBytes moved = rope_bench_bytes(s);
  const std::int64_t copy_bytes = static_cast<std::int64_t>(moved.fused / 2);
  auto* copy_src = b.make<std::uint8_t>(copy_bytes, 0);
  auto* copy_dst = b.make<std::uint8_t>(copy_bytes, 0);
  if (!b.error.ok()) return b.error;
  const std::string label = rope_bench_label(s);
  double copy_gbps = 0;
  Status e = copy_rate(copy_dst, copy_src, 2 * static_cast<std::size_t>(copy_bytes), repeats, &copy_gbps);
  auto row = [&](const char* kernel, double bytes, const std::function<Status()>& launch) {
    double ms = 0;
    if (e.ok()) e = time_median(launch, repeats, &ms);
    if (e.ok())
      out->push_back({kernel, label, name_of(s.input), bytes, ms, bytes / (ms * 1e6), copy_gbps, 2.0 * static_cast<double>(copy_bytes)});
  };
  row("rope-fused", moved.fused, [&] { return device::rope_append(s, in, q, cache, t, nullptr); });
  if (s.layout == KvLayout::nhd)  // contiguous output: an HND shape's row would time the same kernel again
    row("rope-quant", moved.fused, [&] { return device::rope_quantize(s, in, q, mid, t.batch_indices, nullptr); });
  row("rope-append", moved.append, [&] { return device::append_paged(s, mid, cache, t, nullptr); });
  row("rope-pair", moved.fused + moved.append, [&] {
    Status err = device::rope_quantize(s, in, q, mid, t.batch_indices, nullptr);
    return err.ok() ? device::append_paged(s, mid, cache, t, nullptr) : err;
  });
  return e;
}

}  // namespace

Status run_rope_benchmarks(DType dtype, std::int64_t tokens, int repeats, std::vector<BenchRow>* rows_out) {
  for (const RopeShape& s : rope_bench_shapes(dtype, tokens))
    if (Status e = bench_one(s, repeats, rows_out); !e.ok()) return e;
  return {};
}

}  // namespace kvq::kernels
