#include "cli/untrusted.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

namespace kvq::cli {

namespace {
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
}

std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  if (a < 0 || b < 0 || a > kMax - b) return std::nullopt;
  return a + b;
}

std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  if (a < 0 || b < 0) return std::nullopt;
  if (a != 0 && b > kMax / a) return std::nullopt;
  return a * b;
}

std::optional<std::int64_t> checked_product(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (const std::int64_t d : dims) {
    const auto next = checked_mul(n, d);
    if (!next) return std::nullopt;
    n = *next;
  }
  return n;
}

std::optional<std::int64_t> parse_integer(std::string_view text, std::int64_t min, std::int64_t max) {
  const bool negative = !text.empty() && text[0] == '-';
  const std::string_view digits = negative ? text.substr(1) : text;
  if (digits.empty() || digits.size() > 19) return std::nullopt;
  std::uint64_t magnitude = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    magnitude = magnitude * 10 + static_cast<std::uint64_t>(c - '0');  // 19 digits fit in 64 bits
  }
  const std::uint64_t limit = negative ? std::uint64_t{1} << 63 : static_cast<std::uint64_t>(kMax);
  if (magnitude > limit) return std::nullopt;
  const std::int64_t value = negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
  if (value < min || value > max) return std::nullopt;
  return value;
}

std::optional<double> parse_finite(std::string_view text) {
  if (text.empty() || text.front() == ' ' || text.front() == '\t' || text.front() == '\n') return std::nullopt;
  const std::string owned(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(owned.c_str(), &end);
  if (end != owned.c_str() + owned.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> parse_hex(std::string_view text, int bits) {
  if (text.size() < 3 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X')) return std::nullopt;
  const std::string_view digits = text.substr(2);
  if (digits.size() > 16) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : digits) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return std::nullopt;
    value = value << 4 | static_cast<std::uint64_t>(d);
  }
  if (bits < 64 && value >> bits != 0) return std::nullopt;
  return value;
}

std::optional<std::int64_t> integer_of(double v, std::int64_t min, std::int64_t max) {
  constexpr auto kExact = static_cast<double>(kMaxJsonInteger);
  if (!(v >= -kExact && v <= kExact) || v != std::floor(v)) return std::nullopt;
  const auto i = static_cast<std::int64_t>(v);
  if (i < min || i > max) return std::nullopt;
  return i;
}

std::string integer_option(std::string_view name, std::string_view text, std::int64_t min, std::int64_t max,
                           std::int64_t* out) {
  const auto v = parse_integer(text, min, max);
  if (!v)
    return std::string(name) + " must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
           "], got '" + std::string(text) + "'";
  *out = *v;
  return {};
}

std::string integer_option(std::string_view name, std::string_view text, int min, int max, int* out) {
  std::int64_t v = 0;
  auto e = integer_option(name, text, std::int64_t{min}, std::int64_t{max}, &v);
  if (e.empty()) *out = static_cast<int>(v);
  return e;
}

std::string file_size(const std::string& path, std::int64_t* out) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return "cannot open " + path;
  if (!std::filesystem::is_regular_file(status)) return path + " is not a regular file";
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > static_cast<std::uintmax_t>(kMax)) return "cannot read the size of " + path;
  *out = static_cast<std::int64_t>(size);
  return {};
}

std::string read_text_file(const std::string& path, std::int64_t max_bytes, std::string* out) {
  std::int64_t size = 0;
  if (auto e = file_size(path, &size); !e.empty()) return e;
  if (size > max_bytes) return path + " holds " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) + " allowed";
  std::ifstream in(path, std::ios::binary);
  out->assign(static_cast<std::size_t>(size), '\0');
  if (!in.read(out->data(), size)) return "cannot read " + path;
  return {};
}

}  // namespace kvq::cli
