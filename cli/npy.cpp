#include "cli/npy.hpp"

#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>

#include "cli/untrusted.hpp"

namespace kvq::cli {

std::int64_t NpyArray::count() const {
  return checked_product(shape).value_or(-1);  // readers reject shapes whose product overflows
}

int npy_item_size(const std::string& descr) {
  if (descr == "<i8") return 8;
  if (descr == "<f4" || descr == "<i4") return 4;
  if (descr == "<u2" || descr == "<f2") return 2;
  if (descr == "|u1" || descr == "<u1" || descr == "|i1") return 1;
  return 0;
}

bool index_values(const NpyArray& a, std::vector<std::int64_t>* out) {
  const int size = a.descr == "<i8" ? 8 : (a.descr == "<i4" ? 4 : 0);
  if (size == 0) return false;
  out->resize(a.bytes.size() / size);
  for (std::size_t i = 0; i < out->size(); ++i) {
    if (size == 8) {
      std::memcpy(&(*out)[i], &a.bytes[8 * i], 8);
    } else {
      std::int32_t v;
      std::memcpy(&v, &a.bytes[4 * i], 4);
      (*out)[i] = v;
    }
  }
  return true;
}

namespace {

// The value of 'key' in the header dict, as text up to the next top-level comma or brace.
std::string header_value(const std::string& header, const std::string& key) {
  const auto k = header.find("'" + key + "'");
  if (k == std::string::npos) return {};
  auto p = header.find(':', k);
  if (p == std::string::npos) return {};
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  int depth = 0;
  std::string v;
  for (; p < header.size(); ++p) {
    const char c = header[p];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
    v += c;
  }
  return v;
}

// The shape tuple "(4, 64)", "(8,)" or "()": non-negative integers, nothing else.
std::optional<std::vector<std::int64_t>> parse_shape(std::string_view t) {
  if (t.size() < 2 || t.front() != '(' || t.back() != ')') return std::nullopt;
  t = t.substr(1, t.size() - 2);
  std::vector<std::int64_t> dims;
  const auto trim = [](std::string_view v) {
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    return v;
  };
  while (!trim(t).empty()) {
    const auto comma = t.find(',');
    const auto d = parse_integer(trim(t.substr(0, comma)), 0, std::numeric_limits<std::int64_t>::max());
    if (!d) return std::nullopt;
    dims.push_back(*d);
    if (comma == std::string_view::npos) {
      if (dims.size() == 1) return std::nullopt;  // a 1-D shape is written "(n,)"
      break;
    }
    t = t.substr(comma + 1);
  }
  return dims;
}

}  // namespace

std::string read_npy(const std::string& path, NpyArray* out) {
  std::int64_t file_bytes = 0;
  if (auto e = file_size(path, &file_bytes); !e.empty()) return e;
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot open " + path;
  char magic[8];
  if (!in.read(magic, 8) || std::string(magic, 6) != "\x93NUMPY") return path + " is not a .npy file";
  const int version = static_cast<unsigned char>(magic[6]);
  if (version < 1 || version > 3) return path + ": .npy format version " + std::to_string(version) + " is not 1, 2 or 3";
  std::uint32_t header_length = 0;
  int prefix = 10;
  if (magic[6] == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) return path + ": truncated header";
    header_length = b[0] | b[1] << 8;
  } else {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) return path + ": truncated header";
    header_length = b[0] | b[1] << 8 | b[2] << 16 | static_cast<std::uint32_t>(b[3]) << 24;
    prefix = 12;
  }
  if (header_length > file_bytes - prefix) return path + ": header length " + std::to_string(header_length) + " past the end of the file";
  std::string header(header_length, '\0');
  if (!in.read(header.data(), header_length)) return path + ": truncated header";
  std::string descr = header_value(header, "descr");
  if (descr.size() < 2) return path + ": no dtype in header";
  descr = descr.substr(1, descr.size() - 2);
  if (npy_item_size(descr) == 0) return path + ": dtype " + descr + " is not float32, float16, uint16, uint8, int8, int32 or int64";
  if (header_value(header, "fortran_order") != "False") return path + ": Fortran order is not supported";
  const std::string shape_text = header_value(header, "shape");
  const auto shape = parse_shape(shape_text);
  if (!shape) return path + ": shape '" + shape_text.substr(0, 64) + "' is not a tuple of non-negative integers";
  const auto count = checked_product(*shape);
  const auto bytes = count ? checked_mul(*count, npy_item_size(descr)) : std::nullopt;
  const std::int64_t data_bytes = file_bytes - prefix - header_length;
  if (!bytes || *bytes != data_bytes)
    return path + ": shape " + shape_text + " of " + descr + " does not match the " + std::to_string(data_bytes) +
           " data bytes the file holds";
  out->descr = descr == "<u1" ? "|u1" : descr;
  out->shape = *shape;
  out->bytes.resize(static_cast<std::size_t>(*bytes));
  if (!in.read(reinterpret_cast<char*>(out->bytes.data()), *bytes)) return path + ": data shorter than its shape";
  return {};
}

std::string write_npy(const std::string& path, const NpyArray& a) {
  std::ostringstream dict;
  dict << "{'descr': '" << a.descr << "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < a.shape.size(); ++i) dict << a.shape[i] << (a.shape.size() == 1 || i + 1 < a.shape.size() ? "," : "");
  dict << "), }";
  std::string header = dict.str();
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) return "cannot write " + path;
  out.write("\x93NUMPY\x01\x00", 8);
  const auto length = static_cast<std::uint16_t>(header.size());
  const char le[2] = {static_cast<char>(length & 0xFF), static_cast<char>(length >> 8)};
  out.write(le, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(a.bytes.data()), static_cast<std::streamsize>(a.bytes.size()));
  out.close();
  return out.fail() ? "cannot write " + path : std::string();
}

}  // namespace kvq::cli
