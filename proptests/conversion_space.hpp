// The space the format properties range over: every (format, convention, rounding)
// a convention defines, with names and a one-line encode replay.
#pragma once

#include <functional>
#include <string>

#include "formats/conventions.hpp"
#include "formats/names.hpp"

namespace kvq::props {

struct ConversionCase {
  FormatId format;
  ConventionId convention;
  Rounding rounding;
  Format target() const { return format_of(format); }
  Conversion conversion() const { return convention_conversion(convention, format, rounding); }
  std::string name() const;  // "e4m3fn/cuda-nosat/rne"
  // `echo 0x... | kvq encode ...` for one FP32 input.
  std::string encode_replay(std::uint32_t fp32_bits) const;
};

// Calls fn for each case; formats limited to those with at most max_bits bits.
void for_each_conversion_case(const std::function<void(const ConversionCase&)>& fn, int max_bits = 32);

std::string hex_code(Format f, std::uint64_t code);

}  // namespace kvq::props
