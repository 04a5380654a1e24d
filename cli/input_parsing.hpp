// Parsing of the CLI's line inputs: FP32 values and format codes.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>

namespace kvq::cli {

// One FP32 input: a bit pattern "0x3f800000" (1 to 8 hex digits, no sign, no point),
// a hex float "-0x1.8p+1", or a decimal "1.5" / "nan" / "-inf" (correctly rounded to FP32).
std::optional<std::uint32_t> parse_fp32_bits(std::string_view text);

// One code of a format with the given bit width: "0x7e" or "126".
std::optional<std::uint64_t> parse_code(std::string_view text, int bits);

// Trimmed line, or nullopt for a blank line or a '#' comment.
std::optional<std::string_view> meaningful(std::string_view line);

// The first line of *text without its '\n' (the whole text where it has none), removed from *text.
inline std::string_view take_line(std::string_view* text) {
  const auto newline = text->find('\n');
  const std::string_view line = text->substr(0, newline);
  *text = newline == std::string_view::npos ? std::string_view() : text->substr(newline + 1);
  return line;
}

// The lines of a stream, read in large blocks (encode and decode stream tens of millions of lines);
// take_line splits a block.
class LineReader {
 public:
  explicit LineReader(std::istream& in) : in_(in) {}
  // The next whole lines (up to and with the last '\n' read so far; at the end, what is left), valid
  // until the next call; false at the end or on a read error.
  bool next_block(std::string_view* lines);
  bool failed() const { return in_.bad(); }  // a read error, not the end of the input

 private:

  std::istream& in_;
  std::string buffer_;
  std::size_t begin_ = 0;
  bool end_ = false;
};

}  // namespace kvq::cli
