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

}  // namespace kvq::props
