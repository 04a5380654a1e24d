// read_safetensors on any bytes, for the file's only tensor (name "") and for tensor "x": a message
// naming the file, or an array whose data match its shape and dtype.
#include <cstddef>
#include <cstdint>

#include "cli/safetensors.hpp"
#include "proptests/fuzz/fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using kvq::fuzz::require;
  static const kvq::fuzz::ScratchFile file("safetensors");
  const std::string& path = file.write(data, size);
  for (const char* name : {"", "x"}) {
    kvq::cli::NpyArray array;
    std::string dtype;
    const std::string error = kvq::cli::read_safetensors(path, name, &array, &dtype);
    if (!error.empty()) {
      require(error.find(path) != std::string::npos, "read_safetensors's message names the file");
      continue;
    }
    require(!dtype.empty(), "a tensor read has its safetensors dtype");
    kvq::fuzz::require_consistent(array, size);
  }
  return 0;
}
