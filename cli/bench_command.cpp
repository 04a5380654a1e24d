// kvq bench: kernel throughput as a fraction of device-to-device copy bandwidth, both
// measured in the same run (CUDA events, median). A benchmark, not a test. --peers then runs
// kernels/bench_torch_peers.py (PyTorch's FP8 casts and an NVFP4 quantizer, eager and compiled, on an
// input of the same size) and prints its rows after kvq's, and then alternates kvq's RoPE rows with
// FlashInfer's fused RoPE + FP8 kernels on the same problems (kernels/bench_flashinfer_rope.py) for
// --peer-rounds rounds and prints their medians side by side.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/untrusted.hpp"
#include "formats/recipe_names.hpp"
#include "kernels/benchmark.hpp"
#include "kernels/device_grid.hpp"
#include "kernels/rope_benchmark.hpp"

namespace kvq::cli {

namespace {

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A peer script's path: from the repository root, else the source tree; "" when neither has it.
std::string peer_script(const std::string& relative) {
  if (std::filesystem::exists(relative)) return relative;
  const std::string in_source = std::string(KVQ_SOURCE_DIR) + "/" + relative;
  return std::filesystem::exists(in_source) ? in_source : "";
}

// What a Python script printed (stdout and stderr together) and its exit status (127: no such
// Python; 77: the script's "skipped here"; -1: it did not exit).
struct ScriptRun {
  int status = -1;
  std::string text;
  std::string last_line() const {  // a failed script's last line says why (e.g. "SKIPPED: no CUDA device")
    std::string last;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) last = line;
    return last;
  }
};

ScriptRun run_script(const std::string& python, const std::string& script, const std::string& arguments) {
  ScriptRun run;
  FILE* pipe = popen((shell_quoted(python) + " " + shell_quoted(script) + " " + arguments + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) run.text += buffer;
  const int wait_status = pclose(pipe);
  run.status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  return run;
}

// A peer script's exit: 0 ran; 77 (its "skipped here": no torch, no GPU, ...) or no script is a line
// on err and no failure; any other status (a traceback, a failed call, arguments it rejected) is a
// failure: a line on err, and kvq bench exits 1.
bool peer_failed(const std::string& what, const std::string& script, const ScriptRun& run, std::ostream& err) {
  if (run.status == 0) return false;
  err << "kvq bench: " << what << (run.status == 77 ? " skipped (" : " FAILED (") << script << " exited with status "
      << run.status << "): " << run.last_line() << "\n";
  return run.status != 77;
}

// The PyTorch peers' rows (BF16 input of `mib` MiB, `cols` columns). 0, or 1 when the script failed.
int run_peers(const std::string& python, long mib, long cols, long repeats, std::ostream& out, std::ostream& err) {
  const std::string script = peer_script("kernels/bench_torch_peers.py");
  if (script.empty()) {
    err << "kvq bench: PyTorch peers skipped: kernels/bench_torch_peers.py not found\n";
    return 0;
  }
  const ScriptRun run = run_script(python, script, "--mib " + std::to_string(mib) + " --cols " + std::to_string(cols) +
                                                       " --repeats " + std::to_string(repeats));
  if (run.status != 0) return peer_failed("PyTorch peers", script, run, err) ? 1 : 0;
  out << "PyTorch peers (" << script << ", BF16 input, its own same-run copy):\n" << run.text;
  return 0;
}

// One kvq row and its FlashInfer twin on one shape, with their times round by round (NaN: none
// that round).
struct RopeTwin {
  std::string kvq_kernel;  // rope-fused or rope-quant
  std::string function;    // the script's name for the FlashInfer function: paged or quant
  std::string label;       // the shape's row label (kernels::rope_bench_label)
  double kvq_bytes = 0, flashinfer_bytes = 0;
  std::vector<double> kvq_ms, flashinfer_ms;
};

const char* flashinfer_function(const std::string& function) {
  return function == "paged" ? "rope_quantize_fp8_append_paged_kv_cache" : "rope_quantize_fp8";
}

// The script's --case argument for one shape: function:key=value,... (kernels/bench_flashinfer_rope.py).
std::string case_argument(const std::string& function, const kernels::RopeShape& s) {
  std::ostringstream a;
  a << function << ":label=" << kernels::rope_bench_label(s) << ",attention=" << kernels::name_of(s.attention)
    << ",style=" << kernels::name_of(s.style) << ",layout=" << kernels::name_of(s.layout) << ",tokens=" << s.tokens
    << ",batch=" << s.batch << ",q_heads=" << s.q_heads << ",kv_heads=" << s.kv_heads << ",head_dim=" << s.head_dim
    << ",rope_dim=" << s.rope_dim << ",max_pos=" << s.max_pos << ",page_size=" << s.page_size
    << ",num_pages=" << s.num_pages << ",num_page_indices=" << s.num_page_indices
    << ",request=" << kernels::kRopeBenchRequest;
  return "--case " + shell_quoted(a.str());
}

// The pairs of kvq's RoPE rows and FlashInfer's functions for `tokens` tokens (rope-fused and the paged
// function on every shape; rope-quant and rope_quantize_fp8 on the NHD ones, as kvq's rope-quant rows),
// their --case arguments appended to *arguments.
std::vector<RopeTwin> rope_twins(kernels::DType dtype, std::int64_t tokens, std::string* arguments) {
  std::vector<RopeTwin> twins;
  for (const kernels::RopeShape& s : kernels::rope_bench_shapes(dtype, tokens)) {
    const kernels::RopeBenchBytes bytes = kernels::rope_bench_bytes(s);
    for (const std::string function : {"paged", "quant"}) {
      if (function == "quant" && s.layout != kernels::KvLayout::nhd) continue;  // kvq's rope-quant rows: NHD only
      twins.push_back({function == "paged" ? "rope-fused" : "rope-quant", function, kernels::rope_bench_label(s),
                       bytes.fused, function == "paged" ? bytes.fused : bytes.fused - bytes.v, {}, {}});
      *arguments += " " + case_argument(function, s);
    }
  }
  return twins;
}

// The median of the values that are not NaN (NaN when none are).
double median_of(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// kvq's RoPE rows and FlashInfer's twins on the same problems (rope-fused against
// rope_quantize_fp8_append_paged_kv_cache on every shape, rope-quant against rope_quantize_fp8 on the
// NHD ones), alternated for `rounds` rounds: kvq first in odd rounds, FlashInfer first in even ones,
// so that a drift of the clocks favours neither. Prints per pair the medians over the rounds of each
// side's median time and their ratio. 0; 2 when kvq's own rows fail; 1 when the script fails (a
// FlashInfer that cannot run here, the script's exit 77, is a line on err and 0).
int run_flashinfer_peers(const std::string& python, kernels::DType dtype, const std::string& dtype_name,
                         std::int64_t rope_tokens, int repeats, int rounds, std::ostream& out, std::ostream& err) {
  const std::string script = peer_script("kernels/bench_flashinfer_rope.py");
  if (script.empty()) {
    err << "kvq bench: FlashInfer peers skipped: kernels/bench_flashinfer_rope.py not found\n";
    return 0;
  }
  std::string arguments = "--dtype " + dtype_name + " --repeats " + std::to_string(repeats);
  std::vector<RopeTwin> twins = rope_twins(dtype, rope_tokens, &arguments);
  std::string header;  // the script's device and method lines, from its first round
  bool failed = false;  // the script failed (not "skipped here")
  const auto kvq_round = [&](int round) {
    std::vector<kernels::BenchRow> rows;
    const std::string e = kernels::run_rope_benchmarks(dtype, rope_tokens, repeats, &rows).message();
    if (!e.empty()) {
      err << "kvq bench: " << e << "\n";
      return false;
    }
    for (RopeTwin& t : twins) {
      t.kvq_ms.resize(round + 1, std::nan(""));
      for (const kernels::BenchRow& r : rows)
        if (r.kernel == t.kvq_kernel && r.recipe == t.label) t.kvq_ms[round] = r.median_ms;
    }
    return true;
  };
  const auto flashinfer_round = [&](int round) {
    const ScriptRun run = run_script(python, script, arguments);
    if (run.status != 0) {
      failed = peer_failed("FlashInfer peers", script, run, err);
      return false;
    }
    for (RopeTwin& t : twins) t.flashinfer_ms.resize(round + 1, std::nan(""));
    std::istringstream lines(run.text);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string tag, function, label, ms;
      words >> tag >> function >> label >> ms;
      if (tag != "flashinfer") {
        if (round == 0 && !line.empty()) header += "  " + line + "\n";
        continue;
      }
      char* end = nullptr;
      const double value = std::strtod(ms.c_str(), &end);
      const bool timed = !ms.empty() && *end == '\0';
      if (!timed && round == 0) header += "  " + line + "\n";  // a case the script skipped, and why
      for (RopeTwin& t : twins)
        if (timed && t.function == function && t.label == label) t.flashinfer_ms[round] = value;
    }
    return true;
  };
  int done = 0;  // whole rounds: a FlashInfer run that fails after the first ends the rounds there
  for (int round = 0; round < rounds; ++round) {
    err << "kvq bench: FlashInfer peers, round " << round + 1 << " of " << rounds << "\n";
    const bool kvq_first = round % 2 == 0;
    if (kvq_first && !kvq_round(round)) return 2;
    if (!flashinfer_round(round)) {
      if (failed) return 1;
      if (round == 0) return 0;
      for (RopeTwin& t : twins) t.kvq_ms.resize(round);
      break;
    }
    if (!kvq_first && !kvq_round(round)) return 2;
    done = round + 1;
  }
  std::ostringstream table;
  table << "FlashInfer next to kvq (" << script << ", " << dtype_name << ", " << done
        << (done == 1 ? " round" : " rounds alternated") << "; a time is the median over the rounds of each side's median of " << repeats
        << " launches):\n"
        << header << std::left << std::setw(22) << "shape" << std::setw(12) << "kvq row" << std::setw(41)
        << "FlashInfer function" << std::right << std::setw(9) << "kvq MB" << std::setw(9) << "FI MB" << std::setw(10)
        << "kvq ms" << std::setw(10) << "FI ms" << std::setw(9) << "kvq/FI" << std::setw(15) << "rounds' range"
        << std::setw(10) << "per byte" << "\n";
  double worst = 0;
  std::string worst_pair;
  for (const RopeTwin& t : twins) {
    const double kvq = median_of(t.kvq_ms), fi = median_of(t.flashinfer_ms);
    double low = INFINITY, high = -INFINITY;
    for (std::size_t r = 0; r < t.kvq_ms.size() && r < t.flashinfer_ms.size(); ++r) {
      if (std::isnan(t.kvq_ms[r]) || std::isnan(t.flashinfer_ms[r])) continue;
      low = std::min(low, t.kvq_ms[r] / t.flashinfer_ms[r]);
      high = std::max(high, t.kvq_ms[r] / t.flashinfer_ms[r]);
    }
    table << std::left << std::setw(22) << t.label << std::setw(12) << t.kvq_kernel << std::setw(41)
          << flashinfer_function(t.function) << std::right << std::fixed << std::setprecision(1) << std::setw(9)
          << t.kvq_bytes / 1e6 << std::setw(9) << t.flashinfer_bytes / 1e6 << std::setprecision(4) << std::setw(10) << kvq;
    if (std::isnan(fi)) {
      table << std::setw(10) << "-" << std::setw(9) << "-" << std::setw(15) << "-" << std::setw(10) << "-" << "\n";
      continue;
    }
    std::ostringstream range;
    range << std::fixed << std::setprecision(3) << low << "-" << high;
    table << std::setw(10) << fi << std::setprecision(3) << std::setw(9) << kvq / fi << std::setw(15) << range.str()
          << std::setw(10) << (kvq / t.kvq_bytes) / (fi / t.flashinfer_bytes) << "\n";
    if (kvq / fi > worst) {
      worst = kvq / fi;
      worst_pair = t.label + " " + t.kvq_kernel;
    }
  }
  if (!worst_pair.empty())
    table << "largest kvq/FI: " << std::fixed << std::setprecision(3) << worst << " (" << worst_pair
          << "); per byte = (kvq ms / kvq MB) / (FI ms / FI MB): MHA rope-quant also quantizes V, which "
             "rope_quantize_fp8 has no argument for\n";
  out << table.str();
  return 0;
}

}  // namespace

std::string flashinfer_case_arguments(const std::string& dtype, std::int64_t tokens) {
  std::string arguments;
  rope_twins(dtype == "fp16" ? kernels::DType::fp16 : kernels::DType::bf16, tokens, &arguments);
  return arguments;
}

int bench_command(const Args& args, std::ostream& out, std::ostream& err) {
  std::string recipes, dtype = "bf16", csv;
  std::int64_t mib = 256, cols = 128, repeats = 20;
  bool mla = true;  // the MLA layout and paged-workspace rows (kernels/mla_kernels.hpp)
  std::int64_t rope_tokens = 16384;  // fused RoPE + FP8 + paged append rows (0: none)
  bool peers = false;
  std::int64_t peer_rounds = 3;  // kvq's RoPE rows and FlashInfer's, alternated (--peers)
  bool peer_rounds_given = false;
  std::string python = "python3";
  std::string swizzle = "none";  // the NVFP4 paged rows' scale swizzle
  std::int64_t blocks_per_sm = 0;  // 0: each launch's own grid (launch::grid_for); N: every launch at most N an SM
  std::string bad;  // the first bad numeric option's message
  const auto number = [&](const std::string& name, const std::string& text, std::int64_t min, std::int64_t max,
                          std::int64_t* v) {
    if (auto e = integer_option(name, text, min, max, v); !e.empty() && bad.empty()) bad = e;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool value = i + 1 < args.size();
    if (args[i] == "--recipes" && value) {
      recipes = args[++i];
    } else if (args[i] == "--dtype" && value) {
      dtype = args[++i];
    } else if (args[i] == "--mib" && value) {
      number("--mib", args[++i], 1, 65536, &mib);
    } else if (args[i] == "--cols" && value) {
      number("--cols", args[++i], 64, 1 << 20, &cols);
    } else if (args[i] == "--repeats" && value) {
      number("--repeats", args[++i], 1, 100000, &repeats);
    } else if (args[i] == "--no-mla") {
      mla = false;
    } else if (args[i] == "--rope-tokens" && value) {
      number("--rope-tokens", args[++i], 0, 1 << 24, &rope_tokens);
    } else if (args[i] == "--blocks-per-sm" && value) {
      number("--blocks-per-sm", args[++i], 1, 1 << 20, &blocks_per_sm);
    } else if (args[i] == "--csv" && value) {
      csv = args[++i];
    } else if (args[i] == "--swizzle" && value) {
      swizzle = args[++i];
    } else if (args[i] == "--peers") {
      peers = true;
    } else if (args[i] == "--python" && value) {
      python = args[++i];
    } else if (args[i] == "--peer-rounds" && value) {
      number("--peer-rounds", args[++i], 1, 1000, &peer_rounds);
      peer_rounds_given = true;
    } else {
      err << "kvq bench: unexpected argument '" << args[i] << "'\nusage: kvq bench [--recipes a,b] [--dtype bf16|fp16|fp32]"
          << " [--mib N] [--cols N] [--repeats N] [--rope-tokens N] [--swizzle none|v|kv] [--csv FILE] [--no-mla]"
          << " [--blocks-per-sm N] [--peers [--python EXE]] [--peer-rounds N]\n";
      return 2;
    }
  }
  if (!bad.empty()) {
    err << "kvq bench: " << bad << "\n";
    return 2;
  }
  if (peer_rounds_given && !peers) {
    err << "kvq bench: --peer-rounds needs --peers\n";
    return 2;
  }
  const kernels::DType t = dtype == "fp32" ? kernels::DType::fp32 : (dtype == "fp16" ? kernels::DType::fp16 : kernels::DType::bf16);
  if (dtype != "bf16" && dtype != "fp16" && dtype != "fp32") {
    err << "kvq bench: --dtype is bf16, fp16 or fp32, got '" << dtype << "'\n";
    return 2;
  }
  if (swizzle != "none" && swizzle != "v" && swizzle != "kv") {
    err << "kvq bench: --swizzle is none, v (V's scales) or kv (K's and V's), got '" << swizzle << "'\n";
    return 2;
  }
  const kernels::ScaleSwizzle paged_swizzle = swizzle == "v" ? kernels::ScaleSwizzle::v_only
                                              : swizzle == "kv" ? kernels::ScaleSwizzle::k_and_v
                                                                : kernels::ScaleSwizzle::none;
  if (mib <= 0 || cols <= 0 || cols % 64 != 0 || repeats <= 0) {
    err << "kvq bench: --mib, --repeats must be > 0 and --cols a multiple of 64\n";
    return 2;
  }
  std::vector<kernels::BenchCase> cases;
  for (const auto& r : kRecipes) {
    if (!recipes.empty() && ("," + recipes + ",").find("," + std::string(r.name) + ",") == std::string::npos) continue;
    cases.push_back({std::string(r.name), r.recipe});
  }
  if (cases.empty()) {
    err << "kvq bench: no recipe matches --recipes " << recipes << "\n";
    return 2;
  }
  const std::int64_t count = static_cast<std::int64_t>(mib) * 1024 * 1024 / kernels::bytes_of(t);
  const std::int64_t rows = count / cols;
  std::vector<kernels::BenchRow> rows_out;
  std::string device;
  err << "kvq bench: " << rows << "x" << cols << " " << dtype << " (" << mib << " MiB input), median of " << repeats
      << " runs each\n";
#ifdef KVQ_CUDA_CHECK_BUILD
  err << "kvq bench: warning: this binary's device code was compiled for a build check (KVQ_CUDA_CHECK_BUILD, NVVM -O1, ptxas -O0):"
         " its kernels run slower than kvq's, so these timings are not kvq's\n";
#endif
  // --blocks-per-sm: every launch of this thread that launch::grid_for sizes capped at N thread
  // blocks an SM (the grids' tuning: docs/performance.md "Grids"; a large N gives one item a thread).
  std::optional<kernels::device::GridCapOverride> grid_cap;
  if (blocks_per_sm > 0) grid_cap.emplace(static_cast<int>(blocks_per_sm));
  std::string e =
      kernels::run_benchmarks(cases, t, rows, cols, static_cast<int>(repeats), &rows_out, &device, paged_swizzle).message();
  if (e.empty() && mla) e = kernels::run_mla_benchmarks(static_cast<int>(repeats), &rows_out).message();
  if (e.empty() && rope_tokens > 0) e = kernels::run_rope_benchmarks(t, rope_tokens, static_cast<int>(repeats), &rows_out).message();
  if (!e.empty()) {
    err << "kvq bench: " << e << "\n";
    return 2;
  }
  kernels::fastest_copy_baselines(rows_out);
  std::ostringstream table;
  int recipe_width = 24;  // the longest recipe name and a space (nvfp4-compressed-tensors has 24 characters)
  for (const auto& r : rows_out) recipe_width = std::max(recipe_width, static_cast<int>(r.recipe.size()) + 1);
  table << "device: " << device << "\n" << std::left << std::setw(13) << "kernel" << std::setw(recipe_width) << "recipe" << std::setw(6)
        << "dtype" << std::right << std::setw(10) << "MB moved" << std::setw(10) << "ms" << std::setw(10) << "GB/s"
        << std::setw(12) << "copy GB/s" << std::setw(10) << "of copy" << "\n";
  for (const auto& r : rows_out) {
    table << std::left << std::setw(13) << r.kernel << std::setw(recipe_width) << r.recipe << std::setw(6) << r.dtype << std::right
          << std::fixed << std::setprecision(1) << std::setw(10) << r.bytes / 1e6 << std::setprecision(3) << std::setw(10)
          << r.median_ms << std::setprecision(0) << std::setw(10) << r.gbps << std::setw(12) << r.copy_gbps
          << std::setprecision(1) << std::setw(9) << 100.0 * r.gbps / r.copy_gbps << "%\n";
  }
  out << table.str();
  if (!csv.empty()) {  // kvq's rows, written before the peers run
    std::ofstream f(csv);
    f << "device,kernel,recipe,dtype,bytes,median_ms,gbps,copy_gbps,fraction_of_copy\n";
    for (const auto& r : rows_out)
      f << '"' << device << "\"," << r.kernel << "," << r.recipe << "," << r.dtype << "," << r.bytes << "," << r.median_ms
        << "," << r.gbps << "," << r.copy_gbps << "," << r.gbps / r.copy_gbps << "\n";
    if (!f) {
      err << "kvq bench: cannot write " << csv << "\n";
      return 2;
    }
  }
  if (!peers) return 0;
  const int torch_peers = run_peers(python, mib, cols, repeats, out, err);
  if (rope_tokens == 0) {
    err << "kvq bench: FlashInfer peers skipped: --rope-tokens 0 (no RoPE rows to set them beside)\n";
    return torch_peers;
  }
  if (t == kernels::DType::fp32) {
    err << "kvq bench: FlashInfer peers skipped: its rope kernels take FP16 or BF16 input, not FP32\n";
    return torch_peers;
  }
  const int flashinfer = run_flashinfer_peers(python, t, dtype, rope_tokens, static_cast<int>(repeats),
                                              static_cast<int>(peer_rounds), out, err);
  return flashinfer != 0 ? flashinfer : torch_peers;
}

}  // namespace kvq::cli
