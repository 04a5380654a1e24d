// The kernels' fast conversion paths equal the codec (formats/fast_paths.hpp). On the CPU: every
// FP32 high half with seven low halves (the rounding-relevant ones and a random one), 458,752
// inputs per path; the GPU suite sweeps all 2^32 inputs on the device (gpu_properties.cpp).
#include <sstream>

#include "formats/names.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/fast_path_cases.hpp"
#include "proptests/harness/mix32.hpp"
#include "proptests/harness/rapidcheck_bridge.hpp"

namespace kvq::props {
namespace {

Outcome stratified_sample(const RunContext& ctx, FastPath p) {
  Tally tally;
  const std::uint32_t fixed_lows[] = {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu};
  for (std::uint32_t high = 0; high < 0x10000u; ++high) {
    for (int j = 0; j < 7; ++j) {
      const std::uint32_t random_low = mix32(static_cast<std::uint32_t>(ctx.seed) ^ high) & 0xffffu;
      const std::uint32_t bits = high << 16 | (j < 6 ? fixed_lows[j] : random_low);
      const std::uint32_t fast = fast_path_result(p, bits), reference = fast_path_reference(p, bits);
      if (fast_path_agrees(p, fast, reference)) {
        tally.pass();
      } else {
        std::ostringstream os;
        os << hex_code(kFP32, bits) << ": fast " << hex_code(kFP32, fast) << ", codec " << hex_code(kFP32, reference);
        tally.fail(os.str());
      }
    }
  }
  return tally.outcome(ctx);
}

void register_fast_path_properties() {
  for (int i = 0; i < kFastPathCount; ++i)
    add_property("formats", std::string("fast-paths/") + kFastPathNames[i] + "/equals-codec-sample", Device::cpu,
                 [i](const RunContext& ctx) { return stratified_sample(ctx, static_cast<FastPath>(i)); });
}
KVQ_REGISTER_PROPERTIES(register_fast_path_properties);

}  // namespace
}  // namespace kvq::props
