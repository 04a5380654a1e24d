#include "cli/safetensors.hpp"

#include <fstream>

#include "cli/json.hpp"
#include "cli/npy.hpp"
#include "cli/untrusted.hpp"

namespace kvq::cli {
namespace {
std::string descr_of(const std::string& dtype) {
  if (dtype == "F32") return "<f4";
  if (dtype == "F16") return "<f2";
  if (dtype == "BF16" || dtype == "U16") return "<u2";
  if (dtype == "U8" || dtype == "I8" || dtype.starts_with("F8_") || dtype == "BOOL") return "|u1";
  if (dtype == "I32") return "<i4";
  if (dtype == "I64") return "<i8";
  return {};
}
}  // namespace

std::string read_safetensors(const std::string& path, const std::string& name, NpyArray* out, std::string* dtype) {
  std::int64_t file_bytes = 0;
  if (auto e = file_size(path, &file_bytes); !e.empty()) return e;
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot open " + path;
  unsigned char len[8];
  if (!in.read(reinterpret_cast<char*>(len), 8)) return path + " is not a .safetensors file (shorter than 8 bytes)";
  std::uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = header_length << 8 | len[i];
  // 16 MiB: far past a real header (a few KB a thousand tensors), and what parse_json holds in memory stays < 2 GB
  if (header_length == 0 || header_length > (16u << 20) || header_length > static_cast<std::uint64_t>(file_bytes - 8))
    return path + ": implausible header length " + std::to_string(header_length);
  std::string header(header_length, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_length))) return path + ": truncated header";
  Json json;
  if (auto e = parse_json(header, &json); !e.empty()) return path + ": header is not JSON: " + e;
  if (json.kind != Json::Kind::object) return path + ": header is not a JSON object";
  const Json* entry = nullptr;
  std::string names;
  int tensors = 0;
  for (const auto& [k, v] : json.members) {
    if (k == "__metadata__") continue;
    ++tensors;
    names += (names.empty() ? "" : ", ") + k;
    if (k == name || (name.empty() && !entry)) entry = &v;
  }
  if (tensors == 0) return path + ": holds no tensor";
  if (!entry || (name.empty() && tensors > 1))
    return path + ": " + (name.empty() ? "several tensors, name one with \"key\"" : "no tensor '" + name + "'") +
           " (holds: " + names.substr(0, 256) + (names.size() > 256 ? ", ..." : "") + ")";
  const Json* type = entry->get("dtype");
  const Json* shape = entry->get("shape");
  const Json* offsets = entry->get("data_offsets");
  const std::string what = path + " tensor '" + (name.empty() ? names : name) + "'";
  if (!type || !shape || !offsets || offsets->items.size() != 2) return what + ": header lacks dtype, shape or data_offsets";
  *dtype = type->text;
  out->descr = descr_of(type->text);
  if (out->descr.empty()) return what + ": dtype " + type->text + " is not F32, F16, BF16, U16, U8, I8, F8_*, I32 or I64";
  out->shape.clear();
  for (const auto& d : shape->items) {
    const auto dim = d.kind == Json::Kind::number ? integer_of(d.number, 0, kMaxJsonInteger) : std::nullopt;
    if (!dim) return what + ": shape holds something other than a non-negative integer";
    out->shape.push_back(*dim);
  }
  std::int64_t range[2] = {};  // data_offsets: begin, end
  for (int i = 0; i < 2; ++i) {
    const auto v = offsets->items[i].kind == Json::Kind::number ? integer_of(offsets->items[i].number, 0, kMaxJsonInteger) : std::nullopt;
    if (!v) return what + ": data_offsets are not two non-negative integers";
    range[i] = *v;
  }
  const auto count = checked_product(out->shape);
  const auto bytes = count ? checked_mul(*count, npy_item_size(out->descr)) : std::nullopt;
  if (!bytes || range[1] < range[0] || range[1] - range[0] != *bytes) return what + ": data_offsets do not match shape and dtype";
  if (range[1] > file_bytes - 8 - static_cast<std::int64_t>(header_length)) return what + ": data shorter than its offsets";
  out->bytes.resize(static_cast<std::size_t>(*bytes));
  in.seekg(static_cast<std::streamoff>(8 + header_length + range[0]));
  if (!in.read(reinterpret_cast<char*>(out->bytes.data()), static_cast<std::streamsize>(*bytes)))
    return what + ": data shorter than its offsets";
  return {};
}

}  // namespace kvq::cli
