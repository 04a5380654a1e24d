#include "cli/input_parsing.hpp"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "formats/float_bits.hpp"

namespace kvq::cli {

namespace {
// Each byte's hex digit value, -1 for others (a table: encode reads tens of millions of lines).
constexpr std::array<std::int8_t, 256> kHexDigit = [] {
  std::array<std::int8_t, 256> t{};
  for (int c = 0; c < 256; ++c)
    t[c] = static_cast<std::int8_t>(c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1);
  return t;
}();
bool has_hex_prefix(std::string_view t) { return t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X'); }
}  // namespace

std::optional<std::string_view> meaningful(std::string_view line) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  std::size_t first = 0, end = line.size();
  while (first < end && space(line[first])) ++first;
  while (end > first && space(line[end - 1])) --end;
  if (first == end || line[first] == '#') return std::nullopt;
  return line.substr(first, end - first);
}

std::optional<std::uint32_t> parse_fp32_bits(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (has_hex_prefix(text)) {  // bits "0x3f800000", unless a point or exponent makes it a hex float
    const std::string_view digits = text.substr(2);
    std::uint32_t bits = 0;
    bool all_digits = true;
    for (const char c : digits) {
      const int d = kHexDigit[static_cast<unsigned char>(c)];
      if (d < 0) {
        if (c != '.' && c != 'p' && c != 'P') return std::nullopt;
        all_digits = false;
        break;
      }
      bits = bits << 4 | static_cast<std::uint32_t>(d);
    }
    if (all_digits) return digits.size() <= 8 ? std::optional<std::uint32_t>(bits) : std::nullopt;
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
  const bool hex = has_hex_prefix(text);
  const std::string_view digits = hex ? text.substr(2) : text;
  if (digits.empty() || digits.size() > (hex ? 16u : 19u)) return std::nullopt;  // 19 decimal digits fit 64 bits
  std::uint64_t value = 0;
  for (const char c : digits) {
    const int d = kHexDigit[static_cast<unsigned char>(c)];
    if (d < 0 || (!hex && d > 9)) return std::nullopt;
    value = value * (hex ? 16 : 10) + static_cast<std::uint64_t>(d);
  }
  if (bits < 64 && value >> bits != 0) return std::nullopt;
  return value;
}

bool LineReader::next_block(std::string_view* out) {
  while (true) {
    const auto end = buffer_.rfind('\n');  // the last '\n' read so far
    if (end != std::string::npos && end >= begin_) {
      *out = std::string_view(buffer_).substr(begin_, end + 1 - begin_);
      begin_ = end + 1;
      return true;
    }
    if (end_) {
      if (begin_ >= buffer_.size()) return false;
      *out = std::string_view(buffer_).substr(begin_);  // the last line, without a '\n'
      begin_ = buffer_.size();
      return true;
    }
    buffer_.erase(0, begin_);  // read the next block after what is left
    begin_ = 0;
    constexpr std::size_t kBlock = 1 << 20;
    const std::size_t kept = buffer_.size();
    buffer_.resize(kept + kBlock);
    in_.read(buffer_.data() + kept, static_cast<std::streamsize>(kBlock));
    buffer_.resize(kept + static_cast<std::size_t>(in_.gcount()));
    if (!in_) end_ = true;  // end of input, or a read error (failed())
  }
}

}  // namespace kvq::cli
