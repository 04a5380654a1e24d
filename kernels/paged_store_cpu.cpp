#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

#include "kernels/cpu_rows.hpp"
#include "kernels/paged_store.hpp"

namespace kvq::kernels {
namespace {

bool is_fp8_recipe(const Recipe& r) { return r.element == FormatId::e4m3fn && r.scale == BlockScale::tensor_only; }
bool is_nvfp4_recipe(const Recipe& r) {
  return r.element == FormatId::e2m1 && r.scale == BlockScale::e4m3_two_level && r.block == kPagedChunk;
}

Status validate_layout(const PagedKvLayout& L) {
  std::ostringstream os;
  const bool nvfp4 = L.format == PagedFormat::nvfp4;
  if (L.num_blocks < 1) {
    os << "num_blocks must be >= 1, got " << L.num_blocks;
  } else if (L.block_size < 1) {
    os << "block_size must be >= 1, got " << L.block_size;
  } else if (L.heads < 1 || L.heads > kMaxPagedHeads) {
    os << "heads must be in 1.." << kMaxPagedHeads << ", got " << L.heads;
  } else if (L.head_dim <= 0 || L.head_dim % kPagedChunk != 0) {
    os << "head_dim must be a positive multiple of 16" << (nvfp4 ? " for NVFP4" : " (the FP8 store's chunk)")
       << ", got " << L.head_dim;
  } else if (!nvfp4 && L.swizzle != ScaleSwizzle::none) {
    os << "swizzle must be none for the FP8 layout (it has no block scales)";
  } else if (L.swizzle != ScaleSwizzle::none && L.block_size % kSwizzleGroup != 0) {
    os << "block_size must be a multiple of 4 with a scale swizzle, got " << L.block_size;
  }
  return os.str();
}

Status validate_scales(const PagedStoreShape& s, const PagedScales& scales) {
  const std::int64_t count = s.per_head_scales ? s.layout.heads : 1;
  const char* what = s.layout.format == PagedFormat::fp8 ? "_scale" : "_global_scale";
  for (const auto& [name, values] : {std::pair{"k", scales.k}, std::pair{"v", scales.v}}) {
    for (std::int64_t h = 0; h < count; ++h) {
      const float x = values[h];
      if (!(x > 0.0f) || x > kFp32Max) {  // NaN, <= 0, inf
        std::ostringstream os;
        os << name << what << "[" << h << "] must be finite and > 0, got " << x;
        return os.str();
      }
    }
  }
  return {};
}

}  // namespace

Status validate(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a) {
  if (auto e = validate_layout(s.layout); !e.ok()) return e;
  const bool nvfp4 = s.layout.format == PagedFormat::nvfp4;
  if (nvfp4 && !is_nvfp4_recipe(s.recipe)) return "recipe must be NVFP4 (E2M1 elements, E4M3 block scale, block 16) for the NVFP4 layout";
  if (!nvfp4 && !is_fp8_recipe(s.recipe)) return "recipe must be per-tensor E4M3 (fp8-e4m3-tensor or fp8-e4m3-tensor-rcp) for the FP8 layout";
  if (s.tokens < 0) return "tokens must be >= 0, got " + std::to_string(s.tokens);
  const std::int64_t row = s.layout.heads * s.layout.head_dim;
  for (const auto& [name, stride] : {std::pair{"key_stride", s.key_stride}, std::pair{"value_stride", s.value_stride}})
    if (stride != 0 && stride < row)
      return std::string(name) + " must be 0 (contiguous) or >= heads*head_dim = " + std::to_string(row) + ", got " +
             std::to_string(stride);
  if (auto e = validate_scales(s, scales); !e.ok()) return e;
  if (nvfp4 && a.value_cache) return "value_cache must be null for the NVFP4 layout (K and V share key_cache, the kv_cache)";
  if (s.tokens == 0) return {};
  if (!a.key) return "key must not be null";
  if (!a.value) return "value must not be null";
  if (!a.slot_mapping) return "slot_mapping must not be null";
  if (!a.key_cache) return nvfp4 ? "key_cache (the kv_cache) must not be null" : "key_cache must not be null";
  if (!nvfp4 && !a.value_cache) return "value_cache must not be null";
  return {};
}

Status validate_slots(const PagedKvLayout& layout, const std::int64_t* slot_mapping, std::int64_t tokens) {
  std::vector<std::pair<std::int64_t, std::int64_t>> used;  // (slot, token)
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t slot = slot_mapping[t];
    if (slot >= layout.slots()) {
      std::ostringstream os;
      os << "slot_mapping[" << t << "] = " << slot << " is out of range: num_blocks*block_size = " << layout.slots();
      return os.str();
    }
    if (slot >= 0) used.emplace_back(slot, t);
  }
  std::sort(used.begin(), used.end());
  for (std::size_t i = 1; i < used.size(); ++i) {
    if (used[i].first == used[i - 1].first) {
      std::ostringstream os;
      os << "slot_mapping[" << used[i - 1].second << "] and slot_mapping[" << used[i].second << "] are both "
         << used[i].first << ": duplicate slots are rejected (the write order would decide the cache)";
      return os.str();
    }
  }
  return {};
}

Status paged_store_cpu(const PagedStoreShape& s, const PagedScales& scales, const PagedStoreArgs& a) {
  if (auto e = validate(s, scales, a); !e.ok()) return e;
  if (auto e = validate_slots(s.layout, a.slot_mapping, s.tokens); !e.ok()) return e;
  const std::int64_t items = paged_store_items(s);
  const bool narrow = paged_store_narrow(s);  // the index width the kernel uses
  const PagedDividers d = paged_dividers(s);
  const PagedTables tables(s.recipe, scales);  // as the kernels: once
  const PagedTerms t = tables.terms(scales);
  // Items write disjoint bytes (validate_slots: no slot twice), as the kernel's threads do.
  const std::int64_t elements = 2 * s.tokens * s.layout.heads * s.layout.head_dim;
  for_ranges(items, elements, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t item = first; item < last; ++item) {
      if (narrow) paged_store_item(s, s.recipe, scales, a, static_cast<std::uint32_t>(item), d, t);
      else paged_store_item(s, s.recipe, scales, a, item, d, t);
    }
  });
  return {};
}

}  // namespace kvq::kernels
