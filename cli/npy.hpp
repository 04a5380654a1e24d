// NumPy .npy files (format 1.0/2.0, C order, little-endian): float32 '<f4', float16 '<f2', uint16
// '<u2' (BF16/FP16 bit patterns), uint8 '|u1', int8 '|i1', and the index types int32 '<i4' and
// int64 '<i8' (slot mappings, positions, page tables).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvq::cli {

struct NpyArray {
  std::string descr;                 // '<f4', '<f2', '<u2', '|u1', '|i1', '<i4', '<i8'
  std::vector<std::int64_t> shape;   // C order
  std::vector<std::uint8_t> bytes;   // raw data
  std::int64_t count() const;
};

// Bytes an element of dtype `descr` takes; 0 for a dtype kvq does not read.
int npy_item_size(const std::string& descr);
// The elements of an index array ('<i4' or '<i8') as int64; false for any other dtype.
bool index_values(const NpyArray& a, std::vector<std::int64_t>* out);

// Empty string on success, else a message naming the file and what is wrong.
std::string read_npy(const std::string& path, NpyArray* out);
std::string write_npy(const std::string& path, const NpyArray& array);

}  // namespace kvq::cli
