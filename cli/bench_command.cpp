// kvq bench: kernel throughput as a fraction of device-to-device copy bandwidth, both
// measured in the same run (CUDA events, median). A benchmark, not a test. --peers then runs
// kernels/bench_torch_peers.py (PyTorch's FP8 casts and an eager NVFP4 quantizer on an input of
// the same size) and prints its rows after kvq's.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/untrusted.hpp"
#include "formats/recipe_names.hpp"
#include "kernels/benchmark.hpp"
#include "kernels/rope_benchmark.hpp"

namespace kvq::cli {

namespace {

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The PyTorch peers' rows (BF16 input of `mib` MiB, `cols` columns), or a line on err saying why
// none came: no script found, no torch, no GPU (the script exits 77), or its error.
void run_peers(const std::string& python, long mib, long cols, long repeats, std::ostream& out, std::ostream& err) {
  std::string script = "kernels/bench_torch_peers.py";  // from the repository root, else the source tree
  if (!std::filesystem::exists(script)) script = std::string(KVQ_SOURCE_DIR) + "/" + script;
  if (!std::filesystem::exists(script)) {
    err << "kvq bench: PyTorch peers skipped: kernels/bench_torch_peers.py not found\n";
    return;
  }
  const std::string command = shell_quoted(python) + " " + shell_quoted(script) + " --mib " + std::to_string(mib) +
                              " --cols " + std::to_string(cols) + " --repeats " + std::to_string(repeats) + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    err << "kvq bench: PyTorch peers skipped: cannot run " << python << "\n";
    return;
  }
  std::string text;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
  const int wait_status = pclose(pipe);
  const int status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;  // 127: no such Python
  if (status != 0) {
    std::string last;  // the script's last line says why (e.g. "SKIPPED: no CUDA device", an import error)
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) last = line;
    err << "kvq bench: PyTorch peers skipped (" << script << " exited with status " << status << "): " << last << "\n";
    return;
  }
  out << "PyTorch peers (" << script << ", BF16 input, its own same-run copy):\n" << text;
}

}  // namespace

int bench_command(const Args& args, std::ostream& out, std::ostream& err) {
  std::string recipes, dtype = "bf16", csv;
  std::int64_t mib = 256, cols = 128, repeats = 20;
  bool mla = true;  // the MLA layout and paged-workspace rows (kernels/mla_kernels.hpp)
  std::int64_t rope_tokens = 16384;  // fused RoPE + FP8 + paged append rows (0: none)
  bool peers = false;
  std::string python = "python3";
  std::string swizzle = "none";  // the NVFP4 paged rows' scale swizzle
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
    } else if (args[i] == "--csv" && value) {
      csv = args[++i];
    } else if (args[i] == "--swizzle" && value) {
      swizzle = args[++i];
    } else if (args[i] == "--peers") {
      peers = true;
    } else if (args[i] == "--python" && value) {
      python = args[++i];
    } else {
      err << "kvq bench: unexpected argument '" << args[i] << "'\nusage: kvq bench [--recipes a,b] [--dtype bf16|fp16|fp32]"
          << " [--mib N] [--cols N] [--repeats N] [--rope-tokens N] [--swizzle none|v|kv] [--csv FILE] [--no-mla]"
          << " [--peers [--python EXE]]\n";
      return 2;
    }
  }
  if (!bad.empty()) {
    err << "kvq bench: " << bad << "\n";
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
  std::string e =
      kernels::run_benchmarks(cases, t, rows, cols, static_cast<int>(repeats), &rows_out, &device, paged_swizzle).message();
  if (e.empty() && mla) e = kernels::run_mla_benchmarks(static_cast<int>(repeats), &rows_out).message();
  if (e.empty() && rope_tokens > 0) e = kernels::run_rope_benchmarks(t, rope_tokens, static_cast<int>(repeats), &rows_out).message();
  if (!e.empty()) {
    err << "kvq bench: " << e << "\n";
    return 2;
  }
  std::ostringstream table;
  table << "device: " << device << "\n" << std::left << std::setw(13) << "kernel" << std::setw(24) << "recipe" << std::setw(6)
        << "dtype" << std::right << std::setw(10) << "MB moved" << std::setw(10) << "ms" << std::setw(10) << "GB/s"
        << std::setw(12) << "copy GB/s" << std::setw(10) << "of copy" << "\n";
  for (const auto& r : rows_out) {
    table << std::left << std::setw(13) << r.kernel << std::setw(24) << r.recipe << std::setw(6) << r.dtype << std::right
          << std::fixed << std::setprecision(1) << std::setw(10) << r.bytes / 1e6 << std::setprecision(3) << std::setw(10)
          << r.median_ms << std::setprecision(0) << std::setw(10) << r.gbps << std::setw(12) << r.copy_gbps
          << std::setprecision(1) << std::setw(9) << 100.0 * r.gbps / r.copy_gbps << "%\n";
  }
  out << table.str();
  if (peers) run_peers(python, mib, cols, repeats, out, err);
  if (!csv.empty()) {
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
  return 0;
}

}  // namespace kvq::cli
