#include "proptests/conversion_space.hpp"

#include <cstdio>

namespace kvq::props {

std::string ConversionCase::name() const {
  return std::string(name_of(format)) + "/" + std::string(name_of(convention)) + "/" + std::string(name_of(rounding));
}

std::string ConversionCase::encode_replay(std::uint32_t fp32_bits) const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "echo 0x%08x | kvq encode %s --convention %s --rounding %s", fp32_bits,
                std::string(name_of(format)).c_str(), std::string(name_of(convention)).c_str(),
                std::string(name_of(rounding)).c_str());
  return buf;
}

void for_each_conversion_case(const std::function<void(const ConversionCase&)>& fn, int max_bits) {
  for (int f = 0; f < kFormatCount; ++f) {
    const auto format = static_cast<FormatId>(f);
    if (format == FormatId::fp64 || format_of(format).bits() > max_bits) continue;
    for (int c = 0; c < kConventionCount; ++c) {
      const auto convention = static_cast<ConventionId>(c);
      const ConventionRule rule = convention_rule(convention, format);
      for (int r = 0; r < 6; ++r)
        if (rule.allowed & (1u << r)) fn(ConversionCase{format, convention, static_cast<Rounding>(r)});
    }
  }
}

std::string hex_code(Format f, std::uint64_t code) {
  char buf[32];
  const int digits = f.bits() <= 8 ? 2 : (f.bits() + 3) / 4;
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(code));
  return buf;
}

}  // namespace kvq::props
