// Sizes and numbers read from untrusted text and files (docs/cli.md, "Untrusted input"): every
// count, size, offset and numeric option the CLI reads goes through these, so a value out of
// range becomes a message naming where it came from, never a wrapped size or an abort.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvq::cli {

// a + b and a * b of non-negative sizes, or nullopt past INT64_MAX.
std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b);
std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b);
// The product of non-negative dimensions (1 for none), or nullopt past INT64_MAX or for a negative one.
std::optional<std::int64_t> checked_product(const std::vector<std::int64_t>& dims);

// A whole decimal integer in [min, max]: an optional '-', then digits, nothing else (no spaces,
// no '+', no suffix). nullopt otherwise.
std::optional<std::int64_t> parse_integer(std::string_view text, std::int64_t min, std::int64_t max);
// A whole number as strtod reads it (decimal or hex float), finite. nullopt otherwise.
std::optional<double> parse_finite(std::string_view text);
// An unsigned hexadecimal "0x..." of at most `bits` bits (1 to 16 digits). nullopt otherwise.
std::optional<std::uint64_t> parse_hex(std::string_view text, int bits);

// The largest integer a JSON number (an FP64) holds exactly: the bound of sizes read from JSON.
inline constexpr std::int64_t kMaxJsonInteger = std::int64_t{1} << 53;
// A JSON number that is an integer in [min, max] (and exact: |v| <= kMaxJsonInteger). nullopt otherwise.
std::optional<std::int64_t> integer_of(double v, std::int64_t min, std::int64_t max);

// The value of option `name` as an integer in [min, max]: "" and *out set, or the message
// "NAME must be an integer in [MIN, MAX], got 'TEXT'".
std::string integer_option(std::string_view name, std::string_view text, std::int64_t min, std::int64_t max,
                           std::int64_t* out);
std::string integer_option(std::string_view name, std::string_view text, int min, int max, int* out);

// The size in bytes of a regular file: "" and *out, or a message naming the path.
std::string file_size(const std::string& path, std::int64_t* out);
// The whole text of a regular file of at most max_bytes (manifests, quant.json): "" and *out, or a
// message naming the path.
std::string read_text_file(const std::string& path, std::int64_t max_bytes, std::string* out);

}  // namespace kvq::cli
