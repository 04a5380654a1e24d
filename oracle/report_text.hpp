// How the verification reports (oracle/verify.cpp, oracle/verify_paged.cpp) write numbers: bits in
// hex, values to 9 significant digits, and an FP32's exact decimal.
#pragma once

#include <cstdint>
#include <string>

namespace kvq::ports {

std::string hex_digits(std::uint32_t v, int digits);  // "0x3f80", zero-padded to `digits`
std::string number(double v);                         // %.9g
std::string exact_decimal(float v);                   // every finite FP32 is a dyadic rational

}  // namespace kvq::ports
