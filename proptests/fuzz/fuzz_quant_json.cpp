// read_quant_json on any text: a message naming the file, or members inside the ranges the reader
// promises (dequant multiplies them only after kernels::validate).
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/quant_json.hpp"
#include "formats/recipes.hpp"
#include "proptests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using kvq::fuzz::require;
  constexpr std::int64_t kLargestExact = std::int64_t{1} << 53;  // JSON numbers are exact up to 2^53
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = "fuzz/quant.json";
  kvq::cli::QuantJson q;
  const std::string error = kvq::cli::read_quant_json(text, path, &q);
  if (!error.empty()) {
    require(error.find(path) != std::string::npos, "read_quant_json's message names the file");
    return 0;
  }
  require(q.rows >= 0 && q.rows <= kLargestExact, "rows in [0, 2^53]");
  require(q.cols >= 1 && q.cols <= kLargestExact, "cols in [1, 2^53]");
  require(q.block >= 1 && q.block <= kvq::kMaxRecipeBlock, "block in [1, kMaxRecipeBlock]");
  return 0;
}
