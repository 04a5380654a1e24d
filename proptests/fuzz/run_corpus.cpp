// A main() for the fuzz targets where libFuzzer is not linked (gcc, KVQ_FUZZ off): runs
// LLVMFuzzerTestOneInput once on every file of the directories (or files) given, as
// `fuzzer -runs=0 DIR` does, so ctest checks the regression corpus on every build.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::uint8_t> bytes_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR_OR_FILE...  (runs the fuzz target once on each file)\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& entry : fs::directory_iterator(argv[i]))
        if (entry.is_regular_file()) inputs.push_back(entry.path());
    } else if (fs::is_regular_file(argv[i], ec)) {
      inputs.emplace_back(argv[i]);
    } else {
      std::fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 2;
    }
  }
  if (inputs.empty()) {  // an empty corpus would pass without checking anything
    std::fprintf(stderr, "no inputs in the paths given\n");
    return 2;
  }
  std::sort(inputs.begin(), inputs.end());
  for (const fs::path& path : inputs) {
    std::printf("Running: %s\n", path.string().c_str());
    std::fflush(stdout);  // the name of the input that aborts is the last line printed
    std::vector<std::uint8_t> data = bytes_of(path);
    data.reserve(1);  // libFuzzer never passes a null pointer, not even for an empty input
    LLVMFuzzerTestOneInput(data.data(), data.size());
  }
  std::printf("Executed %zu inputs\n", inputs.size());
  return 0;
}
