// kvq study qsnr: the error studies of experiments/ from the command line.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "cli/commands.hpp"
#include "experiments/qsnr_study.hpp"
#include "formats/recipe_names.hpp"

namespace kvq::cli {
namespace {

constexpr const char* kStudyUsage =
    "usage: kvq study qsnr --out DIR [--recipes a,b] [--blocks 16,32] [--dist a,b] [--samples N]\n"
    "                      [--seed S] [--rotate none|hadamard] [--head-dim D] [--shard I/N]\n"
    "  distributions: gaussian laplace student-t:NU uniform kv-keys kv-values (unit variance)\n";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

bool parse_int(const std::string& s, long long* v) {
  try {
    std::size_t used = 0;
    *v = std::stoll(s, &used);
    return used == s.size();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

int study_command(const Args& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] != "qsnr") {
    err << "kvq study: the studies so far: qsnr\n" << kStudyUsage;
    return 2;
  }
  experiments::QsnrOptions o;
  for (const auto& r : kRecipes) o.recipes.emplace_back(r.name);
  o.distributions = {"gaussian", "laplace", "student-t:5", "uniform", "kv-keys", "kv-values"};
  std::string dir;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (i + 1 >= args.size()) {
      err << "kvq study: " << a << " needs a value\n" << kStudyUsage;
      return 2;
    }
    const std::string& v = args[++i];
    long long n = 0;
    if (a == "--out") {
      dir = v;
    } else if (a == "--recipes") {
      o.recipes = split(v);
    } else if (a == "--dist") {
      o.distributions = split(v);
    } else if (a == "--blocks") {
      o.blocks.clear();
      for (const std::string& b : split(v)) {
        if (!parse_int(b, &n)) {
          err << "kvq study: --blocks takes integers, got '" << b << "'\n";
          return 2;
        }
        o.blocks.push_back(static_cast<int>(n));
      }
    } else if (a == "--samples" || a == "--seed" || a == "--head-dim") {
      if (!parse_int(v, &n) || n < 0) {
        err << "kvq study: " << a << " takes a non-negative integer, got '" << v << "'\n";
        return 2;
      }
      if (a == "--samples") o.samples = n;
      if (a == "--seed") o.seed = static_cast<std::uint64_t>(n);
      if (a == "--head-dim") o.head_dim = static_cast<int>(n);
    } else if (a == "--rotate") {
      if (v != "none" && v != "hadamard") {
        err << "kvq study: --rotate is none or hadamard, got '" << v << "'\n";
        return 2;
      }
      o.rotate = v == "hadamard";
    } else if (a == "--shard") {
      long long index = 0, count = 0;
      const auto slash = v.find('/');
      if (slash == std::string::npos || !parse_int(v.substr(0, slash), &index) || !parse_int(v.substr(slash + 1), &count)) {
        err << "kvq study: --shard takes I/N, got '" << v << "'\n";
        return 2;
      }
      o.shard_index = static_cast<int>(index);
      o.shard_count = static_cast<int>(count);
    } else {
      err << "kvq study: unexpected argument '" << a << "'\n" << kStudyUsage;
      return 2;
    }
  }
  if (dir.empty()) {
    err << "kvq study: --out DIR is required\n" << kStudyUsage;
    return 2;
  }
  std::vector<experiments::QsnrRow> rows;
  const auto start = std::chrono::steady_clock::now();
  const std::string e = experiments::run_qsnr_study(o, err, &rows);
  if (!e.empty()) {
    err << "kvq study: " << e << "\n";
    return 2;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string suffix = o.shard_count > 1 ? ".shard" + std::to_string(o.shard_index) + "of" + std::to_string(o.shard_count) : "";
  std::ofstream csv(dir + "/qsnr" + suffix + ".csv"), manifest(dir + "/qsnr" + suffix + ".json");
  if (ec || !csv || !manifest) {
    err << "kvq study: cannot write into --out " << dir << "\n";
    return 2;
  }
  experiments::write_qsnr_csv(rows, csv);
  experiments::write_qsnr_manifest(o, rows, seconds, manifest);
  out << "kvq study qsnr: " << rows.size() << " configurations in " << seconds << " s -> " << dir << "/qsnr" << suffix
      << ".csv, .json\n";
  return 0;
}

}  // namespace kvq::cli
