#include "cli/input_parsing.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "formats/float_bits.hpp"

namespace kvq::cli {

namespace {
bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool has_hex_prefix(std::string_view t) { return t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X'); }
}  // namespace

std::optional<std::string_view> meaningful(std::string_view line) {
  const auto first = line.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || line[first] == '#') return std::nullopt;
  const auto last = line.find_last_not_of(" \t\r\n");
  return line.substr(first, last - first + 1);
}

std::optional<std::uint32_t> parse_fp32_bits(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (has_hex_prefix(text) && text.find_first_of(".pP") == std::string_view::npos) {
    const std::string_view digits = text.substr(2);
    if (digits.size() > 8) return std::nullopt;
    std::uint32_t bits = 0;
    for (const char c : digits) {
      if (!is_hex_digit(c)) return std::nullopt;
      bits = bits << 4 | static_cast<std::uint32_t>(std::strtoul(std::string(1, c).c_str(), nullptr, 16));
    }
    return bits;
  }
  // strtof rounds a decimal or hex-float string to FP32 once, to nearest even.
  const std::string owned(text);
  char* end = nullptr;
  errno = 0;
  const float value = std::strtof(owned.c_str(), &end);
  if (end != owned.c_str() + owned.size()) return std::nullopt;
  return bits_of(value);
}

std::optional<std::uint64_t> parse_code(std::string_view text, int bits) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return std::nullopt;
  const std::string owned(text);
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(owned.c_str(), &end, has_hex_prefix(text) ? 16 : 10);
  if (end != owned.c_str() + owned.size() || errno == ERANGE) return std::nullopt;
  if (bits < 64 && value >> bits != 0) return std::nullopt;
  return value;
}

}  // namespace kvq::cli
