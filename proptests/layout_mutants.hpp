// Hooks that let the layout mutants (proptests/layout_mutants.cpp: swizzle on the wrong side, padding
// slot written, per-tensor scale dropped in a layout conversion; the bug classes seen in public kernels) run the
// ordinary paged and MLA properties: the property builds its input and its expected bytes as always,
// and only the kernel call sees the mutant's changed parameter.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/mla_kernels.hpp"
#include "kernels/paged_store.hpp"
#include "proptests/harness/property.hpp"

namespace kvq::props {

// A paged-store mutant: the store runs with this change made to its shape and slot mapping.
using PagedMutation = std::function<void(kernels::PagedStoreShape&, std::vector<std::int64_t>& slot_mapping)>;

// paged store/<recipe>/twin-vs-model-whole-cache with the store run under `mutation` (null: none),
// on the CPU twin or (device) the CUDA launcher with check_slots off.
Outcome paged_store_vs_model(const RunContext& ctx, const Recipe& r, kernels::PagedFormat f,
                             const PagedMutation& mutation, bool device);

// mla requant-576-to-656/<claimed>/cpu-twin-vs-oracle with the conversion run in mode `run`, on the
// CPU twin or (device) the CUDA launcher.
Outcome mla_requant_vs_oracle(const RunContext& ctx, kernels::KScale claimed, kernels::KScale run, bool device);

// mla quantize-<layout>[/<claimed>]/cpu-twin-vs-recipe-oracle (claimed nullptr: the layout's own
// tile rule) with the writer applying tile rule `run` (nullptr: the layout's own), on the CPU twin or
// (device, `run` nullptr) the CUDA launcher.
Outcome mla_quantize_vs_recipe_oracle(const RunContext& ctx, kernels::MlaLayoutId layout, const char* claimed,
                                      const char* run, bool device);

// How a RoPE port's element arithmetic departs from kvq's FP32 model (docs/rope.md "Arithmetic
// variants"): the RoPE mutants.
enum class RopeElementBug : std::uint8_t {
  none,
  fma_x_cos,      // fma(x, cos, -/+RN(partner*sin)): the compiler contracted the element's own product
  flush_to_zero,  // every subnormal input and result of an FP32 operation flushed to +-0
};

// rope crafted-elements-by-hand: the codes of crafted calls, worked out by hand, against kvq's fused
// twin (bug none), the CUDA launcher (device), or a port with `bug` (CPU).
Outcome rope_crafted_vs_hand(const RunContext& ctx, RopeElementBug bug, bool device);

}  // namespace kvq::props
