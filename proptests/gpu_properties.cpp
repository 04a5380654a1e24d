// GPU properties (device cuda): over ALL 2^32 FP32 inputs, the device-compiled codec
// equals the host codec for every format <= 16 bits x convention x rounding, and the
// cuda-* conventions equal the CUDA intrinsics on the device. Counted skips without a GPU.
#include <algorithm>
#include <stdexcept>
#include <sstream>
#include <thread>
#include <vector>

#include "formats/float_bits.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/cuda_intrinsic_models.hpp"
#include "proptests/gpu/format_sweeps.hpp"
#include "proptests/harness/generators.hpp"
#include "proptests/harness/property.hpp"

namespace kvq::props {
namespace {

std::string mismatch_line(Format f, const ConversionCase& k, const char* reference, const gpu::Mismatch& m) {
  return hex_code(kFP32, m.input) + " -> " + reference + " " + hex_code(f, m.expected) + ", kvq on device " +
         hex_code(f, m.actual) + "   replay: " + k.encode_replay(m.input);
}

Outcome intrinsic_sweep(const RunContext& ctx, int which) {
  const gpu::DeviceInfo device = gpu::device_info();
  if (!device.available) return skipped(device.why);
  const IntrinsicModel m = model_of(static_cast<CudaIntrinsic>(which));
  const ConversionCase k{m.format, m.convention, m.rounding};
  const gpu::SweepResult r = gpu::sweep_intrinsic(which);
  if (!r.error.empty()) throw std::runtime_error(r.error);
  Outcome o;
  o.cases = r.inputs;
  o.metrics = {{"sweep_ms", r.milliseconds}};
  if (r.mismatches) {
    std::ostringstream os;
    os << r.mismatches << " of " << r.inputs << " FP32 inputs differ on " << device.name << "; first:\n";
    for (const auto& x : r.first) os << "  " << mismatch_line(k.target(), k, m.name, x) << "\n";
    o.status = Status::failed;
    o.detail = os.str();
    o.replay = replay_line(ctx);
  }
  return o;
}

Outcome device_vs_host(const RunContext& ctx, const ConversionCase& k) {
  const gpu::DeviceInfo device = gpu::device_info();
  if (!device.available) return skipped(device.why);
  const Format f = k.target();
  const Conversion c = k.conversion();
  constexpr std::uint32_t kChunk = 1u << 28;
  std::vector<std::uint16_t> codes(kChunk);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  Tally tally;
  double device_ms = 0;
  for (std::uint64_t begin = 0; begin < (std::uint64_t{1} << 32); begin += kChunk) {
    double ms = 0;
    const std::string error = gpu::device_codes(f, c, begin, kChunk, codes.data(), &ms);
    if (!error.empty()) throw std::runtime_error(error);
    device_ms += ms;
    // Contiguous slices, a private tally each (merged after): no shared cache lines in the hot loop.
    std::vector<Tally> parts(threads);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        Tally local;
        const std::uint64_t lo = std::uint64_t{kChunk} * t / threads, hi = std::uint64_t{kChunk} * (t + 1) / threads;
        for (std::uint64_t i = lo; i < hi; ++i) {
          const auto bits = static_cast<std::uint32_t>(begin + i);
          const std::uint32_t rbits = k.rounding == Rounding::stochastic ? mix32(bits) : 0;
          const std::uint64_t host = encode(f, c, unpack(kFP32, bits), rbits);
          if (host == codes[i]) {
            local.pass();
          } else {
            local.fail(mismatch_line(f, k, "host codec", gpu::Mismatch{bits, static_cast<std::uint32_t>(host), codes[i]}));
          }
        }
        parts[t] = std::move(local);
      });
    }
    for (auto& th : pool) th.join();
    for (const auto& p : parts) tally.merge(p);
    ctx.progress(static_cast<double>(begin + kChunk) / 4294967296.0);
  }
  Outcome o = tally.outcome(ctx);
  o.metrics = {{"device_ms", device_ms}};
  return o;
}

void register_gpu_properties() {
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
