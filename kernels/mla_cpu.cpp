// CPU twins of the MLA and prefill-workspace kernels: validation, then the same per-chunk code
// the kernels run (kernels/mla_kernels.hpp).
#include <cmath>
#include <sstream>
#include <vector>

#include "kernels/mla_kernels.hpp"

namespace kvq::kernels {

const char* name_of(KScale k) { return k == KScale::fold ? "fold-k-scale" : "drop-k-scale"; }
const char* name_of(MlaLayoutId id) { return mla_layout(id).name; }

Status validate(const MlaCacheShape& c) {
  std::ostringstream os;
  if (c.num_blocks < 0) {
    os << "num_blocks must be >= 0, got " << c.num_blocks;
  } else if (c.block_size <= 0) {
    os << "block_size must be > 0, got " << c.block_size;
  }
  return os.str();
}

namespace {

Status validate_k_scale(float k_scale) {
  if (std::isfinite(k_scale) && k_scale > 0.0f) return {};
  std::ostringstream os;
  os << "k_scale must be finite and > 0, got " << k_scale;
  return os.str();
}

Status validate_slots(const MlaCacheShape& c, const std::int64_t* slot_mapping, std::int64_t num_tokens) {
  std::vector<bool> taken(static_cast<std::size_t>(c.slots()), false);
  for (std::int64_t i = 0; i < num_tokens; ++i) {
    const std::int64_t s = slot_mapping[i];
    if (s < 0) continue;  // padding
    std::ostringstream os;
    if (s >= c.slots()) {
      os << "slot_mapping[" << i << "] = " << s << " is past the cache's " << c.slots() << " slots (num_blocks "
         << c.num_blocks << " x block_size " << c.block_size << ")";
      return os.str();
    }
    if (taken[s]) {
      os << "slot_mapping[" << i << "] = " << s << " repeats an earlier token's slot";
      return os.str();
    }
    taken[s] = true;
  }
  return {};
}

}  // namespace

Status validate_requantize(std::int64_t num_blocks, std::int64_t block_size, float k_scale) {
  if (auto e = validate(MlaCacheShape{MlaLayoutId::fp8_nope_fp8_rope, num_blocks, block_size}); !e.ok()) return e;
  return validate_k_scale(k_scale);
}

Status mla_requantize_576_to_656_cpu(std::int64_t num_blocks, std::int64_t block_size, const std::uint8_t* src,
                                     float k_scale, KScale mode, std::uint8_t* dst) {
  if (auto e = validate_requantize(num_blocks, block_size, k_scale); !e.ok()) return e;
  const MlaCacheShape c{MlaLayoutId::fp8_nope_fp8_rope, num_blocks, block_size};
  for (std::int64_t s = 0; s < c.slots(); ++s)
    for (int chunk = 0; chunk < kRequantChunks; ++chunk)
      requantize_576_to_656_chunk(block_size, src, k_scale, mode, dst, s, chunk);
  return {};
}

Status validate_quantize(const MlaCacheShape& c, std::int64_t num_tokens) {
  if (auto e = validate(c); !e.ok()) return e;
  if (c.desc().tile == 0)
    return std::string("layout must be a tiled FP8 layout (") + kMlaFp8NopeBlockScaleBf16Rope.name + " or " +
           kMlaModel1Fp8Sparse.name + "), got " + c.desc().name;
  if (num_tokens < 0) return "num_tokens must be >= 0, got " + std::to_string(num_tokens);
  return {};
}

Status mla_tile_recipe_error(const MlaCacheShape& c, const Recipe& r) {
  const MlaLayout l = c.desc();
  std::ostringstream os;
  const bool fp32_scales = l.tile != 0 && l.segment(MlaPart::tile_scales).format == FormatId::fp32;
  if (l.tile == 0) {
    os << "layout " << l.name << " has no tiles";
  } else if (r.element != FormatId::e4m3fn) {
    os << "recipe must have E4M3 (e4m3fn) elements for " << l.name;
  } else if (r.scale == BlockScale::e4m3_two_level) {
    os << "recipe must be a power-of-two (E8M0) tile rule or a per-tile FP32 scale for " << l.name
       << ", not a two-level rule";
  } else if (r.scale == BlockScale::tensor_only && !fp32_scales) {
    os << "a per-tile FP32 scale cannot be stored in " << l.name << "'s E8M0 tile scales";
  } else if (r.scale == BlockScale::e8m0_pow2 && r.block != l.tile) {
    os << "recipe's block must be the layout's tile (" << l.tile << " for " << l.name << "), got " << r.block;
  }
  return os.str();
}

Status mla_quantize_cpu(const MlaCacheShape& c, const Recipe& tile, const std::uint16_t* x,
                        const std::int64_t* slot_mapping, std::int64_t num_tokens, std::uint8_t* cache) {
  if (auto e = validate_quantize(c, num_tokens); !e.ok()) return e;
  if (auto e = mla_tile_recipe_error(c, tile); !e.ok()) return e;
  if (auto e = validate_slots(c, slot_mapping, num_tokens); !e.ok()) return e;
  for (std::int64_t i = 0; i < num_tokens; ++i)
    if (slot_mapping[i] >= 0) mla_quantize_token(c, tile, x, i, cache, slot_mapping[i]);
  return {};
}

Status mla_quantize_cpu(const MlaCacheShape& c, const std::uint16_t* x, const std::int64_t* slot_mapping,
                        std::int64_t num_tokens, std::uint8_t* cache) {
  if (auto e = validate_quantize(c, num_tokens); !e.ok()) return e;
  return mla_quantize_cpu(c, mla_tile_recipe(c.desc()), x, slot_mapping, num_tokens, cache);
}

Status validate_dequantize(const MlaCacheShape& c, float k_scale) {
  if (auto e = validate(c); !e.ok()) return e;
  if (c.layout == MlaLayoutId::fp8_nope_fp8_rope) return validate_k_scale(k_scale);
  return {};
}

Status mla_dequantize_cpu(const MlaCacheShape& c, const std::uint8_t* cache, float k_scale, DType output, void* y) {
  if (auto e = validate_dequantize(c, k_scale); !e.ok()) return e;
  for (std::int64_t s = 0; s < c.slots(); ++s)
    for (int span = 0; span < mla_dequantize_spans(c.desc()); ++span)
      mla_dequantize_span(c, cache, k_scale, output, y, s, span);
  return {};
}

Status validate(const WorkspaceBatch& w, float factor_k, float factor_v) {
  std::ostringstream os;
  const Recipe& r = w.recipe;
  const Nvfp4PageGeometry& g = w.pages;
  if (r.element != FormatId::e2m1 || r.block != Nvfp4PageGeometry::kBlock || r.scale != BlockScale::e4m3_two_level) {
    os << "recipe must be NVFP4-shaped (e2m1 elements, E4M3 scales over blocks of 16) for the vLLM NVFP4 page";
  } else if (g.num_blocks < 0) {
    os << "num_blocks must be >= 0, got " << g.num_blocks;
  } else if (g.block_size <= 0) {
    os << "block_size must be > 0, got " << g.block_size;
  } else if (g.heads <= 0) {
    os << "heads must be > 0, got " << g.heads;
  } else if (g.head_dim <= 0 || g.head_dim % Nvfp4PageGeometry::kBlock != 0) {
    os << "head_dim must be a positive multiple of 16, got " << g.head_dim;
  } else if (w.batch < 0) {
    os << "batch must be >= 0, got " << w.batch;
  } else if (w.max_blocks_per_seq <= 0) {
    os << "max_blocks_per_seq (block_tables columns) must be > 0, got " << w.max_blocks_per_seq;
  } else if (w.workspace_tokens < 0) {
    os << "workspace_tokens must be >= 0, got " << w.workspace_tokens;
  } else if (factor_k != factor_k) {
    os << "factor_k (K workspace scale) must not be NaN";
  } else if (factor_v != factor_v) {
    os << "factor_v (V workspace scale) must not be NaN";
  }
  return os.str();
}

namespace {

Status validate_tables(const WorkspaceBatch& w, const std::int32_t* block_tables, const std::int32_t* cu_seq_lens) {
  std::ostringstream os;
  if (cu_seq_lens[0] != 0) {
    os << "cu_seq_lens[0] must be 0, got " << cu_seq_lens[0];
    return os.str();
  }
  const std::int64_t capacity = w.max_blocks_per_seq * w.pages.block_size;
  for (std::int64_t b = 0; b < w.batch; ++b) {
    const std::int64_t len = std::int64_t{cu_seq_lens[b + 1]} - cu_seq_lens[b];
    if (len < 0 || len > capacity) {
      os << "sequence length of request " << b << " (cu_seq_lens[" << b + 1 << "] - cu_seq_lens[" << b << "] = " << len
         << ") must be in 0.." << capacity << " (max_blocks_per_seq x block_size)";
      return os.str();
    }
    for (std::int64_t k = 0; k * w.pages.block_size < len; ++k) {
      const std::int32_t page = block_tables[b * w.max_blocks_per_seq + k];
      if (page < 0 || page >= w.pages.num_blocks) {
        os << "block_tables[" << b << "][" << k << "] = " << page << " is not a block of the cache (num_blocks "
           << w.pages.num_blocks << ")";
        return os.str();
      }
    }
  }
  if (cu_seq_lens[w.batch] != w.workspace_tokens) {
    os << "cu_seq_lens[batch] = " << cu_seq_lens[w.batch] << " must equal workspace_tokens = " << w.workspace_tokens;
    return os.str();
  }
  return {};
}

}  // namespace

Status nvfp4_paged_to_workspace_cpu(const WorkspaceBatch& w, const std::uint8_t* cache,
                                    const std::int32_t* block_tables, const std::int32_t* cu_seq_lens,
                                    float factor_k, float factor_v, std::uint8_t* k_out, std::uint8_t* v_out) {
  if (auto e = validate(w, factor_k, factor_v); !e.ok()) return e;
  if (auto e = validate_tables(w, block_tables, cu_seq_lens); !e.ok()) return e;
  for (std::int64_t side = 0; side < w.page_sides(); ++side)
    nvfp4_page_side_to_workspace(w, cache, block_tables, cu_seq_lens, factor_k, factor_v, k_out, v_out, side);
  return {};
}

}  // namespace kvq::kernels
