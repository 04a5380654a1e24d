// NumPy .npy files (format 1.0/2.0, C order, little-endian): float32 '<f4', uint16 '<u2'
// (BF16/FP16 bit patterns), uint8 '|u1'.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::cli {

struct NpyArray {
  std::string descr;                 // '<f4', '<f2', '<u2', '|u1', '|i1'
  std::vector<std::int64_t> shape;   // C order
  std::vector<std::uint8_t> bytes;   // raw data
  std::int64_t count() const;
};

// Empty string on success, else a message naming the file and what is wrong.
std::string read_npy(const std::string& path, NpyArray* out);
std::string write_npy(const std::string& path, const NpyArray& array);

}  // namespace kvq::cli
