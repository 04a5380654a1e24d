#include "experiments/qsnr_device.hpp"

#include "kernels/quantize.hpp"

namespace kvq::experiments {

QsnrTotals qsnr_totals_cpu(const Recipe& r, int n, float g, const std::vector<float>& x) {
  const std::int64_t blocks = static_cast<std::int64_t>(x.size()) / n;
  QsnrTotals t;
  t.crest.resize(static_cast<std::size_t>(blocks));
  for (std::int64_t first = 0; first < blocks; first += kChunkBlocks) {
    ChunkSum chunk;
    for (std::int64_t b = first; b < blocks && b < first + kChunkBlocks; ++b) {
      const BlockPartial p = block_partial(r, g, x.data() + b * n, n);
      add_to_chunk(chunk, p);
      t.crest[b] = p.crest;
    }
    add_chunk(t.sum, chunk);
  }
  return t;
}

namespace device {

std::string qsnr_totals(const Recipe& r, int n, float g, const std::vector<float>& x, QsnrTotals* out) {
  std::string why;
  if (!kernels::device::available(&why)) return why;
  const std::int64_t blocks = static_cast<std::int64_t>(x.size()) / n;
  const std::int64_t chunks = (blocks + kChunkBlocks - 1) / kChunkBlocks;
  void *x_dev = nullptr, *partials = nullptr, *chunk_sums = nullptr, *crest = nullptr;
  Status e = kernels::device::allocate(&x_dev, x.size() * sizeof(float));
  if (e.ok()) e = kernels::device::allocate(&partials, static_cast<std::size_t>(blocks) * sizeof(BlockPartial));
  if (e.ok()) e = kernels::device::allocate(&chunk_sums, static_cast<std::size_t>(chunks) * sizeof(ChunkSum));
  if (e.ok()) e = kernels::device::allocate(&crest, static_cast<std::size_t>(blocks) * sizeof(double));
  if (e.ok()) e = kernels::device::upload(x_dev, x.data(), x.size() * sizeof(float));
  if (e.ok())
    e = launch_qsnr_sums(r, n, g, static_cast<const float*>(x_dev), blocks, static_cast<BlockPartial*>(partials),
                         static_cast<ChunkSum*>(chunk_sums), static_cast<double*>(crest));
  if (e.ok()) e = kernels::device::synchronize();
  std::vector<ChunkSum> sums(static_cast<std::size_t>(chunks));
  out->crest.resize(static_cast<std::size_t>(blocks));
  if (e.ok()) e = kernels::device::download(sums.data(), chunk_sums, sums.size() * sizeof(ChunkSum));
  if (e.ok()) e = kernels::device::download(out->crest.data(), crest, out->crest.size() * sizeof(double));
  for (void* p : {x_dev, partials, chunk_sums, crest}) kernels::device::release(p);
  if (!e.ok()) return e.message();
  out->sum = ChunkSum{};
  for (const ChunkSum& c : sums) add_chunk(out->sum, c);  // in chunk order, as qsnr_totals_cpu
  return {};
}

}  // namespace device
}  // namespace kvq::experiments
