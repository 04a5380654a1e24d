// A device codec sweep's expected results as runs (docs/property-suite.md "Device sweeps"): the host
// codec is a step function of the FP32 bits within each binade (sign, exponent), so its 2^32 codes
// under a deterministic rounding are a few hundred thousand runs of one code, which the host finds
// by bisection and the device expands and compares with the device-compiled codec
// (proptests/gpu/format_sweeps.hpp sweep_runs). Stochastic rounding takes its random bits from the
// input's tile (`tile_random_bits`): with the bits fixed, rounding up happens past one threshold of
// the discarded fraction, so the codes are a step function within each tile of each binade too.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/codec.hpp"
#include "proptests/harness/mix32.hpp"

namespace kvq::props {

struct CodeRuns {
  // Ascending, starts[0] = 0: run i covers inputs [starts[i], starts[i + 1]) (the last to 2^32 - 1)
  // with codes[i]; consecutive runs differ in code.
  std::vector<std::uint32_t> starts;
  std::vector<std::uint16_t> codes;
  std::uint16_t code_of(std::uint32_t bits) const;
};

// Inputs a tile holds (2^kRunTileBits), and the run that holds each tile's first input: the device
// looks up a thread's run between tile_first[t] and tile_first[t + 1].
inline constexpr int kRunTileBits = 12;

// The random bits of stochastic rounding in the runs sweeps, host and device: one draw for each
// tile of 2^kRunTileBits inputs (mix32 of the tile's index), so all 2^32 inputs meet 2^20 draws and
// each tile's codes step at the draw's threshold. The plain per-input draw (mix32 of the input) is
// the sampled sweep's (proptests/gpu_properties.cpp).
KVQ_HD constexpr std::uint32_t tile_random_bits(std::uint32_t bits) { return mix32(bits >> kRunTileBits); }

// The host codec's code of every FP32 input under conversion c into f (at most 16 bits; stochastic
// rounding with `tile_random_bits`), as runs: within each binade (in the NaN binade, each stretch of
// 2^13 mantissas: a NaN's code keeps payload bits; under stochastic rounding, each tile),
// bisection from its ends; an interval whose two ends have the same code is taken as one run. Where that assumption fails the device sweep reports the
// inputs (the device codec disagrees with the runs there), and the CPU property
// formats/<case>/expected-runs-vs-host-codec samples inputs against the plain host codec.
CodeRuns code_runs(Format f, const Conversion& c);

std::vector<std::uint32_t> tile_first_runs(const CodeRuns& r);

}  // namespace kvq::props
