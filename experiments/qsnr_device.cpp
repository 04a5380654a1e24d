#include "experiments/qsnr_device.hpp"

#include <algorithm>
#include <array>
#include <mutex>
#include <utility>

#include "kernels/quantize.hpp"

namespace kvq::experiments {

QsnrTotals qsnr_totals_cpu(const Recipe& r, int n, float g, const std::vector<float>& x) {
  const std::int64_t blocks = static_cast<std::int64_t>(x.size()) / n;
  QsnrTotals t;
  std::vector<double> crest;  // of the blocks that have one, in block order
  for (std::int64_t first = 0; first < blocks; first += kChunkBlocks) {
    ChunkSum chunk;
    for (std::int64_t b = first; b < blocks && b < first + kChunkBlocks; ++b) {
      const BlockPartial p = block_partial(r, g, x.data() + b * n, n);
      add_to_chunk(chunk, p);
      if (p.crest >= 0) crest.push_back(p.crest);
    }
    add_chunk(t.sum, chunk);
  }
  if (!crest.empty()) {
    const auto middle = crest.begin() + static_cast<std::ptrdiff_t>(crest.size() / 2);
    std::nth_element(crest.begin(), middle, crest.end());
    t.crest_median = *middle;
  }
  return t;
}

namespace device {
namespace {

// One GPU's buffers, kept for the process and grown as needed: a study runs hundreds of
// configurations of one size on each GPU, and allocating and freeing hundreds of megabytes for each
// kept the GPUs waiting on the driver. The lock gives them to one call at a time.
struct Scratch {
  std::mutex lock;
  std::vector<std::pair<void*, std::size_t>> slots;
};

// The buffers of one call: the k-th make() of a call gets slot k of the current GPU's scratch (the
// calls make theirs in a fixed order), grown if smaller; the first failure is kept.
class Buffers {
 public:
  Buffers() {
    const int gpu = current_gpu();
    static std::array<Scratch, 64> scratch;
    if (gpu < 0 || gpu >= static_cast<int>(scratch.size())) {
      error = "GPU index " + std::to_string(gpu) + " out of range";
      return;
    }
    scratch_ = &scratch[static_cast<std::size_t>(gpu)];
    hold_ = std::unique_lock<std::mutex>(scratch_->lock);
  }
  void* make(std::size_t bytes) {
    if (!error.empty()) return nullptr;
    if (next_ == scratch_->slots.size()) scratch_->slots.push_back({nullptr, 0});
    auto& [p, size] = scratch_->slots[next_++];
    if (size < bytes) {
      kernels::device::release(p);
      p = nullptr;
      size = 0;
      error = kernels::device::allocate(&p, bytes).message();
      if (error.empty()) size = bytes;
    }
    return p;
  }
  std::string error;

 private:
  Scratch* scratch_ = nullptr;
  std::unique_lock<std::mutex> hold_;
  std::size_t next_ = 0;
};

// sample(d, rows, cols, seed) and its rotation into a new buffer of b: the tables uploaded, the pairs
// and the rotation computed there.
float* draw(const Distribution& d, std::int64_t rows, int cols, std::uint64_t seed, int rotation_block, Buffers& b) {
  const SamplerTables tables = sampler_tables(d, cols);
  SamplerParams params = sampler_params(d, cols, tables);
  const std::int64_t count = rows * cols;
  auto* x = static_cast<float*>(b.make(static_cast<std::size_t>(count) * sizeof(float)));
  auto upload = [&](const std::vector<double>& table) -> const double* {
    void* p = b.make(std::max<std::size_t>(table.size(), 1) * sizeof(double));  // always: fixed slots
    if (b.error.empty() && !table.empty())
      b.error = kernels::device::upload(p, table.data(), table.size() * sizeof(double)).message();
    return table.empty() ? nullptr : static_cast<const double*>(p);
  };
  params.sigma = upload(tables.sigma);
  params.turns = upload(tables.turns);
  if (b.error.empty()) b.error = launch_samples(params, seed, pair_count(rows, cols), count, x);
  if (b.error.empty() && rotation_block > 0)
    b.error = launch_rotation(x, count / rotation_block, rotation_block, rotation_seed(seed, rotation_block));
  return x;
}

}  // namespace

std::string samples(const Distribution& d, std::int64_t rows, int cols, std::uint64_t seed, int rotation_block,
                    std::vector<float>* out) {
  std::string why;
  if (!kernels::device::available(&why)) return why;
  Buffers b;
  const float* x = draw(d, rows, cols, seed, rotation_block, b);
  out->assign(static_cast<std::size_t>(rows * cols), 0.0f);
  if (b.error.empty()) b.error = kernels::device::synchronize().message();
  if (b.error.empty()) b.error = kernels::device::download(out->data(), x, out->size() * sizeof(float)).message();
  return b.error;
}

std::string qsnr_totals_sampled(const Recipe& r, int n, const Distribution& d, std::int64_t rows, int cols,
                                std::uint64_t seed, int rotation_block, QsnrTotals* out) {
  std::string why;
  if (!kernels::device::available(&why)) return why;
  Buffers b;
  const float* x = draw(d, rows, cols, seed, rotation_block, b);
  const std::int64_t count = rows * cols, blocks = count / n, chunks = (blocks + kChunkBlocks - 1) / kChunkBlocks;
  auto* amax_dev = static_cast<float*>(b.make(sizeof(float)));
  auto* partials = static_cast<BlockPartial*>(b.make(static_cast<std::size_t>(blocks) * sizeof(BlockPartial)));
  auto* chunk_sums = static_cast<ChunkSum*>(b.make(static_cast<std::size_t>(chunks) * sizeof(ChunkSum)));
  auto* crest = static_cast<double*>(b.make(static_cast<std::size_t>(blocks) * sizeof(double)));
  auto* hist = static_cast<unsigned*>(b.make(256 * sizeof(unsigned)));
  auto* select = static_cast<SelectState*>(b.make(sizeof(SelectState)));
  // Queued without a round trip: amax, the sums (g from the amax on the device), the crest median.
  if (b.error.empty()) b.error = kernels::device::amax(kernels::DType::fp32, x, count, amax_dev, nullptr).message();
  if (b.error.empty()) b.error = launch_qsnr_sums(r, n, amax_dev, x, blocks, partials, chunk_sums, crest);
  if (b.error.empty()) b.error = launch_median_select(crest, blocks, hist, select);
  if (b.error.empty()) b.error = kernels::device::synchronize().message();
  std::vector<ChunkSum> sums(static_cast<std::size_t>(chunks));
  SelectState median;
  if (b.error.empty()) b.error = kernels::device::download(sums.data(), chunk_sums, sums.size() * sizeof(ChunkSum)).message();
  if (b.error.empty()) b.error = kernels::device::download(&median, select, sizeof median).message();
  if (!b.error.empty()) return b.error;
  out->sum = ChunkSum{};
  for (const ChunkSum& c : sums) add_chunk(out->sum, c);  // in chunk order, as qsnr_totals_cpu
  out->crest_median = out->sum.crest_blocks > 0 ? double_from_bits(median.prefix) : 0.0;
  if (median.valid != out->sum.crest_blocks) return "crest median: the select counted a different number of blocks";
  return {};
}

}  // namespace device
}  // namespace kvq::experiments
