// `kvq study crest`: QSNR as a function of the block crest factor kappa = max|x| / rms(x), simulated
// (blocks of controlled crest, binned by their measured kappa) and from the closed-form model, for
// INT/FP pairs of block formats; and the crossover kappa of each pair from both (crest_crossover.csv).
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "experiments/block_formats.hpp"
#include "experiments/distributions.hpp"
#include "experiments/studies.hpp"
#include "formats/recipes.hpp"

namespace kvq::experiments {
namespace {

struct FormatPair {
  std::string_view name;
  BlockFormat int_format, fp_format;
};

constexpr auto kE8M0 = BlockScaleKind::e8m0_floor;
constexpr auto kE4M3 = BlockScaleKind::e4m3_two_level;
const std::array<FormatPair, 5> kPairs{{
    {"mxint8/mxfp8", {"MXINT8", FormatId::int8, true, kE8M0}, {"MXFP8", FormatId::e4m3fn, false, kE8M0}},
    {"mxint6/mxfp6", {"MXINT6", FormatId::int6, true, kE8M0}, {"MXFP6", FormatId::e2m3, false, kE8M0}},
    {"mxint6/mxfp6-e3m2", {"MXINT6", FormatId::int6, true, kE8M0}, {"MXFP6-E3M2", FormatId::e3m2, false, kE8M0}},
    {"mxint4/mxfp4", {"MXINT4", FormatId::int4, true, kE8M0}, {"MXFP4", FormatId::e2m1, false, kE8M0}},
    {"nvint4/nvfp4", {"NVINT4", FormatId::int4, true, kE4M3}, {"NVFP4", FormatId::e2m1, false, kE4M3}},
}};

constexpr double kBinWidth = 0.25;
constexpr std::int64_t kMinBlocksForCrossover = 64;

// Blocks spanning the reachable crest range [1, sqrt(n)]: i.i.d. Gaussian, Laplace or uniform values,
// one of them multiplied by an outlier factor 2^U (U uniform on [0, log2(2 sqrt n)]), and the block
// by 2^V (V uniform on [0, 1)) so that a power-of-two scale meets every position in its binade.
std::vector<float> crest_blocks(std::int64_t blocks, int n, std::uint64_t seed) {
  std::vector<float> x(static_cast<std::size_t>(blocks) * n);
  const double top = std::log2(2.0 * std::sqrt(static_cast<double>(n)));
  for (std::int64_t b = 0; b < blocks; ++b) {
    CounterRng rng(seed, static_cast<std::uint64_t>(b));  // block b's own stream (samplers.hpp)
    NormalDraws normal(&rng);
    const std::uint64_t kind = rng.next() % 3;
    const int outlier = static_cast<int>(rng.next() % static_cast<std::uint64_t>(n));
    const double factor = std::exp2(top * rng.uniform()), dither = std::exp2(rng.uniform());
    for (int i = 0; i < n; ++i) {
      double v = 0;
      if (kind == 0) v = normal.next();
      if (kind == 1) v = rng.uniform() * 2.0 - 1.0;
      if (kind == 2) {  // Laplace, b = 1: two draws in a fixed order (operands of * are unsequenced)
        const double magnitude = log_ieee(rng.uniform_open0());
        v = (rng.next() & 1) ? magnitude : -magnitude;
      }
      if (i == outlier) v *= factor;
      x[b * n + i] = static_cast<float>(v * dither);
    }
  }
  return x;
}

struct Bin {
  std::int64_t blocks = 0;
  double crest_sum = 0, x2 = 0, int_err2 = 0, fp_err2 = 0;
};

double pooled_error2(const BlockFormat& f, const std::vector<float>& x, int n, std::vector<double>* per_block) {
  float amax = 0;
  for (const float v : x) amax = std::fabs(v) > amax ? std::fabs(v) : amax;
  const float g = tensor_scale(block_format_recipe(f, n), amax);
  std::vector<std::uint8_t> codes(n);
  std::vector<float> y(n);
  double total = 0;
  for (std::size_t b = 0; b * n < x.size(); ++b) {
    quantize_block_format(f, g, x.data() + b * n, n, codes.data(), y.data());
    double e2 = 0;
    for (int i = 0; i < n; ++i) {
      const double d = static_cast<double>(x[b * n + i]) - static_cast<double>(y[i]);
      e2 += d * d;
    }
    (*per_block)[b] = e2;
    total += e2;
  }
  return total;
}

std::vector<std::string> measure(const FormatPair& pair, int n, const StudyOptions& o) {
  const std::int64_t blocks = (o.samples + n - 1) / n;
  const std::uint64_t seed = data_seed(o.seed, "crest-block" + std::to_string(n));
  const std::vector<float> x = crest_blocks(blocks, n, seed);
  std::vector<double> int_err(blocks), fp_err(blocks);
  pooled_error2(pair.int_format, x, n, &int_err);
  pooled_error2(pair.fp_format, x, n, &fp_err);
  std::map<int, Bin> bins;
  for (std::int64_t b = 0; b < blocks; ++b) {
    double mx = 0, x2 = 0;
    for (int i = 0; i < n; ++i) {
      const double v = x[b * n + i];
      mx = std::max(mx, std::fabs(v));
      x2 += v * v;
    }
    if (x2 == 0) continue;
    const double crest = mx / std::sqrt(x2 / n);
    Bin& bin = bins[static_cast<int>(std::floor((crest - 1.0) / kBinWidth))];
    ++bin.blocks;
    bin.crest_sum += crest;
    bin.x2 += x2;
    bin.int_err2 += int_err[b];
    bin.fp_err2 += fp_err[b];
  }
  const double rho = model_rho(pair.int_format.scale);
  std::vector<std::string> rows;
  for (const auto& [index, bin] : bins) {
    const double crest = bin.crest_sum / static_cast<double>(bin.blocks);
    rows.push_back(std::string(pair.name) + "," + std::string(pair.int_format.name) + "," + std::string(pair.fp_format.name) +
                   "," + std::to_string(n) + "," + (pair.int_format.scale == kE8M0 ? "e8m0" : "e4m3") + "," +
                   csv_number(rho) + "," + csv_number(1.0 + index * kBinWidth) + "," +
                   csv_number(1.0 + (index + 1) * kBinWidth) + "," + csv_number(crest) + "," + std::to_string(bin.blocks) +
                   "," + csv_number(-10.0 * std::log10(bin.int_err2 / bin.x2)) + "," +
                   csv_number(-10.0 * std::log10(bin.fp_err2 / bin.x2)) + "," +
                   csv_number(model_qsnr_db(pair.int_format, rho, crest)) + "," +
                   csv_number(model_qsnr_db(pair.fp_format, rho, crest)) + "," + std::to_string(blocks * n) + "," +
                   std::to_string(seed));
  }
  return rows;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string item; std::getline(ss, item, ',');) f.push_back(item);
  return f;
}

// crest_crossover.csv from the rows of crest.csv; crest_model.csv: the model curves.
std::string write_crossovers(const std::string& dir, const std::vector<std::string>& rows) {
  struct Series {
    std::vector<std::array<double, 3>> points;  // crest_mean, int - fp (simulated), blocks
  };
  std::map<std::pair<std::string, int>, Series> series;
  for (const std::string& row : rows) {
    const auto f = split_csv(row);
    series[{f[0], std::stoi(f[3])}].points.push_back({std::stod(f[8]), std::stod(f[10]) - std::stod(f[11]), std::stod(f[9])});
  }
  std::string csv = "pair,block,scale,rho,kappa_model,kappa_sim,kappa_sim_max\n";
  for (const FormatPair& pair : kPairs) {
    const double rho = model_rho(pair.int_format.scale);
    const double model = model_crossover(pair.int_format, pair.fp_format, rho);
    for (const auto& [key, s] : series) {
      if (key.first != pair.name) continue;
      double sim = std::numeric_limits<double>::quiet_NaN(), reached = 0;
      const std::array<double, 3>* previous = nullptr;
      for (const auto& p : s.points) {
        if (p[2] < kMinBlocksForCrossover) continue;
        reached = p[0];
        if (previous && (*previous)[1] > 0 && p[1] <= 0 && std::isnan(sim))
          sim = (*previous)[0] + ((*previous)[1] / ((*previous)[1] - p[1])) * (p[0] - (*previous)[0]);
        previous = &p;
      }
      csv += std::string(pair.name) + "," + std::to_string(key.second) + "," +
             (pair.int_format.scale == kE8M0 ? "e8m0" : "e4m3") + "," + csv_number(rho) + "," + csv_number(model) + "," +
             csv_number(sim) + "," + csv_number(reached) + "\n";
    }
  }
  std::string curves = "format,scale,rho,kappa,qsnr_model_db\n";
  for (const FormatPair& pair : kPairs)
    for (const BlockFormat* f : {&pair.int_format, &pair.fp_format}) {
      if (f == &pair.int_format && pair.name == "mxint6/mxfp6-e3m2") continue;  // MXINT6 once
      const double rho = model_rho(f->scale);
      for (int k = 0; k <= 150; ++k) {
        const double kappa = 1.0 + k * 0.1;
        curves += std::string(f->name) + "," + (f->scale == kE8M0 ? "e8m0" : "e4m3") + "," + csv_number(rho) + "," +
                  csv_number(kappa) + "," + csv_number(model_qsnr_db(*f, rho, kappa)) + "\n";
      }
    }
  if (auto e = write_text_file(dir + "/crest_crossover.csv", csv); !e.empty()) return e;
  return write_text_file(dir + "/crest_model.csv", curves);
}

}  // namespace

std::string make_crest_study(const StudyOptions& o, StudyGrid* grid) {
  if (o.samples <= 0) return "--samples must be > 0";
  struct Config {
    const FormatPair* pair;
    int block;
  };
  std::vector<Config> configs;
  for (const int block : o.blocks) {
    if (block < 2 || block > kMaxRecipeBlock) return "--blocks: " + std::to_string(block) + " must be in 2..128";
    for (const FormatPair& pair : kPairs) configs.push_back({&pair, block});
  }
  grid->name = "crest";
  grid->header =
      "pair,int_format,fp_format,block,scale,rho,crest_lo,crest_hi,crest_mean,blocks,int_qsnr_db,fp_qsnr_db,"
      "int_model_db,fp_model_db,samples,seed";
  for (const Config& c : configs) grid->labels.push_back(std::string(c.pair->name) + " block " + std::to_string(c.block));
  grid->run = [configs, o](std::size_t i) { return measure(*configs[i].pair, configs[i].block, o); };
  grid->manifest =
      "  \"qsnr\": \"pooled over the blocks of a crest bin: -10 log10(sum (x - dq)^2 / sum x^2)\",\n"
      "  \"crest_bins\": " + csv_number(kBinWidth) + ",\n"
      "  \"model\": \"Gaussian block, max mapped to max(element)/rho; INT: 12 (2^(b-1)-1)^2 / (rho kappa)^2; FP: "
      "per-binade step^2/12 (docs/studies.md)\",\n"
      "  \"rho\": {\"e8m0\": 1.5, \"e4m3\": 1.0},\n";
  grid->finish = write_crossovers;
  return {};
}

}  // namespace kvq::experiments
