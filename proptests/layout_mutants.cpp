// The layout bug classes seen in public kernels as mutants: swizzle applied on the wrong side,
// padding slot written, per-tensor scale dropped in a layout conversion, a tile rule's scales of
// another kind (FP32 for powers of two), a RoPE port's FMA contraction or flush to zero. Each is kvq's own kernel
// (the CPU twin in suite `mutants`, the CUDA launcher in suite `gpu`, mutants/<name>/device) given
// one wrong parameter; the ordinary paged / MLA property of that kernel must catch it.
#include <sstream>

#include "formats/recipe_names.hpp"
#include "proptests/layout_mutants.hpp"

namespace kvq::props {
namespace {

using kernels::KScale;
using kernels::PagedFormat;
using kernels::ScaleSwizzle;

struct LayoutMutant {
  const char* name;
  const char* bug_class;  // a bug seen in public kernels
  const char* claims;     // what the kernel says it does
  const char* property;   // the ordinary property run against it
  std::function<Outcome(const RunContext&, bool device)> run;
  // false: the bug is a port's arithmetic that kvq's CUDA kernels do not have (the RoPE element
  // mutants); the device suite holds kvq's kernel to the same property (gpu rope/crafted-elements-by-hand).
  bool device_variant = true;
};

// The swizzle of V's scales applied to K's as well (the layout says V only).
void swizzle_k_too(kernels::PagedStoreShape& s, std::vector<std::int64_t>&) {
  if (s.layout.swizzle == ScaleSwizzle::v_only) s.layout.swizzle = ScaleSwizzle::k_and_v;
}

// Padding slots (< 0) indexed as Python does: slot + slots, the end of the cache, written.
void wrap_padding_slots(kernels::PagedStoreShape& s, std::vector<std::int64_t>& slots) {
  for (std::int64_t& slot : slots)
    if (slot < 0) slot += s.layout.slots();
}

Recipe named(const char* name) { return recipe_from_name(name)->recipe; }

std::vector<LayoutMutant> build() {
  return {
      {"paged-nvfp4-k-scales-swizzled", "swizzle applied on the wrong side (K as well as V)", "paged store, nvfp4",
       "paged store/nvfp4/twin-vs-model-whole-cache",
       [](const RunContext& ctx, bool device) {
         return paged_store_vs_model(ctx, named("nvfp4"), PagedFormat::nvfp4, swizzle_k_too, device);
       }},
      {"paged-fp8-padding-slot-written", "padding slot (slot < 0) written, at the wrapped slot", "paged store, fp8-e4m3-tensor",
       "paged store/fp8-e4m3-tensor/twin-vs-model-whole-cache",
       [](const RunContext& ctx, bool device) {
         return paged_store_vs_model(ctx, named("fp8-e4m3-tensor"), PagedFormat::fp8, wrap_padding_slots, device);
       }},
      {"mla-576-to-656-k-scale-dropped", "per-tensor scale dropped in a layout conversion (drop run as fold)",
       "MLA requant 576 -> 656, fold", "mla requant-576-to-656/fold/cpu-twin-vs-oracle",
       [](const RunContext& ctx, bool device) { return mla_requant_vs_oracle(ctx, KScale::fold, KScale::drop, device); }},
      {"mla-656-fp32-tile-scales-for-power-of-two", "FP32 tile scales (amax/448, SGLang's) where FlashMLA's powers of two are claimed",
       "MLA 656 writer, mla-fp8-tile128", "mla quantize-fp8_nope_with_block_scale_bf16_rope/mla-fp8-tile128/cpu-twin-vs-recipe-oracle",
       [](const RunContext& ctx, bool device) {
         return mla_quantize_vs_recipe_oracle(ctx, kernels::MlaLayoutId::fp8_nope_block_scale_bf16_rope, "mla-fp8-tile128",
                                              nullptr, device);
       }},
      {"rope-fma-contracted", "the rotation's own product contracted into an FMA (-use_fast_math, nvcc's default -fmad)",
       "kvq's RoPE + FP8 model (no FMA)", "rope crafted-elements-by-hand",
       [](const RunContext& ctx, bool) { return rope_crafted_vs_hand(ctx, RopeElementBug::fma_x_cos, false); }, false},
      {"rope-flush-to-zero", "subnormal inputs and results flushed to zero (-use_fast_math, -ftz=true)",
       "kvq's RoPE + FP8 model (subnormals kept)", "rope crafted-elements-by-hand",
       [](const RunContext& ctx, bool) { return rope_crafted_vs_hand(ctx, RopeElementBug::flush_to_zero, false); }, false},
  };
}

const std::vector<LayoutMutant>& layout_mutants() {
  static const std::vector<LayoutMutant> all = build();
  return all;
}

// Passes when the property fails on the mutant; the detail says after how many cases, as suite
// `mutants` reports the recipe-level mutants (proptests/port_suites.cpp).
Outcome caught(const LayoutMutant& m, const RunContext& ctx, bool device) {
  const Outcome r = m.run(ctx, device);
  Outcome o;
  o.cases = r.cases;
  std::ostringstream os;
  os << m.name << (device ? " (device)" : "") << " (" << m.bug_class << "; claims " << m.claims << "):\n  " << m.property
     << ": ";
  if (r.status == Status::failed) {
    std::string text = r.detail;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    const auto nl = text.rfind('\n');
    os << "CAUGHT after " << r.cases << " cases: " << (nl == std::string::npos ? text : text.substr(nl + 1)) << "\n";
    o.classes.emplace_back(std::string("caught by ") + m.property, static_cast<int>(r.cases));
    o.detail = os.str();
    return o;
  }
  os << name_of(r.status) << " (" << r.cases << " cases)\n";
  o.status = Status::failed;
  o.detail = "NOT CAUGHT: " + os.str();
  o.replay = replay_line(ctx);
  return o;
}

void register_layout_mutants() {
  for (const LayoutMutant& m : layout_mutants()) {
    add_property("mutants", m.name, Device::cpu, [&m](const RunContext& ctx) { return caught(m, ctx, false); });
    if (!m.device_variant) continue;
    add_property("gpu", std::string("mutants/") + m.name + "/device", Device::cuda, [&m](const RunContext& ctx) {
      std::string why;
      if (!kernels::device::available(&why)) return skipped(why);
      // All the cases: the properties already run a half (paged) or a tenth (MLA) of them, small caches.
      return caught(m, ctx, true);
    });
  }
}
KVQ_REGISTER_PROPERTIES(register_layout_mutants);

}  // namespace
}  // namespace kvq::props
