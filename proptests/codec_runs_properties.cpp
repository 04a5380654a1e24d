// The device sweeps' expected runs (proptests/codec_runs.hpp) equal the plain host codec: at every
// run's first and last input and its middle, and at random FP32 inputs. CPU properties, so the
// scheme the GPU suite relies on is checked where no GPU is.
#include <sstream>

#include "proptests/codec_runs.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/harness/mix32.hpp"
#include "proptests/harness/property.hpp"

namespace kvq::props {
namespace {

Outcome runs_vs_host(const RunContext& ctx, const ConversionCase& k) {
  const Format f = k.target();
  const Conversion c = k.conversion();
  const CodeRuns runs = code_runs(f, c);
  Tally tally;
  auto check = [&](std::uint32_t bits) {
    const bool stochastic = c.rounding == Rounding::stochastic;
    const std::uint32_t random_bits = stochastic ? tile_random_bits(bits) : 0;
    const std::uint64_t host = encode(f, c, unpack(kFP32, bits), random_bits);
    const std::uint16_t run = runs.code_of(bits);
    if (host == run) return tally.pass();
    tally.fail(hex_code(kFP32, bits) + (stochastic ? " (random bits " + hex_code(kFP32, random_bits) + ")" : "") +
               " -> host codec " + hex_code(f, host) + ", expected run " + hex_code(f, run) +
               (stochastic ? "" : "   replay: " + k.encode_replay(bits)));
  };
  const std::size_t n = runs.starts.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t first = runs.starts[i];
    const std::uint32_t last = i + 1 < n ? runs.starts[i + 1] - 1 : 0xFFFFFFFFu;
    check(first), check(last), check(first + (last - first) / 2);
  }
  std::uint64_t state = ctx.seed;
  for (std::int64_t i = 0; i < std::int64_t{ctx.cases} * 64; ++i) {
    state += 0x9E3779B97F4A7C15ull;
    check(mix32(state));
  }
  Outcome o = tally.outcome(ctx);
  o.metrics = {{"runs", static_cast<double>(n)}};
  return o;
}

void register_codec_runs_properties() {
  for_each_conversion_case(
      [](const ConversionCase& k) {
        add_property("formats", k.name() + "/expected-runs-vs-host-codec", Device::cpu,
                     [k](const RunContext& ctx) { return runs_vs_host(ctx, k); });
      },
      16);
}
KVQ_REGISTER_PROPERTIES(register_codec_runs_properties);

}  // namespace
}  // namespace kvq::props
