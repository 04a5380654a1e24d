// `kvq study attention`: the error that reaches the model. Exact attention softmax(Q K^T / sqrt(d)) V
// in double against the same attention over dequantized K and V, per recipe (and NVFP4 read through
// the FP8 prefill workspace), on synthetic KV heads (kv-keys for Q and K, kv-values for V).
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "experiments/distributions.hpp"
#include "experiments/quantized_tensor.hpp"
#include "experiments/studies.hpp"

namespace kvq::experiments {
namespace {

constexpr std::string_view kWorkspace = "nvfp4-fp8-workspace";
constexpr int kTopK = 16;

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

Matrix to_matrix(const std::vector<float>& v, std::int64_t rows, int cols) {
  Matrix m(rows, cols);
  for (std::int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m(r, c) = v[r * cols + c];
  return m;
}

// Dequantized through the recipe; the workspace: NVFP4 codes to E4M3 with the decode scale 6g
// (factor RN(1/6), docs/recipes.md), read back as e4m3 * (6g) in FP32.
// on_device: quantize and dequantize by the GPU kernels (the workspace step runs on the CPU twin).
std::vector<float> through(const std::string& recipe, const std::vector<float>& x, std::int64_t rows, int cols,
                           bool on_device, double* qsnr_db) {
  const bool workspace = recipe == kWorkspace;
  const QuantizedTensor q =
      quantize_tensor(recipe_from_name(workspace ? "nvfp4" : recipe)->recipe, x, rows, cols, on_device);
  std::vector<float> y = q.values;
  if (workspace) {
    std::vector<std::uint8_t> ws(x.size());
    const Status e = kernels::requantize_e4m3_cpu(q.shape, q.codes.data(), q.scales.data(), 1.0f / 6.0f, ws.data());
    if (!e.ok()) throw std::runtime_error(e.message());
    const float decode = 6.0f * q.g;
    for (std::size_t k = 0; k < ws.size(); ++k) y[k] = e4m3_value_fast(ws[k]) * decode;
  }
  double err2 = 0, x2 = 0;
  for (std::size_t k = 0; k < x.size(); ++k) {
    const double d = static_cast<double>(x[k]) - y[k];
    err2 += d * d;
    x2 += static_cast<double>(x[k]) * x[k];
  }
  *qsnr_db = -10.0 * std::log10(err2 / x2);
  return y;
}

Matrix softmax_rows(const Matrix& scores) {
  Matrix p = scores;
  for (Eigen::Index r = 0; r < p.rows(); ++r) {
    p.row(r).array() -= p.row(r).maxCoeff();
    p.row(r) = p.row(r).array().exp().matrix();
    p.row(r) /= p.row(r).sum();
  }
  return p;
}

std::vector<Eigen::Index> top_k(const Eigen::RowVectorXd& p, int k) {
  std::vector<Eigen::Index> idx(static_cast<std::size_t>(p.size()));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](Eigen::Index a, Eigen::Index b) {
    return p(a) > p(b) || (p(a) == p(b) && a < b);
  });
  idx.resize(static_cast<std::size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::string measure(const std::string& recipe, int seq_len, const StudyOptions& o, SampleCache& cache) {
  const int d = o.head_dim;
  const auto keys = *distribution_from_name("kv-keys", nullptr), values = *distribution_from_name("kv-values", nullptr);
  double out_err2 = 0, out2 = 0, kl_sum = 0, kl_max = 0, top1 = 0, topk = 0, k_qsnr = 0, v_qsnr = 0;
  const std::uint64_t seed = data_seed(o.seed, "attention-" + std::to_string(seq_len));
  for (int h = 0; h < o.heads; ++h) {
    const std::uint64_t head_seed = seed + 3 * static_cast<std::uint64_t>(h);
    auto draw = [&](const Distribution& dist, std::uint64_t s) {
      return cache.get(std::to_string(seq_len) + "/" + std::to_string(s), [&] { return sample(dist, seq_len, d, s); });
    };
    const auto k_ptr = draw(keys, head_seed), v_ptr = draw(values, head_seed + 1);
    const std::vector<float>& k = *k_ptr;
    const std::vector<float>& v = *v_ptr;
    // Queries: the last `queries` positions of a third kv-keys draw (RoPE at those positions).
    const auto q_all = draw(keys, head_seed + 2);
    const std::vector<float> q(q_all->end() - static_cast<std::ptrdiff_t>(o.queries) * d, q_all->end());
    double kq = 0, vq = 0;
    const Matrix K = to_matrix(k, seq_len, d), V = to_matrix(v, seq_len, d), Q = to_matrix(q, o.queries, d);
    const Matrix Kq = to_matrix(through(recipe, k, seq_len, d, o.device == "cuda", &kq), seq_len, d);
    const Matrix Vq = to_matrix(through(recipe, v, seq_len, d, o.device == "cuda", &vq), seq_len, d);
    k_qsnr += kq / o.heads;
    v_qsnr += vq / o.heads;
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const Matrix P = softmax_rows((Q * K.transpose()) * scale), Pq = softmax_rows((Q * Kq.transpose()) * scale);
    const Matrix O = P * V, Oq = Pq * Vq;
    out_err2 += (O - Oq).squaredNorm();
    out2 += O.squaredNorm();
    for (int r = 0; r < o.queries; ++r) {
      double kl = 0;
      for (int j = 0; j < seq_len; ++j)
        if (P(r, j) > 0) kl += P(r, j) * (std::log(P(r, j)) - std::log(Pq(r, j)));
      kl_sum += kl;
      kl_max = std::max(kl_max, kl);
      Eigen::Index a = 0, b = 0;
      P.row(r).maxCoeff(&a);
      Pq.row(r).maxCoeff(&b);
      top1 += a == b;
      const auto ta = top_k(P.row(r), std::min(kTopK, seq_len)), tb = top_k(Pq.row(r), std::min(kTopK, seq_len));
      std::vector<Eigen::Index> both;
      std::set_intersection(ta.begin(), ta.end(), tb.begin(), tb.end(), std::back_inserter(both));
      topk += static_cast<double>(both.size()) / static_cast<double>(ta.size());
    }
  }
  const double rows = static_cast<double>(o.heads) * o.queries;
  const Recipe r = recipe_from_name(recipe == kWorkspace ? "nvfp4" : recipe)->recipe;
  return recipe + "," + std::to_string(r.scale == BlockScale::tensor_only ? 0 : r.block) + "," + std::to_string(seq_len) +
         "," + std::to_string(o.heads) + "," + std::to_string(o.queries) + "," + std::to_string(d) + "," +
         std::to_string(seed) + "," + csv_number(std::sqrt(out_err2 / out2)) + "," + csv_number(kl_sum / rows) + "," +
         csv_number(kl_max) + "," + csv_number(top1 / rows) + "," + csv_number(topk / rows) + "," + csv_number(k_qsnr) +
         "," + csv_number(v_qsnr);
}

}  // namespace

std::string make_attention_study(const StudyOptions& o, StudyGrid* grid) {
  if (o.head_dim <= 0 || o.head_dim % 128 != 0) return "--head-dim must be a positive multiple of 128 (MLA tiles)";
  if (o.heads <= 0) return "--heads must be > 0";
  std::vector<NamedRecipe> recipes;
  if (auto e = recipes_from_names(o.recipes, &recipes); !e.empty()) return e;
  std::vector<std::string> names;
  for (const NamedRecipe& r : recipes) {
    names.emplace_back(r.name);
    if (r.name == "nvfp4") names.emplace_back(kWorkspace);
  }
  struct Config {
    std::string recipe;
    int seq_len;
  };
  std::vector<Config> configs;
  for (const int s : o.seq_lens) {
    if (s < o.queries || s <= 0 || o.queries <= 0) return "--seq-lens: each must be >= --queries (" + std::to_string(o.queries) + ") and > 0";
    for (const std::string& n : names) configs.push_back({n, s});
  }
  grid->name = "attention";
  grid->header =
      "recipe,block,seq_len,heads,queries,head_dim,seed,out_rel_error,kl_mean,kl_max,top1_agree,top16_agree,"
      "k_qsnr_db,v_qsnr_db";
  for (const Config& c : configs) grid->labels.push_back(c.recipe + " seq " + std::to_string(c.seq_len));
  auto cache = std::make_shared<SampleCache>();
  grid->run = [configs, o, cache](std::size_t i) {
    select_study_gpu(o, i);
    return std::vector<std::string>{measure(configs[i].recipe, configs[i].seq_len, o, *cache)};
  };
  grid->manifest =
      "  \"attention\": \"softmax(Q K^T / sqrt(d)) V in double; K, V dequantized (FP32) per recipe, Q exact\",\n"
      "  \"data\": \"K and Q: kv-keys (Q the last --queries positions of its own draw), V: kv-values; one tensor "
      "scale per head\",\n"
      "  \"workspace\": \"nvfp4-fp8-workspace: NVFP4 codes requantized to E4M3 with decode scale 6g\",\n"
      "  \"metrics\": \"out_rel_error = ||O - Oq||_F / ||O||_F pooled; KL(P || Pq) per query row; top-1 and top-16 "
      "agreement of attention weights\",\n" +
      recipes_manifest(recipes);
  return {};
}

}  // namespace kvq::experiments
