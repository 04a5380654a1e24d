// A paged KV store port ("reshape and cache": vLLM's reshape_and_cache_flash and its Triton form,
// kvq's kernels/paged_store.hpp; vLLM's per-token-head FP8 store, whose scales go to two more
// caches) checked from its tensors: the caches the port wrote against the
// CPU twin run on the caches as they were before the call, byte for byte over whole buffers, so a
// port that writes outside the slots its tokens address fails even where every addressed byte is
// right. What `kvq verify` reports for the manifest kind `paged-store` (docs/ports.md "Paged
// stores").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/paged_store.hpp"
#include "kernels/status.hpp"
#include "oracle/layout_identification.hpp"

namespace kvq::ports {

// Buffers a paged store writes: FP8 key_cache, value_cache (and, per token and head,
// k_scale_cache, v_scale_cache), or one NVFP4 kv_cache.
inline constexpr int kMaxPagedBuffers = 4;

struct PagedPort {
  kernels::PagedStoreShape shape;  // layout, recipe, tokens, input dtype (contiguous key / value)
  // vLLM's per-token-head FP8 store (kv_cache_dtype fp8_per_token_head): each (token, head) row
  // quantized with its own tensor scale (shape.recipe, a per-tensor E4M3 recipe, on the row's amax),
  // that scale stored as FP32 in k_scale_cache / v_scale_cache [num_blocks, block_size, heads] at the
  // token's slot (buffers 2 and 3); scales.k / scales.v unused.
  bool token_head_scales = false;
  kernels::PagedScales scales;     // decode scales: FP8 k_scale / v_scale, NVFP4 the tensor scales g
  std::vector<std::uint8_t> key, value;  // [T, heads, D] raw values of shape.input
  std::vector<std::int64_t> slot_mapping;  // [T]; < 0: a padding token, which writes nothing
  // The caches after the call and before it (the poison the caller filled them with, or a dump):
  // FP8 key_cache and value_cache; NVFP4 one kv_cache (buffer 0 only). Where the port gave
  // neither, before is its after (before_known false): the addressed bytes are still checked, the
  // untouched ones cannot be.
  std::vector<std::uint8_t> after[kMaxPagedBuffers], before[kMaxPagedBuffers];
  bool before_known[kMaxPagedBuffers] = {true, true, true, true};
  // SGLang's NVFP4 pool: four buffers k_buffer [slots, heads, D/2], k_scale_buffer [slots, heads,
  // D/16], v_buffer, v_scale_buffer are, in that order, the bytes of one vLLM page of block_size =
  // slots (docs/ports.md "Paged stores"); after[0] is their concatenation and the report names
  // each byte by its buffer. Empty: the caches are the port's own.
  std::vector<std::pair<std::string, std::int64_t>> pieces;  // (role, bytes) in order
};

// One differing byte, located: the page (block), the token position in it and the slot, and,
// where a token addresses the slot, the token, head and element (or NVFP4 scale) it holds.
struct PagedDifference {
  int buffer = 0;  // 0: key_cache (or kv_cache), 1: value_cache, 2: k_scale_cache, 3: v_scale_cache
  std::int64_t offset = 0;
  std::uint8_t before = 0, expected = 0, actual = 0;
  kernels::KvSide side = kernels::KvSide::k;
  bool scale = false;  // an NVFP4 scale byte or a byte of a per-token-head scale (else element codes)
  std::int64_t page = 0, position = 0, slot = 0, head = 0;
  std::int64_t index = 0;   // FP8: the dim; NVFP4: the data byte (dims 2i, 2i+1) or scale number; a per-token-head scale: its byte
  std::int64_t token = -1;  // the token that addresses the slot, -1: none
};

struct PagedComparison {
  Status error;  // the twin's validation of the port's shapes, scales and slots
  std::int64_t bytes[kMaxPagedBuffers] = {}, addressed_mismatches[kMaxPagedBuffers] = {},
               untouched_changed[kMaxPagedBuffers] = {};
  std::vector<PagedDifference> first;
  std::int64_t differing() const {
    std::int64_t n = 0;
    for (int b = 0; b < kMaxPagedBuffers; ++b) n += addressed_mismatches[b] + untouched_changed[b];
    return n;
  }
  bool exact() const { return error.ok() && differing() == 0; }
};

// The buffer count and names of a store: FP8 two caches (four with per-token-head scales), NVFP4 one.
int paged_buffers(const kernels::PagedKvLayout& l, bool token_head_scales = false);
const char* paged_buffer_name(const kernels::PagedKvLayout& l, int buffer);

// What a comparison covers: everything, by default; the comparator's mutants narrow it
// (proptests/comparator_properties.cpp): a buffer not compared (a role ignored), the last bytes of
// each buffer left out (an off-by-one bound), the bytes outside the slots not checked.
struct PagedScope {
  bool buffers[kMaxPagedBuffers] = {true, true, true, true};
  std::int64_t bytes_short = 0;
  bool untouched = true;
};
PagedComparison compare_paged(const PagedPort& p, std::size_t keep, const PagedScope& scope = {});
// The buffers compare_paged expects (out[0..paged_buffers)): the model run on p.before.
Status paged_store_model(const PagedPort& p, std::vector<std::uint8_t>* out);
std::string describe_paged(const PagedPort& p, const std::string& recipe_name, const PagedComparison& c);

// `kvq identify` for a paged store: every named recipe of the page's element (E4M3 caches, or
// NVFP4 pages; per-token-head stores the per-tensor E4M3 recipes) that the store accepts, in each
// layout the same bytes may hold, run on the port's inputs; those that reproduce every byte
// of every cache, and the nearest others (fewest differing bytes).
struct PagedCandidate {
  std::string recipe;
  PagedComparison comparison;
};
using PagedIdentification = LayoutIdentification<PagedCandidate>;
PagedIdentification identify_paged(const PagedPort& p, std::size_t nearest);

}  // namespace kvq::ports
