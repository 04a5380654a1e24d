// The line inputs of kvq encode and decode on any bytes: LineReader gives back exactly the input's
// lines, meaningful trims them, and the number parsers agree with the untrusted-number parsers
// (cli/untrusted.hpp) wherever their grammars overlap.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "cli/input_parsing.hpp"
#include "cli/untrusted.hpp"
#include "proptests/fuzz/fuzz_target.hpp"

namespace {

using kvq::fuzz::require;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool is_hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool has_hex_prefix(std::string_view t) { return t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X'); }

// "0x" and 1 to max_digits hex digits, nothing else.
bool is_hex_bits(std::string_view t, std::size_t max_digits) {
  if (!has_hex_prefix(t) || t.size() - 2 > max_digits) return false;
  for (const char c : t.substr(2))
    if (!is_hex_digit(c)) return false;
  return true;
}

void check_value(std::string_view v, std::optional<std::int64_t>* previous_integer) {
  const auto bits = kvq::cli::parse_fp32_bits(v);
  if (is_hex_bits(v, 8)) require(bits == kvq::cli::parse_hex(v, 32), "parse_fp32_bits reads 0x and 8 hex digits as parse_hex");

  for (const int width : {4, 8, 16}) {
    const auto code = kvq::cli::parse_code(v, width);
    if (code) require(*code >> width == 0, "parse_code's code fits its bit width");
    if (has_hex_prefix(v)) require(code == kvq::cli::parse_hex(v, width), "parse_code reads hex as parse_hex");
    else if (v.front() != '-') {
      const auto integer = kvq::cli::parse_integer(v, 0, (std::int64_t{1} << width) - 1);
      require(code == (integer ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(*integer)) : std::nullopt),
              "parse_code reads decimal as parse_integer");
    }
  }

  const auto integer = kvq::cli::parse_integer(v, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
  if (!integer) return;
  constexpr std::int64_t kLargestExact = std::int64_t{1} << 53;
  if (*integer >= -kLargestExact && *integer <= kLargestExact)
    require(kvq::cli::parse_finite(v) == static_cast<double>(*integer), "parse_finite reads an exact integer as parse_integer");
  if (*integer >= 0 && *previous_integer) {  // the size arithmetic on two successive sizes
    std::int64_t product = 0, sum = 0;
    const bool product_overflows = __builtin_mul_overflow(**previous_integer, *integer, &product);
    const bool sum_overflows = __builtin_add_overflow(**previous_integer, *integer, &sum);
    require(kvq::cli::checked_mul(**previous_integer, *integer) == (product_overflows ? std::nullopt : std::optional(product)),
            "checked_mul is the product or nullopt past INT64_MAX");
    require(kvq::cli::checked_add(**previous_integer, *integer) == (sum_overflows ? std::nullopt : std::optional(sum)),
            "checked_add is the sum or nullopt past INT64_MAX");
  }
  *previous_integer = *integer >= 0 ? integer : std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::istringstream in(text);
  kvq::cli::LineReader reader(in);
  std::optional<std::int64_t> previous_integer;
  std::size_t offset = 0;  // where the next line starts in `text`
  std::string_view block;
  while (reader.next_block(&block)) {
    while (!block.empty()) {
      const std::string_view line = kvq::cli::take_line(&block);
      require(offset < size, "no line past the end of the input");
      require(text.compare(offset, line.size(), line) == 0, "a line is the input's bytes");
      offset += line.size();
      require(offset == size || text[offset] == '\n', "a line ends at a newline or at the end");
      require(line.find('\n') == std::string_view::npos, "a line holds no newline");
      offset += offset < size;

      const auto v = kvq::cli::meaningful(line);
      if (!v) continue;
      require(!v->empty() && v->front() != '#' && !is_space(v->front()) && !is_space(v->back()), "meaningful trims");
      require(v->data() >= line.data() && v->data() + v->size() <= line.data() + line.size(), "meaningful is inside its line");
      check_value(*v, &previous_integer);
    }
  }
  require(offset == size, "the lines cover the whole input");
  require(!reader.failed(), "reading a string stream does not fail");
  return 0;
}
