// A 64 -> 32 bit hash (murmur3's finaliser), host and device: the random bits of stochastic
// rounding in sweeps, and the random inputs of the CUDA-header suite.
#pragma once

#include <cstdint>

#include "formats/host_device.hpp"

namespace kvq::props {

// Deterministic random bits for stochastic rounding in sweeps (a hash of the input);
// the same function on host and device.
KVQ_HD constexpr std::uint32_t mix32(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<std::uint32_t>(x);
}

}  // namespace kvq::props
