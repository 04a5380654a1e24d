// How the verification reports (oracle/verify.cpp, oracle/verify_paged.cpp) write numbers: bits in
// hex, values to 9 significant digits, and an FP32's exact decimal.
#pragma once

#include <cstdint>
#include <string>

namespace kvq::ports {

std::string hex_digits(std::uint32_t v, int digits);  // "0x3f80", zero-padded to `digits`
std::string number(double v);                         // %.9g
std::string exact_decimal(float v);                   // every finite FP32 is a dyadic rational

// One output buffer's line of a layout-aware report (oracle/verify_paged.cpp, verify_rope.cpp):
// "NAME: every one of N bytes as the model writes it" or "NAME: A <addressed_what>, U <untouched_what>,
// of N", with a note where the bytes before the call were not given (the untouched ones unchecked).
std::string buffer_line(const std::string& name, std::int64_t bytes, std::int64_t addressed_mismatches,
                        std::int64_t untouched_changed, bool before_known, const std::string& addressed_what,
                        const std::string& untouched_what);

}  // namespace kvq::ports
