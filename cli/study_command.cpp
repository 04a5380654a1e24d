// kvq study: the error studies of experiments/ from the command line (docs/studies.md).
#include <ostream>
#include <limits>
#include <sstream>
#include <thread>

#include "cli/commands.hpp"
#include "cli/untrusted.hpp"
#include "experiments/studies.hpp"

namespace kvq::cli {
namespace {

constexpr const char* kStudyUsage =
    "usage: kvq study qsnr|crest|scales|attention|errors|all --out DIR [options]\n"
    "       kvq study merge --out DIR [--study NAME]     join DIR/NAME.shardIofN.csv into DIR/NAME.csv\n"
    "options: --recipes a,b  --blocks 16,32  --dist a,b  --samples N  --seed S  --rotate none|hadamard\n"
    "         --head-dim D  --shard I/N  --jobs J  --seq-lens 512,2048  --heads H  --queries Q\n"
    "         --device cpu|cuda (GPU kernels, same output; qsnr also sums there; not crest)\n"
    "  distributions: gaussian laplace student-t:NU uniform kv-keys kv-values (unit variance)\n";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Integers in [1, max] separated by commas.
bool parse_ints(const std::string& s, int max, std::vector<int>* out) {
  out->clear();
  for (const std::string& item : split(s)) {
    const auto n = parse_integer(item, 1, max);
    if (!n) return false;
    out->push_back(static_cast<int>(*n));
  }
  return !out->empty();
}

int merge_command(const std::string& dir, const std::string& only, std::ostream& out, std::ostream& err) {
  std::vector<std::string> studies = only.empty() ? experiments::sharded_studies(dir) : std::vector<std::string>{only};
  if (studies.empty()) {
    err << "kvq study merge: no *.shardIofN.csv files in --out " << dir << "\n";
    return 2;
  }
  for (const std::string& study : studies) {
    experiments::StudyGrid grid;  // the study's finish step (derived files), with default options
    for (const auto& [name, make] : experiments::study_factories())
      if (name == study) make(experiments::StudyOptions{}, &grid);
    if (auto e = experiments::merge_study(dir, study, grid.finish, out); !e.empty()) {
      err << "kvq study: " << e << "\n";
      return 2;
    }
  }
  return 0;
}

}  // namespace

int study_command(const Args& args, std::ostream& out, std::ostream& err) {
  const std::string study = args.empty() ? "" : args[0];
  bool known = study == "all" || study == "merge";
  for (const auto& [name, make] : experiments::study_factories()) known = known || name == study;
  if (!known) {
    err << "kvq study: unknown study '" << study << "'\n" << kStudyUsage;
    return 2;
  }
  experiments::StudyOptions o;
  experiments::StudyRun run;
  run.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string only;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (i + 1 >= args.size()) {
      err << "kvq study: " << a << " needs a value\n" << kStudyUsage;
      return 2;
    }
    const std::string& v = args[++i];
    if (a == "--out") {
      run.dir = v;
    } else if (a == "--study") {
      only = v;
    } else if (a == "--device") {
      if (v != "cpu" && v != "cuda") {
        err << "kvq study: --device is cpu or cuda, got '" << v << "'\n";
        return 2;
      }
      o.device = v;
    } else if (a == "--recipes") {
      o.recipes = split(v);
    } else if (a == "--dist") {
      o.distributions = split(v);
    } else if (a == "--blocks" || a == "--seq-lens") {
      const int max = a == "--blocks" ? 4096 : 1 << 24;
      if (!parse_ints(v, max, a == "--blocks" ? &o.blocks : &o.seq_lens)) {
        err << "kvq study: " << a << " takes integers in [1, " << max << "] separated by commas, got '" << v << "'\n";
        return 2;
      }
    } else if (a == "--samples" || a == "--seed" || a == "--head-dim" || a == "--jobs" || a == "--heads" ||
               a == "--queries") {
      const std::int64_t max = a == "--samples" ? std::int64_t{1} << 40
                               : a == "--seed"  ? std::numeric_limits<std::int64_t>::max()
                               : a == "--jobs"  ? 1024
                                                : 1 << 20;
      std::int64_t n = 0;
      if (auto e = integer_option(a, v, a == "--seed" || a == "--samples" ? 0 : 1, max, &n); !e.empty()) {
        err << "kvq study: " << e << "\n";
        return 2;
      }
      if (a == "--samples") o.samples = n;
      if (a == "--seed") o.seed = static_cast<std::uint64_t>(n);
      if (a == "--head-dim") o.head_dim = static_cast<int>(n);
      if (a == "--jobs") run.jobs = static_cast<int>(n);
      if (a == "--heads") o.heads = static_cast<int>(n);
      if (a == "--queries") o.queries = static_cast<int>(n);
    } else if (a == "--rotate") {
      if (v != "none" && v != "hadamard") {
        err << "kvq study: --rotate is none or hadamard, got '" << v << "'\n";
        return 2;
      }
      o.rotate = v == "hadamard";
    } else if (a == "--shard") {
      const auto slash = v.find('/');
      const auto count = slash == std::string::npos ? std::nullopt : parse_integer(v.substr(slash + 1), 1, experiments::kMaxShards);
      const auto index = count ? parse_integer(v.substr(0, slash), 0, *count - 1) : std::nullopt;
      if (!index) {
        err << "kvq study: --shard takes I/N with 0 <= I < N <= " << experiments::kMaxShards << ", got '" << v << "'\n";
        return 2;
      }
      run.shard_index = static_cast<int>(*index);
      run.shard_count = static_cast<int>(*count);
    } else {
      err << "kvq study: unexpected argument '" << a << "'\n" << kStudyUsage;
      return 2;
    }
  }
  if (run.dir.empty()) {
    err << "kvq study: --out DIR is required\n" << kStudyUsage;
    return 2;
  }
  if (study == "merge") return merge_command(run.dir, only, out, err);
  if (o.device == "cuda" && study == "crest") {
    err << "kvq study: --device cuda: the crest study runs on the CPU (its FP6/INT6 block formats have no kernels)\n";
    return 2;
  }
  run.seed = o.seed;
  run.samples = o.samples;
  for (const auto& [name, make] : experiments::study_factories()) {
    if (study != "all" && study != name) continue;
    experiments::StudyGrid grid;
    run.device = name == "crest" ? "cpu" : o.device;  // `all --device cuda`: every study but crest on the GPU
    std::string e = make(o, &grid);
    if (e.empty()) e = experiments::run_study(grid, run, err, out);
    if (!e.empty()) {
      err << "kvq study " << name << ": " << e << "\n";
      return 2;
    }
  }
  return 0;
}

}  // namespace kvq::cli
