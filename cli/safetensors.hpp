// .safetensors files: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}}, then the data. One tensor is read into an NpyArray.
#pragma once

#include <string>

#include "cli/npy.hpp"

namespace kvq::cli {

// Reads tensor `name` (or the file's only tensor when name is empty). descr: F32 '<f4', F16 '<f2',
// BF16 and U16 '<u2', U8/I8/F8_* '|u1'; *dtype gets the safetensors dtype ("BF16"...).
// "" on success, else a message naming the file and the tensor.
std::string read_safetensors(const std::string& path, const std::string& name, NpyArray* out, std::string* dtype);

}  // namespace kvq::cli
