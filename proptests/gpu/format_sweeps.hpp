// Host interface to the GPU format sweeps (format_sweeps.cu). Plain C++ types only,
// so the properties that call it are compiled by the host compiler. Without CUDA the
// stub answers "unavailable" and every GPU property is a counted skip.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/codec.hpp"

namespace kvq::gpu {

struct DeviceInfo {
  bool available = false;
  std::string why;   // when not available
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3"
  int compute_capability = 0;
};
DeviceInfo device_info();

struct Mismatch {
  std::uint32_t input;
  std::uint32_t expected;  // the reference (intrinsic, or host codec)
  std::uint32_t actual;    // kvq on the device
};

struct SweepResult {
  std::string error;  // a CUDA error, if any
  std::uint64_t inputs = 0;
  std::uint64_t mismatches = 0;
  std::vector<Mismatch> first;
  double milliseconds = 0;  // device time of the sweep kernels (events)
};

// kvq's cuda-* model against the CUDA intrinsic `intrinsic` (proptests/cuda_intrinsics.hpp)
// on the device, over every FP32 bit pattern.
SweepResult sweep_intrinsic(int intrinsic);

// PTX rcp.approx.ftz.f32 against kvq's table model (formats/reciprocal.hpp), run on the device
// with a copy of `table` (2^20 bytes), over every FP32 bit pattern.
SweepResult sweep_rcp_approx(const std::uint8_t* table, std::size_t table_bytes);

// PTX div.full.f32 against kvq's model (formats/reciprocal.hpp div_full_with, with a copy of
// `table`) on the device: 2^32 pairs, every divisor bit pattern y with the dividend bits mix32(y).
SweepResult sweep_div_full(const std::uint8_t* table, std::size_t table_bytes);

// Fast path `which` (proptests/fast_path_cases.hpp) against the device-compiled codec, on the
// device, over every FP32 bit pattern.
SweepResult sweep_fast_path(int which);

// The device-compiled codec against the host codec's codes as runs (proptests/codec_runs.hpp;
// stochastic rounding with `tile_random_bits`): runs ascending starts and their codes, tile_first the run of each
// tile of 2^tile_bits inputs (and one more entry: the last run); every FP32 bit pattern compared.
SweepResult sweep_runs(Format f, const Conversion& c, const std::uint32_t* starts, const std::uint16_t* codes,
                       std::uint32_t runs, const std::uint32_t* tile_first, int tile_bits);

// The device-compiled codec over inputs [begin, begin + count) into codes (host memory).
// random_bits for stochastic rounding are kvq::props::mix32(input) on both sides.
std::string device_codes(Format f, const Conversion& c, std::uint64_t begin, std::uint32_t count,
                         std::uint16_t* codes, double* milliseconds);

}  // namespace kvq::gpu
