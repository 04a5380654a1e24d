#include "cli/npy.hpp"

#include <fstream>
#include <sstream>

namespace kvq::cli {

std::int64_t NpyArray::count() const {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

namespace {

int item_size(const std::string& descr) {
  if (descr == "<f4") return 4;
  if (descr == "<u2" || descr == "<f2") return 2;
  if (descr == "|u1" || descr == "<u1" || descr == "|i1") return 1;
  return 0;
}

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

}  // namespace

std::string read_npy(const std::string& path, NpyArray* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot open " + path;
  char magic[8];
  if (!in.read(magic, 8) || std::string(magic, 6) != "\x93NUMPY") return path + " is not a .npy file";
  std::uint32_t header_length = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    header_length = b[0] | b[1] << 8;
  } else {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_length = b[0] | b[1] << 8 | b[2] << 16 | static_cast<std::uint32_t>(b[3]) << 24;
  }
  std::string header(header_length, '\0');
  if (!in.read(header.data(), header_length)) return path + ": truncated header";
  std::string descr = header_value(header, "descr");
  if (descr.size() < 2) return path + ": no dtype in header";
  descr = descr.substr(1, descr.size() - 2);
  if (item_size(descr) == 0) return path + ": dtype " + descr + " is not float32, float16, uint16, uint8 or int8";
  if (header_value(header, "fortran_order") != "False") return path + ": Fortran order is not supported";
  std::string shape = header_value(header, "shape");
  out->descr = descr == "<u1" ? "|u1" : descr;
  out->shape.clear();
  std::string number;
  for (const char c : shape) {
    if (c >= '0' && c <= '9') {
      number += c;
    } else if (!number.empty()) {
      out->shape.push_back(std::stoll(number));
      number.clear();
    }
  }
  const std::int64_t bytes = out->count() * item_size(out->descr);
  out->bytes.resize(static_cast<std::size_t>(bytes));
  if (!in.read(reinterpret_cast<char*>(out->bytes.data()), bytes)) return path + ": data shorter than its shape";
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
  return out ? std::string() : "cannot write " + path;
}

}  // namespace kvq::cli
