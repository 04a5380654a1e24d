// read_npy on any bytes: a message naming the file, or an array whose data match its shape.
#include <cstddef>
#include <cstdint>

#include "cli/npy.hpp"
#include "proptests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using kvq::fuzz::require;
  static const kvq::fuzz::ScratchFile file("npy");
  const std::string& path = file.write(data, size);
  kvq::cli::NpyArray array;
  const std::string error = kvq::cli::read_npy(path, &array);
  if (!error.empty()) {
    require(error.find(path) != std::string::npos, "read_npy's message names the file");
    return 0;
  }
  kvq::fuzz::require_consistent(array, size);
  return 0;
}
