// Parsing of the CLI's line inputs: FP32 values and format codes.
#pragma once

#include <cstdint>
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

}  // namespace kvq::cli
