// An MLA cache writer checked from its tensors (docs/ports.md "MLA caches"): BF16 tokens quantized
// into a paged MLA cache of one of kvq's layouts (docs/layouts.md: the 656-byte FlashMLA record,
// vLLM's MODEL1 with its block-tail scales) at slot_mapping, as vLLM's quantize_and_insert_k_cache
// and SGLang's quantize_k_cache write it. The model is kvq's twin (mla_quantize_cpu) run on the
// cache as it was before the call; the whole cache is compared byte for byte, so bytes of other
// slots, block padding and the tail's pad bytes count too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/mla_kernels.hpp"
#include "kernels/status.hpp"

namespace kvq::ports {

struct MlaPort {
  kernels::MlaCacheShape shape;            // layout, num_blocks, block_size
  std::vector<std::uint16_t> k;            // BF16 [tokens, dims of the layout]
  std::vector<std::int64_t> slot_mapping;  // [tokens]; < 0: padding
  std::vector<std::uint8_t> after, before;  // the cache after the call, and before it
  bool before_known = true;
  std::int64_t tokens() const { return static_cast<std::int64_t>(slot_mapping.size()); }
};

struct MlaDifference {
  std::int64_t offset = 0;
  std::uint8_t before = 0, expected = 0, actual = 0;
  bool addressed = false;
  std::int64_t block = 0, entry = -1, slot = -1, token = -1;  // entry -1: block padding
  kernels::MlaPart part = kernels::MlaPart::pad;
  std::int64_t index = 0;  // the byte within its part of the token's record or tail
};

struct MlaComparison {
  Status error;
  std::int64_t bytes = 0, addressed_mismatches = 0, untouched_changed = 0;
  std::vector<MlaDifference> first;
  bool exact() const { return error.ok() && addressed_mismatches == 0 && untouched_changed == 0; }
};

MlaComparison compare_mla(const MlaPort& p, std::size_t keep);
std::string describe_mla(const MlaPort& p, const MlaComparison& c);

}  // namespace kvq::ports
