// CodeRuns (proptests/codec_runs.hpp): the host codec's results as runs, found by bisection.
#include "proptests/codec_runs.hpp"

#include <algorithm>

namespace kvq::props {

std::uint16_t CodeRuns::code_of(std::uint32_t bits) const {
  const auto after = std::upper_bound(starts.begin(), starts.end(), bits);
  return codes[static_cast<std::size_t>(after - starts.begin()) - 1];
}

namespace {

struct Builder {
  Format f;
  Conversion c;
  CodeRuns runs;

  std::uint16_t code(std::uint32_t bits) const {
    const std::uint32_t random_bits = c.rounding == Rounding::stochastic ? tile_random_bits(bits) : 0;
    return static_cast<std::uint16_t>(encode(f, c, unpack(kFP32, bits), random_bits));
  }
  void emit(std::uint32_t start, std::uint16_t v) {
    if (runs.codes.empty() || runs.codes.back() != v) runs.starts.push_back(start), runs.codes.push_back(v);
  }
  // Inputs [lo, hi] whose end codes are known: one run where they agree, else split at the middle.
  void split(std::uint32_t lo, std::uint32_t hi, std::uint16_t at_lo, std::uint16_t at_hi) {
    if (at_lo == at_hi) return emit(lo, at_lo);
    if (hi - lo == 1) return emit(lo, at_lo), emit(hi, at_hi);
    const std::uint32_t mid = lo + (hi - lo) / 2;
    const std::uint16_t at_mid = code(mid);
    split(lo, mid, at_lo, at_mid);
    split(mid, hi, at_mid, at_hi);
  }
};

}  // namespace

CodeRuns code_runs(Format f, const Conversion& c) {
  Builder b{f, c, {}};
  for (std::uint32_t sign = 0; sign < 2; ++sign)
    for (std::uint32_t exponent = 0; exponent < 256; ++exponent) {
      const std::uint32_t lo = sign << 31 | exponent << 23;
      // NaNs keep payload bits (a 16-bit target: the top 10 at most) with the quiet bit set, which is
      // no step function of the mantissa: bisect each stretch of one payload (2^13 mantissas) alone.
      // Stochastic rounding's random bits change from tile to tile: bisect each tile alone.
      std::uint32_t piece = exponent == 255 ? 1u << 13 : 1u << 23;
      if (c.rounding == Rounding::stochastic) piece = std::min(piece, 1u << kRunTileBits);
      for (std::uint32_t first = lo; first - lo < (1u << 23); first += piece) {
        const std::uint32_t last = first + (piece - 1);
        b.split(first, last, b.code(first), b.code(last));
      }
    }
  return std::move(b.runs);
}

std::vector<std::uint32_t> tile_first_runs(const CodeRuns& r) {
  std::vector<std::uint32_t> first((std::size_t{1} << (32 - kRunTileBits)) + 1);
  std::size_t run = 0;
  for (std::size_t t = 0; t + 1 < first.size(); ++t) {
    const std::uint64_t start = std::uint64_t{t} << kRunTileBits;
    while (run + 1 < r.starts.size() && r.starts[run + 1] <= start) ++run;
    first[t] = static_cast<std::uint32_t>(run);
  }
  first.back() = static_cast<std::uint32_t>(r.starts.size() - 1);
  return first;
}

}  // namespace kvq::props
