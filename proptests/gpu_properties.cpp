// GPU properties (device cuda): over ALL 2^32 FP32 inputs, the device-compiled codec
// equals the host codec for every format <= 16 bits x convention x rounding, and the
// cuda-* conventions equal the CUDA intrinsics on the device. Counted skips without a GPU.
#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <sstream>
#include <vector>

#include "formats/float_bits.hpp"
#include "proptests/codec_runs.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/cuda_intrinsic_models.hpp"
#include "proptests/gpu/format_sweeps.hpp"
#include "formats/reciprocal.hpp"
#include "proptests/fast_path_cases.hpp"
#include "proptests/harness/generators.hpp"
#include "proptests/harness/property.hpp"

namespace kvq::props {
namespace {

std::string mismatch_line(Format f, const ConversionCase& k, const char* reference, const gpu::Mismatch& m) {
  return hex_code(kFP32, m.input) + " -> " + reference + " " + hex_code(f, m.expected) + ", kvq on device " +
         hex_code(f, m.actual) + "   replay: " + k.encode_replay(m.input);
}

// An all-2^32 device sweep as an outcome: a counted skip without a GPU; on mismatches the
// first few, each written by line(mismatch).
template <typename Sweep, typename Line>
Outcome sweep_outcome(const RunContext& ctx, Sweep&& sweep, Line&& line) {
  const gpu::DeviceInfo device = gpu::device_info();
  if (!device.available) return skipped(device.why);
  const gpu::SweepResult r = sweep();
  if (!r.error.empty()) throw std::runtime_error(r.error);
  Outcome o;
  o.cases = r.inputs;
  o.metrics = {{"sweep_ms", r.milliseconds}};
  if (r.mismatches) {
    std::ostringstream os;
    os << r.mismatches << " of " << r.inputs << " FP32 inputs differ on " << device.name << "; first:\n";
    for (const auto& x : r.first) os << "  " << line(x) << "\n";
    o.status = Status::failed;
    o.detail = os.str();
    o.replay = replay_line(ctx);
  }
  return o;
}

Outcome intrinsic_sweep(const RunContext& ctx, int which) {
  const IntrinsicModel m = model_of(static_cast<CudaIntrinsic>(which));
  const ConversionCase k{m.format, m.convention, m.rounding};
  return sweep_outcome(ctx, [&] { return gpu::sweep_intrinsic(which); },
                       [&](const gpu::Mismatch& x) { return mismatch_line(k.target(), k, m.name, x); });
}

// A deterministic conversion: the host codec's codes as runs (proptests/codec_runs.hpp), expanded
// and compared on the device. A mismatch line gives the host codec's own code too, so a wrong run
// (the step-function assumption failing) reads as such.
Outcome device_vs_host_runs(const RunContext& ctx, const ConversionCase& k) {
  const Format f = k.target();
  const Conversion c = k.conversion();
  const auto start = std::chrono::steady_clock::now();
  const CodeRuns runs = code_runs(f, c);
  const std::vector<std::uint32_t> tiles = tile_first_runs(runs);
  const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ctx.progress(0.5);
  const gpu::SweepResult r = gpu::sweep_runs(f, c, runs.starts.data(), runs.codes.data(),
                                             static_cast<std::uint32_t>(runs.starts.size()), tiles.data(), kRunTileBits);
  if (!r.error.empty()) throw std::runtime_error(r.error);
  Outcome o;
  o.cases = r.inputs;
  o.metrics = {{"sweep_ms", r.milliseconds}, {"runs", static_cast<double>(runs.starts.size())}, {"host_runs_ms", host_ms}};
  if (r.mismatches) {
    std::ostringstream os;
    os << r.mismatches << " of " << r.inputs << " FP32 inputs differ from the expected runs on the device; first:\n";
    for (const auto& x : r.first) {
      const std::uint32_t random_bits = c.rounding == Rounding::stochastic ? tile_random_bits(x.input) : 0;
      const std::uint64_t host = encode(f, c, unpack(kFP32, x.input), random_bits);
      os << "  " << mismatch_line(f, k, "host codec", gpu::Mismatch{x.input, static_cast<std::uint32_t>(host), x.actual})
         << (host == x.expected ? "" : "  (the expected run says " + hex_code(f, x.expected) + ": a wrong run)") << "\n";
    }
    o.status = Status::failed;
    o.detail = os.str();
    o.replay = replay_line(ctx);
  }
  return o;
}

// Stochastic rounding with the plain per-input random bits (mix32 of the input, as the sweeps drew
// them before the runs): 256 stretches of 2^16 inputs, one at a seeded place in each 2^24 (every
// second binade), computed on the device and compared on the host.
Outcome device_vs_host_per_input_bits(const RunContext& ctx, const ConversionCase& k) {
  const Format f = k.target();
  const Conversion c = k.conversion();
  constexpr std::uint32_t kStretch = 1u << 16;
  std::vector<std::uint16_t> codes(kStretch);
  Tally tally;
  double device_ms = 0;
  for (std::uint64_t region = 0; region < 256; ++region) {
    const std::uint64_t begin = region << 24 | (mix32(ctx.seed + region) & ((1u << 24) - kStretch));
    double ms = 0;
    const std::string error = gpu::device_codes(f, c, begin, kStretch, codes.data(), &ms);
    if (!error.empty()) throw std::runtime_error(error);
    device_ms += ms;
    for (std::uint32_t i = 0; i < kStretch; ++i) {
      const auto bits = static_cast<std::uint32_t>(begin + i);
      const std::uint64_t host = encode(f, c, unpack(kFP32, bits), mix32(bits));
      if (host == codes[i]) {
        tally.pass();
      } else {
        tally.fail(mismatch_line(f, k, "host codec", gpu::Mismatch{bits, static_cast<std::uint32_t>(host), codes[i]}) +
                   " (random bits " + hex_code(kFP32, mix32(bits)) + ")");
      }
    }
  }
  Outcome o = tally.outcome(ctx);
  o.metrics = {{"device_ms", device_ms}};
  return o;
}

// Every conversion over all 2^32 inputs by the host's runs (stochastic rounding with one draw of
// random bits a tile, `tile_random_bits`); stochastic rounding also on 2^24 inputs with a draw each.
Outcome device_vs_host(const RunContext& ctx, const ConversionCase& k) {
  const gpu::DeviceInfo device = gpu::device_info();
  if (!device.available) return skipped(device.why);
  Outcome o = device_vs_host_runs(ctx, k);
  if (k.rounding != Rounding::stochastic || o.status == Status::failed) return o;
  Outcome sampled = device_vs_host_per_input_bits(ctx, k);
  sampled.cases += o.cases;
  sampled.metrics.insert(sampled.metrics.end(), o.metrics.begin(), o.metrics.end());
  return sampled;
}

// kvq's table model of rcp.approx.ftz.f32 (measured on an H100) against the instruction on this
// GPU: a port to another GPU generation learns here whether the FlashInfer/vLLM models still hold.
Outcome rcp_approx_sweep(const RunContext& ctx) {
  return sweep_outcome(
      ctx, [] { return gpu::sweep_rcp_approx(reciprocal_detail::sm90_table(), reciprocal_detail::sm90_table_bytes()); },
      [](const gpu::Mismatch& x) {
        return hex_code(kFP32, x.input) + " -> rcp.approx.ftz " + hex_code(kFP32, x.expected) + ", model " +
               hex_code(kFP32, x.actual);
      });
}

// kvq's model of div.full.f32 (Triton's `/`) against the instruction on this GPU; a mismatch names
// the divisor y, the dividend being mix32(y)'s bits.
Outcome div_full_sweep(const RunContext& ctx) {
  return sweep_outcome(
      ctx, [] { return gpu::sweep_div_full(reciprocal_detail::sm90_table(), reciprocal_detail::sm90_table_bytes()); },
      [](const gpu::Mismatch& x) {
        return hex_code(kFP32, mix32(x.input)) + " / " + hex_code(kFP32, x.input) + " -> div.full " +
               hex_code(kFP32, x.expected) + ", model " + hex_code(kFP32, x.actual);
      });
}

// The kernels' fast conversions (formats/fast_paths.hpp) against the codec, both on the device.
Outcome fast_path_sweep(const RunContext& ctx, int which) {
  return sweep_outcome(ctx, [&] { return gpu::sweep_fast_path(which); }, [](const gpu::Mismatch& x) {
    return hex_code(kFP32, x.input) + " -> codec " + hex_code(kFP32, x.expected) + ", fast path " +
           hex_code(kFP32, x.actual);
  });
}

void register_gpu_properties() {
  for (int i = 0; i < kFastPathCount; ++i)
    add_property("gpu", std::string("fast-paths/") + kFastPathNames[i] + "/device-vs-codec-all-fp32", Device::cuda,
                 [i](const RunContext& ctx) { return fast_path_sweep(ctx, i); });
  add_property("gpu", "rcp-approx-ftz/device-instruction-vs-model-all-fp32", Device::cuda, rcp_approx_sweep);
  add_property("gpu", "div-full/device-instruction-vs-model-all-fp32-divisors", Device::cuda, div_full_sweep);
  for (int i = 0; i < kCudaIntrinsicCount; ++i) {
    add_property("gpu", std::string(model_of(static_cast<CudaIntrinsic>(i)).name) + "/device-intrinsic-vs-codec-all-fp32",
                 Device::cuda, [i](const RunContext& ctx) { return intrinsic_sweep(ctx, i); });
  }
  for_each_conversion_case(
      [](const ConversionCase& k) {
        add_property("gpu", k.name() + "/device-vs-host-codec-all-fp32", Device::cuda,
                     [k](const RunContext& ctx) { return device_vs_host(ctx, k); });
      },
      16);
}
KVQ_REGISTER_PROPERTIES(register_gpu_properties);

}  // namespace
}  // namespace kvq::props
