// What every fuzz target shares: the invariant check and the scratch file the path-taking
// readers (read_npy, read_safetensors) read from.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/npy.hpp"

namespace kvq::fuzz {

// A broken invariant aborts, so libFuzzer (or run_corpus) reports and keeps the input that broke it.
inline void require(bool holds, const char* invariant) {
  if (holds) return;
  std::fprintf(stderr, "kvq fuzz: invariant broken: %s\n", invariant);
  std::abort();
}

// One file per process ($TMPDIR/kvq-fuzz-NAME-PID), rewritten with each input: libFuzzer may run
// several processes at once (-jobs, -fork), never two inputs at once in one process.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& name)
      : path_((std::filesystem::temp_directory_path() / ("kvq-fuzz-" + name + "-" + std::to_string(::getpid()))).string()) {}
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // The file's path, holding exactly these bytes.
  const std::string& write(const std::uint8_t* data, std::size_t size) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    require(!out.fail(), "the scratch file can be written (is $TMPDIR writable?)");
    return path_;
  }

 private:
  std::string path_;
};

// The item size of each dtype the readers return in NpyArray::descr (cli/npy.hpp), 0 for any other.
inline int item_size_of(const std::string& descr) {
  if (descr == "<i8") return 8;
  if (descr == "<f4" || descr == "<i4") return 4;
  if (descr == "<f2" || descr == "<u2") return 2;
  if (descr == "|u1" || descr == "|i1") return 1;
  return 0;
}

// What a successful read_npy or read_safetensors promises about its array, read from a file of
// file_bytes bytes: a known dtype, non-negative dimensions, and exactly their product's data.
inline void require_consistent(const cli::NpyArray& array, std::size_t file_bytes) {
  const int item = item_size_of(array.descr);
  require(item > 0, "the dtype is one of <f4, <f2, <u2, |u1, |i1, <i4, <i8");
  for (const std::int64_t d : array.shape) require(d >= 0, "every dimension is non-negative");
  const std::int64_t count = array.count();
  require(count >= 0, "the shape's product fits in int64");
  require(array.bytes.size() % static_cast<std::size_t>(item) == 0 &&
              array.bytes.size() / static_cast<std::size_t>(item) == static_cast<std::uint64_t>(count),
          "the data are the shape's product times the item size");
  require(array.bytes.size() <= file_bytes, "no more data than the file holds");
}

}  // namespace kvq::fuzz
