// The comparator tested like the kernels (docs/ports.md "The comparator's own tests"): a correct
// dump (kvq's twin output for random inputs) with k differences planted at random and at the edges
// (first and last row, block, element, scale, buffer byte, slot, page; a slot no token addresses;
// every role) must be reported as exactly k differences, each at its place. The comparator's
// mutants (a skipped edge, a role ignored, an off-by-one range) run the same properties with a
// narrowed scope (oracle/verify.hpp CompareScope, oracle/verify_paged.hpp PagedScope) and must
// each be caught (suite mutants).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "formats/recipe_names.hpp"
#include "kernels/paged_store.hpp"
#include "oracle/verify.hpp"
#include "oracle/verify_mla.hpp"
#include "oracle/verify_paged.hpp"
#include "oracle/verify_rope.hpp"
#include "oracle/verify_workspace.hpp"
#include "proptests/harness/mix32.hpp"
#include "proptests/harness/rapidcheck_bridge.hpp"

namespace kvq::props {
namespace {

using kernels::KvOrder;
using kernels::KvSide;
using kernels::PagedFormat;
using kernels::ScaleSwizzle;

// Random finite values m * 2^k with some zeros, as FP32 bytes.
std::vector<std::uint8_t> random_values(std::int64_t count, std::uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint32_t h = mix32(seed + i);
    v[i] = h % 11 == 0 ? 0.0f : std::ldexp(static_cast<float>(static_cast<int>(h % 4001) - 2000), static_cast<int>((h >> 12) % 9) - 12);
  }
  std::vector<std::uint8_t> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

// k distinct targets: the edges first (in a random order), then random ones.
template <typename T>
std::vector<T> pick(std::vector<T> edges, const std::function<T(std::uint32_t)>& random, int k, std::uint32_t seed) {
  for (std::size_t i = edges.size(); i > 1; --i) std::swap(edges[i - 1], edges[mix32(seed + i) % i]);
  std::set<T> chosen;
  std::vector<T> out;
  for (const T& e : edges)
    if (static_cast<int>(out.size()) < k && chosen.insert(e).second) out.push_back(e);
  for (std::uint32_t i = 0; static_cast<int>(out.size()) < k && i < 64 * static_cast<std::uint32_t>(k); ++i) {
    const T t = random(mix32(~seed + i));
    if (chosen.insert(t).second) out.push_back(t);
  }
  return out;
}

// --- flat recipes ----------------------------------------------------------------------------

struct FlatTarget {
  bool scale = false;
  std::int64_t row = 0, index = 0;  // index: the column (a code) or the block (a scale)
  auto operator<=>(const FlatTarget&) const = default;
};

Outcome flat_planted(const RunContext& ctx, const Recipe& recipe, const ports::CompareScope& scope) {
  return check_random(ctx, [&] {
    const bool blocked = recipe.scale != BlockScale::tensor_only;
    const int n = blocked ? recipe.block : 16;
    const std::int64_t rows = *rc::gen::inRange(1, 6), cols = n * *rc::gen::inRange(1, 5);
    const int k = *rc::gen::inRange(1, 7);
    const auto seed = *rc::gen::arbitrary<std::uint32_t>();
    ports::PortData d;
    d.rows = rows, d.cols = cols, d.input = kernels::DType::fp32;
    d.x = random_values(rows * cols, seed);
    const kernels::QuantizeShape s{recipe, rows, cols};
    std::vector<std::uint8_t> port_codes(static_cast<std::size_t>(s.code_bytes())),
        port_scales(static_cast<std::size_t>(s.scale_bytes()));
    d.has_scales = blocked;
    const float g = tensor_scale(recipe, d.amax());
    RC_ASSERT(kernels::quantize_cpu(s, d.input, d.x.data(), g, port_codes.data(), port_scales.data()).ok());
    const std::int64_t blocks = blocked ? cols / n : 0;
    std::vector<FlatTarget> edges = {{false, 0, 0}, {false, rows - 1, cols - 1}, {false, 0, cols - 1}, {false, rows - 1, 0},
                                     {false, rows - 1, cols - n}};
    if (blocked) edges.insert(edges.end(), {{true, 0, 0}, {true, rows - 1, blocks - 1}, {true, 0, blocks - 1}});
    const auto targets = pick<FlatTarget>(edges, [&](std::uint32_t h) {
      const bool sc = blocked && h % 4 == 0;
      return FlatTarget{sc, static_cast<std::int64_t>((h >> 4) % rows), static_cast<std::int64_t>((h >> 12) % (sc ? blocks : cols))};
    }, k, seed);
    std::int64_t codes = 0, scales = 0;
    for (const FlatTarget& t : targets) {
      if (t.scale) {
        port_scales[static_cast<std::size_t>(t.row * blocks + t.index)] ^= 0x01;
        ++scales;
      } else {
        const std::int64_t e = t.row * cols + t.index;
        if (s.packed()) port_codes[static_cast<std::size_t>(e / 2)] ^= static_cast<std::uint8_t>(e & 1 ? 0x10 : 0x01);
        else port_codes[static_cast<std::size_t>(e)] ^= 0x01;
        ++codes;
      }
    }
    d.codes = std::move(port_codes), d.scales = std::move(port_scales);
    const ports::Interpretation how{recipe, ports::NibbleOrder::low_first, ports::ScaleLayout::row_major};
    const ports::Comparison c = ports::compare(d, how, 1000, false, scope);
    RC_TAG(codes && scales ? "codes and scales" : (codes ? "codes" : "scales"));
    RC_ASSERT(c.code_mismatches == codes);
    RC_ASSERT(c.scale_mismatches == scales);
    for (const FlatTarget& t : targets) {
      const bool found = t.scale ? std::any_of(c.first_scales.begin(), c.first_scales.end(),
                                               [&](const auto& x) { return x.row == t.row && x.block == t.index; })
                                 : std::any_of(c.first_codes.begin(), c.first_codes.end(),
                                               [&](const auto& x) { return x.row == t.row && x.col == t.index; });
      RC_ASSERT(found);
    }
  });
}

// --- paged stores ----------------------------------------------------------------------------

struct PagedTarget {
  int buffer = 0;
  std::int64_t offset = 0;
  auto operator<=>(const PagedTarget&) const = default;
};
struct Addressed {  // who owns an addressed byte, from the layout's forward offsets
  std::int64_t token = 0, head = 0, index = 0;
  bool scale = false;
};

// token_head: vLLM's per-token-head FP8 store (the scale caches are buffers 2 and 3), its correct
// dump written by the verifier's model (ports::paged_store_model) since kvq has no such kernel.
Outcome paged_planted(const RunContext& ctx, PagedFormat format, const ports::PagedScope& scope, bool token_head = false) {
  return check_random(ctx, [&] {
    ports::PagedPort p;
    kernels::PagedStoreShape& s = p.shape;
    kernels::PagedKvLayout& L = s.layout;
    L.format = format;
    p.token_head_scales = token_head;
    s.recipe = recipe_from_name(token_head ? "fp8-e4m3-token-head-triton" : format == PagedFormat::fp8 ? "fp8-e4m3-tensor" : "nvfp4")->recipe;
    L.order = *rc::gen::element(KvOrder::nhd, KvOrder::hnd);
    L.swizzle = format == PagedFormat::fp8 ? ScaleSwizzle::none
                                           : *rc::gen::element(ScaleSwizzle::none, ScaleSwizzle::v_only, ScaleSwizzle::k_and_v);
    L.block_size = L.swizzle == ScaleSwizzle::none ? *rc::gen::inRange(1, 6) : 4 * *rc::gen::inRange(1, 3);
    L.heads = *rc::gen::inRange(1, 4);
    L.head_dim = 16 * *rc::gen::inRange(1, 3);
    L.num_blocks = *rc::gen::inRange(1, 4);
    s.input = kernels::DType::fp32;
    s.tokens = *rc::gen::inRange<std::int64_t>(1, L.slots() + 1);
    const int k = *rc::gen::inRange(1, 7);
    const auto seed = *rc::gen::arbitrary<std::uint32_t>();
    std::vector<std::int64_t> free_slots(static_cast<std::size_t>(L.slots()));
    std::iota(free_slots.begin(), free_slots.end(), 0);
    for (std::size_t i = free_slots.size(); i > 1; --i) std::swap(free_slots[i - 1], free_slots[mix32(seed + i) % i]);
    for (std::int64_t t = 0; t < s.tokens; ++t)  // about one token in four is padding
      p.slot_mapping.push_back(mix32(seed ^ (t + 77)) % 4 == 0 ? -1 : free_slots[static_cast<std::size_t>(t)]);
    const std::int64_t count = s.tokens * L.heads * L.head_dim;
    p.key = random_values(count, seed);
    p.value = random_values(count, ~seed);
    // random_values' largest magnitude, 2000 * 2^-4, as the amax that sets the scales
    p.scales.k[0] = tensor_scale(s.recipe, 125.0f), p.scales.v[0] = p.scales.k[0] * 0.5f;
    const int buffers = ports::paged_buffers(L, token_head);
    const auto buffer_bytes = [&](int b) { return b < 2 ? L.buffer_bytes() : L.slots() * L.heads * 4; };
    for (int b = 0; b < buffers; ++b) {
      p.before[b].assign(static_cast<std::size_t>(buffer_bytes(b)), 0xA5);
      p.after[b] = p.before[b];
    }
    if (token_head) {
      RC_ASSERT(ports::paged_store_model(p, p.after).ok());
    } else {
      const kernels::PagedStoreArgs a{p.key.data(), p.value.data(), p.slot_mapping.data(), p.after[0].data(),
                                      buffers == 2 ? p.after[1].data() : nullptr};
      RC_ASSERT(kernels::paged_store_cpu(s, p.scales, a).ok());
    }
    // The addressed bytes, from the layout's forward offsets (kernels/paged_layout.hpp).
    std::map<PagedTarget, Addressed> owner;
    for (std::int64_t t = 0; t < s.tokens; ++t) {
      const std::int64_t slot = p.slot_mapping[static_cast<std::size_t>(t)];
      if (slot < 0) continue;
      for (const KvSide side : {KvSide::k, KvSide::v}) {
        const int b = format == PagedFormat::fp8 ? static_cast<int>(side) : 0;
        for (std::int64_t h = 0; h < L.heads; ++h) {
          for (std::int64_t i = 0; i < L.data_row_bytes(); ++i)
            owner[{b, L.data_offset(side, slot / L.block_size, slot % L.block_size, h, i)}] = {t, h, i, false};
          for (std::int64_t i = 0; format == PagedFormat::nvfp4 && i < L.scales_per_head(); ++i)
            owner[{b, L.scale_offset(side, slot / L.block_size, slot % L.block_size, h, i)}] = {t, h, i, true};
          for (std::int64_t i = 0; token_head && i < 4; ++i)  // the FP32 scale of (slot, head) in [blocks, block_size, heads]
            owner[{2 + b, (slot * L.heads + h) * 4 + i}] = {t, h, i, true};
        }
      }
    }
    std::vector<PagedTarget> edges;
    if (!owner.empty()) edges.insert(edges.end(), {owner.begin()->first, owner.rbegin()->first});
    for (int b = 0; b < buffers; ++b) {  // each cache's first and last bytes, and those that no token addresses
      const std::int64_t last = buffer_bytes(b) - 1;
      edges.insert(edges.end(), {{b, 0}, {b, last}});
      std::int64_t lo = 0, hi = last;
      while (lo <= last && owner.count({b, lo})) ++lo;
      while (hi >= 0 && owner.count({b, hi})) --hi;
      if (lo <= hi) edges.insert(edges.end(), {{b, lo}, {b, hi}});
    }
    const auto targets = pick<PagedTarget>(edges, [&](std::uint32_t h) {
      const int b = static_cast<int>(h % static_cast<std::uint32_t>(buffers));
      return PagedTarget{b, static_cast<std::int64_t>((h >> 2) % static_cast<std::uint32_t>(buffer_bytes(b)))};
    }, k, seed);
    std::int64_t addressed[ports::kMaxPagedBuffers] = {}, untouched[ports::kMaxPagedBuffers] = {};
    for (const PagedTarget& t : targets) {
      p.after[t.buffer][static_cast<std::size_t>(t.offset)] ^= 0x01;
      ++(owner.count(t) ? addressed : untouched)[t.buffer];
    }
    const ports::PagedComparison c = ports::compare_paged(p, 1000, scope);
    RC_TAG(untouched[0] + untouched[1] + untouched[2] + untouched[3] ? "some outside the slots" : "all in the slots");
    RC_ASSERT(c.error.ok());
    for (int b = 0; b < ports::kMaxPagedBuffers; ++b) {
      RC_ASSERT(c.addressed_mismatches[b] == addressed[b]);
      RC_ASSERT(c.untouched_changed[b] == untouched[b]);
    }
    for (const PagedTarget& t : targets) {
      const auto it = std::find_if(c.first.begin(), c.first.end(),
                                   [&](const ports::PagedDifference& d) { return d.buffer == t.buffer && d.offset == t.offset; });
      RC_ASSERT(it != c.first.end());
      const auto o = owner.find(t);
      RC_ASSERT(it->token == (o == owner.end() ? -1 : o->second.token));
      if (o != owner.end()) {
        RC_ASSERT(it->head == o->second.head);
        RC_ASSERT(it->index == o->second.index);
        RC_ASSERT(it->scale == o->second.scale);
      }
    }
  });
}

// --- RoPE + FP8 + paged append ---------------------------------------------------------------

// A small rope-append call (one request, a padding token, spare pages no token reaches), its
// outputs written by kvq's twin (rope_append_cpu) over poisoned buffers; the bytes the twin writes
// found by running it over 0x00 and over 0xFF buffers (a written byte cannot equal both).
Outcome rope_planted(const RunContext& ctx, const ports::RopeScope& scope) {
  return check_random(ctx, [&] {
    ports::RopePort p;
    p.kind = ports::RopeKind::append;
    kernels::RopeShape& s = p.shape;
    s.attention = *rc::gen::element(kernels::Attention::mha, kernels::Attention::mla);
    s.input = kernels::DType::fp32;
    s.style = *rc::gen::element(kernels::RopeStyle::neox, kernels::RopeStyle::gptj);
    s.layout = *rc::gen::element(kernels::KvLayout::nhd, kernels::KvLayout::hnd);
    s.tokens = *rc::gen::inRange(1, 7);
    s.batch = 1;
    s.q_heads = *rc::gen::inRange(1, 3);
    s.kv_heads = s.mla() ? 1 : *rc::gen::inRange(1, 3);
    s.rope_dim = 2 * *rc::gen::inRange(1, 5);
    s.head_dim = s.rope_dim + 4 * *rc::gen::inRange(s.mla() ? 1 : 0, 3);  // MLA always has its latent (nope) part
    s.max_pos = *rc::gen::inRange(1, 5);
    s.page_size = *rc::gen::inRange(1, 5);
    const int k = *rc::gen::inRange(1, 7);
    const auto seed = *rc::gen::arbitrary<std::uint32_t>();
    const std::int32_t prefix = static_cast<std::int32_t>(mix32(seed) % 3);
    const std::int64_t needed = (prefix + s.tokens + s.page_size - 1) / s.page_size;
    s.num_pages = needed + 2;  // two spare pages
    s.num_page_indices = needed;
    std::vector<std::int32_t> pages(static_cast<std::size_t>(s.num_pages));
    std::iota(pages.begin(), pages.end(), 0);
    for (std::size_t i = pages.size(); i > 1; --i) std::swap(pages[i - 1], pages[mix32(seed + 3 * i) % i]);
    p.kv_indptr = {0, static_cast<std::int32_t>(needed)};
    p.kv_indices.assign(pages.begin(), pages.begin() + needed);
    for (std::int64_t i = 0; i < s.tokens; ++i) {
      p.batch_indices.push_back(s.tokens > 1 && i == 1 ? -1 : 0);  // token 1 is padding
      p.positions.push_back(prefix + static_cast<std::int32_t>(i));
      p.pos_ids.push_back(static_cast<std::int32_t>(mix32(seed ^ (i + 9)) % s.max_pos));
    }
    const auto values = [&](std::int64_t n, std::uint32_t salt) { return random_values(n, seed ^ salt); };
    const std::int64_t R = s.rope_dim, N = s.nope_dim(), T = s.tokens;
    p.q_rope = values(T * s.q_heads * R, 1), p.q_nope = values(T * s.q_heads * N, 2);
    p.k_rope = values(T * s.kv_heads * R, 3), p.k_nope = values(T * s.kv_heads * N, 4);
    if (!s.mla()) p.v = values(T * s.kv_heads * s.head_dim, 5);
    p.cos_sin_cache.resize(static_cast<std::size_t>(s.max_pos * R));
    for (std::size_t i = 0; i < p.cos_sin_cache.size(); ++i)
      p.cos_sin_cache[i] = static_cast<float>(static_cast<int>(mix32(seed + 101 * i) % 2001) - 1000) / 1024.0f;
    p.quant_scale_q = 1.5f, p.quant_scale_kv = 0.75f;
    const kernels::RopeInputs in{p.q_rope.data(), p.q_nope.data(), p.k_rope.data(), p.k_nope.data(),
                                 s.mla() ? nullptr : p.v.data(), p.cos_sin_cache.data(), p.pos_ids.data(),
                                 p.quant_scale_q, p.quant_scale_kv};
    const kernels::PageTable table{p.kv_indptr.data(), p.kv_indices.data(), p.batch_indices.data(), p.positions.data()};
    std::vector<std::uint8_t> fills[2][ports::kRopeBuffers];
    for (int f = 0; f < 3; ++f) {  // 0xA5 (the dump), 0x00, 0xFF
      const std::uint8_t byte = f == 0 ? 0xA5 : (f == 1 ? 0x00 : 0xFF);
      std::vector<std::uint8_t>* out = f == 0 ? p.after : fills[f - 1];
      for (int b = 0; b < ports::kRopeBuffers; ++b)
        out[b].assign(static_cast<std::size_t>(ports::rope_buffer_bytes(p, b)), byte);
      const kernels::QOutputs q{out[0].data(), out[1].data()};
      const kernels::KvBuffers kv = s.mla() ? kernels::KvBuffers{nullptr, nullptr, out[2].data(), out[3].data()}
                                            : kernels::KvBuffers{out[2].data(), out[3].data(), nullptr, nullptr};
      const kvq::Status e = kernels::rope_append_cpu(s, in, q, kv, table);
      if (!e.ok()) RC_FAIL(e.message());
    }
    for (int b = 0; b < ports::kRopeBuffers; ++b) p.before[b].assign(p.after[b].size(), 0xA5);
    const auto written = [&](const PagedTarget& t) {
      return fills[0][t.buffer][t.offset] != 0x00 || fills[1][t.buffer][t.offset] != 0xFF;
    };
    std::vector<PagedTarget> edges;
    for (int b = 0; b < ports::kRopeBuffers; ++b) {
      const std::int64_t n = static_cast<std::int64_t>(p.after[b].size());
      if (n == 0) continue;
      edges.insert(edges.end(), {{b, 0}, {b, n - 1}});
      for (std::int64_t off = 0; off < n; ++off)  // the first byte no element writes (padding Q, spare pages)
        if (!written({b, off})) {
          edges.push_back({b, off});
          break;
        }
    }
    std::vector<int> nonempty;
    for (int b = 0; b < ports::kRopeBuffers; ++b)
      if (!p.after[b].empty()) nonempty.push_back(b);
    const auto targets = pick<PagedTarget>(edges, [&](std::uint32_t h) {
      const int b = nonempty[h % nonempty.size()];
      return PagedTarget{b, static_cast<std::int64_t>((h >> 3) % p.after[b].size())};
    }, k, seed);
    std::int64_t addressed[ports::kRopeBuffers] = {}, untouched[ports::kRopeBuffers] = {};
    for (const PagedTarget& t : targets) {
      p.after[t.buffer][static_cast<std::size_t>(t.offset)] ^= 0x01;
      ++(written(t) ? addressed : untouched)[t.buffer];
    }
    ports::RopeArithmetic a;
    a.style = s.style;
    const ports::RopeComparison c = ports::compare_rope(p, a, 1000, scope);
    RC_TAG(s.mla() ? "MLA" : "MHA");
    RC_ASSERT(c.error.ok());
    for (int b = 0; b < ports::kRopeBuffers; ++b) {
      RC_ASSERT(c.addressed_mismatches[b] == addressed[b]);
      RC_ASSERT(c.untouched_changed[b] == untouched[b]);
    }
    for (const PagedTarget& t : targets)
      RC_ASSERT(std::any_of(c.first.begin(), c.first.end(), [&](const ports::RopeDifference& d) {
        return d.buffer == t.buffer && d.offset == t.offset && d.addressed == written(t);
      }));
  });
}

// --- MLA caches ----------------------------------------------------------------------------------

// A random MLA cache write (656 record or MODEL1, a few blocks, padding tokens) or 576 -> 656
// requantize (k_scale folded or dropped), the cache written by kvq's twin over 0xA5; the bytes it
// writes found by running it over 0x00 and 0xFF.
Outcome mla_planted(const RunContext& ctx) {
  return check_random(ctx, [&] {
    ports::MlaPort p;
    p.shape.layout = *rc::gen::element(kernels::MlaLayoutId::fp8_nope_block_scale_bf16_rope, kernels::MlaLayoutId::model1_fp8_sparse);
    p.shape.block_size = *rc::gen::inRange(1, 5);
    p.shape.num_blocks = *rc::gen::inRange(1, 4);
    // The layout's own tile rule, or FlashMLA's power-of-two rule.
    const bool pow2 = *rc::gen::arbitrary<bool>();
    RC_ASSERT(ports::mla_tile_rule(p.shape.desc(), pow2 ? "mla-fp8-tile128" : "", &p.tile, &p.tile_name).ok());
    if (p.shape.layout == kernels::MlaLayoutId::fp8_nope_block_scale_bf16_rope && *rc::gen::inRange(0, 3) == 0) {
      p.call = ports::MlaCall::requantize;
      p.k_scale = *rc::gen::element(1.0f, 2.0f, 0.375f, 1e-3f);
      p.k_scale_use = *rc::gen::element(kernels::KScale::fold, kernels::KScale::drop);
      const auto src_seed = *rc::gen::arbitrary<std::uint32_t>();
      const std::int64_t src_bytes = kernels::MlaCacheShape{kernels::MlaLayoutId::fp8_nope_fp8_rope, p.shape.num_blocks, p.shape.block_size}.bytes();
      for (std::int64_t i = 0; i < src_bytes; ++i) p.src.push_back(static_cast<std::uint8_t>(mix32(src_seed + i)));
    }
    const std::int64_t tokens = *rc::gen::inRange<std::int64_t>(1, p.shape.slots() + 1);
    const int k = *rc::gen::inRange(1, 7);
    const auto seed = *rc::gen::arbitrary<std::uint32_t>();
    std::vector<std::int64_t> free_slots(static_cast<std::size_t>(p.shape.slots()));
    std::iota(free_slots.begin(), free_slots.end(), 0);
    for (std::size_t i = free_slots.size(); i > 1; --i) std::swap(free_slots[i - 1], free_slots[mix32(seed + i) % i]);
    for (std::int64_t t = 0; t < tokens; ++t)
      p.slot_mapping.push_back(mix32(seed ^ (t + 5)) % 4 == 0 ? -1 : free_slots[static_cast<std::size_t>(t)]);
    if (p.call == ports::MlaCall::requantize) p.slot_mapping.clear();  // a conversion of every slot
    const int dims = p.shape.desc().dims();
    for (std::int64_t i = 0; i < tokens * dims; ++i)  // BF16 values of assorted magnitudes, some zeros
      p.k.push_back(mix32(seed + 7 * i) % 9 == 0 ? 0 : static_cast<std::uint16_t>(0x3000 + mix32(seed + 7 * i) % 0x1800));
    std::vector<std::uint8_t> zeros, ones;
    p.after.assign(static_cast<std::size_t>(p.shape.bytes()), 0xA5);
    p.before = p.after;
    zeros.assign(p.after.size(), 0x00);
    ones.assign(p.after.size(), 0xFF);
    for (std::vector<std::uint8_t>* out : {&p.after, &zeros, &ones})
      RC_ASSERT((p.call == ports::MlaCall::requantize
                     ? kernels::mla_requantize_576_to_656_cpu(p.shape.num_blocks, p.shape.block_size, p.src.data(), p.k_scale,
                                                              p.k_scale_use, out->data())
                     : kernels::mla_quantize_cpu(p.shape, p.tile, p.k.data(), p.slot_mapping.data(), tokens, out->data()))
                    .ok());
    const std::int64_t last = static_cast<std::int64_t>(p.after.size()) - 1;
    const auto written = [&](std::int64_t off) { return zeros[off] != 0x00 || ones[off] != 0xFF; };
    std::vector<std::int64_t> edges = {0, last};
    for (std::int64_t off = 0; off <= last; ++off)
      if (!written(off)) {
        edges.push_back(off);  // the first byte no token writes (another slot, padding, the tail's pad)
        break;
      }
    const auto targets = pick<std::int64_t>(edges, [&](std::uint32_t h) { return static_cast<std::int64_t>(h % (last + 1)); }, k, seed);
    std::int64_t addressed = 0, untouched = 0;
    for (const std::int64_t t : targets) {
      p.after[static_cast<std::size_t>(t)] ^= 0x01;
      ++(written(t) ? addressed : untouched);
    }
    const ports::MlaComparison c = ports::compare_mla(p, 1000);
    RC_ASSERT(c.error.ok());
    RC_ASSERT(c.addressed_mismatches == addressed);
    RC_ASSERT(c.untouched_changed == untouched);
    for (const std::int64_t t : targets)
      RC_ASSERT(std::any_of(c.first.begin(), c.first.end(), [&](const ports::MlaDifference& d) {
        return d.offset == t && d.addressed == written(t) && (d.token >= 0) == written(t) &&
               (p.call != ports::MlaCall::requantize || d.token == d.slot);
      }));
  });
}

// A random MLA dequantize call (kvq verify mla-dequant): a cache of random bytes with finite tile
// scales, rows gathered from random slots (some twice), the output written by kvq's twin
// (mla_dequantize_cpu, rows gathered), a random output dtype; k differing values planted (the
// first and last value, the first and last rope value, at random), each reported at its row, slot
// and dim.
Outcome mla_dequant_planted(const RunContext& ctx) {
  return check_random(ctx, [&] {
    ports::MlaPort p;
    p.call = ports::MlaCall::dequantize;
    p.shape.layout = *rc::gen::element(kernels::MlaLayoutId::fp8_nope_block_scale_bf16_rope, kernels::MlaLayoutId::model1_fp8_sparse,
                                       kernels::MlaLayoutId::fp8_nope_fp8_rope);
    p.shape.block_size = *rc::gen::inRange(1, 4);
    p.shape.num_blocks = *rc::gen::inRange(1, 3);
    p.output = *rc::gen::element(kernels::DType::bf16, kernels::DType::fp16, kernels::DType::fp32);
    p.k_scale = *rc::gen::element(1.0f, 0.375f, 3e-3f);
    const kernels::MlaLayout l = p.shape.desc();
    const auto seed = *rc::gen::arbitrary<std::uint32_t>();
    for (std::int64_t i = 0; i < p.shape.bytes(); ++i) p.src.push_back(static_cast<std::uint8_t>(mix32(seed + i) & 0x77));
    if (l.tile != 0)  // finite tile scales: FP32 0x3c..., or E8M0 bytes 0x70..0x7f
      for (std::int64_t s = 0; s < p.shape.slots(); ++s)
        for (int t = 0; t < l.tiles(); ++t) {
          const int bytes = format_of(l.segment(kernels::MlaPart::tile_scales).format).bits() / 8;
          std::uint8_t* at = p.src.data() + p.shape.part(s, kernels::MlaPart::tile_scales) + t * bytes;
          if (bytes == 4) at[3] = 0x3c, at[2] &= 0x7f;
          else at[0] = static_cast<std::uint8_t>(0x70 | (at[0] & 0x0f));
        }
    const std::int64_t rows = *rc::gen::inRange<std::int64_t>(1, p.shape.slots() + 2);
    for (std::int64_t r = 0; r < rows; ++r) p.slot_mapping.push_back(static_cast<std::int64_t>(mix32(seed ^ (r + 3)) % p.shape.slots()));
    const int w = kernels::bytes_of(p.output), dims = l.dims();
    std::vector<std::uint8_t> all(static_cast<std::size_t>(p.shape.slots() * dims * w));
    RC_ASSERT(kernels::mla_dequantize_cpu(p.shape, p.src.data(), p.k_scale, p.output, all.data()).ok());
    for (const std::int64_t s : p.slot_mapping)
      p.after.insert(p.after.end(), all.begin() + s * dims * w, all.begin() + (s + 1) * dims * w);
    const std::int64_t last = rows * dims - 1;
    const std::vector<std::int64_t> edges = {0, last, l.nope_dims(), (rows - 1) * dims + l.nope_dims()};
    const int k = *rc::gen::inRange(1, 7);
    const auto targets = pick<std::int64_t>(edges, [&](std::uint32_t h) { return static_cast<std::int64_t>(h % (last + 1)); }, k, seed);
    for (const std::int64_t t : targets) p.after[static_cast<std::size_t>(t * w + (w == 4 ? 2 : 0))] ^= 0x01;  // a mantissa bit
    const ports::MlaComparison c = ports::compare_mla(p, 1000);
    RC_ASSERT(c.error.ok());
    RC_ASSERT(c.addressed_mismatches == static_cast<std::int64_t>(targets.size()));
    RC_ASSERT(c.untouched_changed == 0);
    for (const std::int64_t t : targets)
      RC_ASSERT(std::any_of(c.first.begin(), c.first.end(), [&](const ports::MlaDifference& d) {
        const int dim = static_cast<int>(t % dims);
        return d.offset == t && d.token == t / dims && d.slot == p.slot_mapping[static_cast<std::size_t>(t / dims)] &&
               d.part == (dim < l.nope_dims() ? kernels::MlaPart::nope : kernels::MlaPart::rope) &&
               d.index == (dim < l.nope_dims() ? dim : dim - l.nope_dims());
      }));
  });
}

// --- workspaces --------------------------------------------------------------------------------

// A random NVFP4 page -> E4M3 workspace call (a few requests, shared pages, a random rounding),
// the workspaces (with spare rows past cu_seq_lens[batch]) written by kvq's twin over 0xA5.
Outcome workspace_planted(const RunContext& ctx) {
  return check_random(ctx, [&] {
    ports::WorkspacePort p;
    kernels::WorkspaceBatch& w = p.batch;
    w.recipe = recipe_from_name("nvfp4")->recipe;
    w.pages = {*rc::gen::inRange<std::int64_t>(1, 4), *rc::gen::element<std::int64_t>(1, 2, 4), *rc::gen::inRange<std::int64_t>(1, 3),
               16 * *rc::gen::inRange<std::int64_t>(1, 3)};
    w.batch = *rc::gen::inRange(1, 4);
    w.max_blocks_per_seq = *rc::gen::inRange(1, 3);
    w.rounding = {*rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>(), *rc::gen::arbitrary<bool>()};
    const auto seed = *rc::gen::arbitrary<std::uint32_t>();
    const int k = *rc::gen::inRange(1, 7);
    for (std::int64_t i = 0; i < w.pages.cache_bytes(); ++i) p.cache.push_back(static_cast<std::uint8_t>(mix32(seed + i)));
    p.cu_seq_lens = {0};
    for (std::int64_t b = 0; b < w.batch; ++b)
      p.cu_seq_lens.push_back(p.cu_seq_lens.back() +
                              static_cast<std::int32_t>(mix32(seed ^ (b + 11)) % (w.max_blocks_per_seq * w.pages.block_size + 1)));
    for (std::int64_t i = 0; i < w.batch * w.max_blocks_per_seq; ++i)
      p.block_tables.push_back(static_cast<std::int32_t>(mix32(~seed + i) % w.pages.num_blocks));
    w.workspace_tokens = p.cu_seq_lens.back();
    p.factor[0] = *rc::gen::element(1.0f, 0x1.555556p-3f, 3.5f);
    p.factor[1] = *rc::gen::element(1.0f, 0.25f, 7.0f);
    const std::int64_t row = w.pages.heads * w.pages.head_dim, rows = w.workspace_tokens + *rc::gen::inRange(1, 3);
    std::vector<std::uint8_t> zeros[2], ones[2];
    for (int side = 0; side < 2; ++side) {
      p.after[side].assign(static_cast<std::size_t>(rows * row), 0xA5);
      p.before[side] = p.after[side];
      zeros[side].assign(p.after[side].size(), 0x00);
      ones[side].assign(p.after[side].size(), 0xFF);
    }
    for (auto* out : {p.after, zeros, ones})
      RC_ASSERT(kernels::nvfp4_paged_to_workspace_cpu(w, p.cache.data(), p.block_tables.data(), p.cu_seq_lens.data(), p.factor[0],
                                                      p.factor[1], out[0].data(), out[1].data())
                    .ok());
    // Targets over both workspaces (side * size + offset): the first and last byte of each, the
    // first byte of the spare rows, and random ones.
    const std::int64_t size = rows * row, used = w.workspace_tokens * row;
    std::vector<std::int64_t> edges = {0, size - 1, size, 2 * size - 1, used, size + used};
    const auto targets = pick<std::int64_t>(edges, [&](std::uint32_t h) { return static_cast<std::int64_t>(h % (2 * size)); }, k, seed);
    std::int64_t addressed[2] = {}, untouched[2] = {};
    for (const std::int64_t t : targets) {
      const int side = static_cast<int>(t / size);
      p.after[side][static_cast<std::size_t>(t % size)] ^= 0x01;
      ++(t % size < used ? addressed[side] : untouched[side]);
    }
    const ports::WorkspaceComparison c = ports::compare_workspace(p, 1000);
    RC_ASSERT(c.error.ok());
    for (int side = 0; side < 2; ++side) {
      RC_ASSERT(c.addressed_mismatches[side] == addressed[side]);
      RC_ASSERT(c.untouched_changed[side] == untouched[side]);
    }
    for (const std::int64_t t : targets)
      RC_ASSERT(std::any_of(c.first.begin(), c.first.end(), [&](const ports::WorkspaceDifference& d) {
        const bool in_rows = t % size < used;
        return d.side == t / size && d.offset == t % size && d.addressed == in_rows && (d.request >= 0) == in_rows &&
               (!in_rows || d.row == t % size / row);
      }));
  });
}

// --- the comparator's mutants ----------------------------------------------------------------

struct ComparatorMutant {
  const char* name;
  const char* bug;
  std::function<Outcome(const RunContext&)> run;  // the planted-difference property under the mutant's scope
};

std::vector<ComparatorMutant> comparator_mutants() {
  const Recipe nvfp4 = recipe_from_name("nvfp4")->recipe;
  return {
      {"verify-last-block-skipped", "the comparison skips each row's last block (an off-by-one bound)",
       [nvfp4](const RunContext& ctx) { return flat_planted(ctx, nvfp4, {0, 1, true}); }},
      {"verify-last-row-skipped", "the comparison skips the last row",
       [nvfp4](const RunContext& ctx) { return flat_planted(ctx, nvfp4, {1, 0, true}); }},
      {"verify-block-scales-ignored", "the block scales are not compared (a role ignored)",
       [nvfp4](const RunContext& ctx) { return flat_planted(ctx, nvfp4, {0, 0, false}); }},
      {"verify-paged-value-cache-ignored", "the value cache is not compared (a role ignored)",
       [](const RunContext& ctx) { return paged_planted(ctx, PagedFormat::fp8, {{true, false, true, true}, 0, true}); }},
      {"verify-paged-scale-caches-ignored", "a per-token-head store's scale caches are not compared (roles ignored)",
       [](const RunContext& ctx) { return paged_planted(ctx, PagedFormat::fp8, {{true, true, false, false}, 0, true}, true); }},
      {"verify-paged-last-byte-skipped", "each cache's last byte is not compared (an off-by-one range)",
       [](const RunContext& ctx) { return paged_planted(ctx, PagedFormat::nvfp4, {{true, true, true, true}, 1, true}); }},
      {"verify-paged-outside-slots-ignored", "bytes outside the addressed slots are not checked",
       [](const RunContext& ctx) { return paged_planted(ctx, PagedFormat::fp8, {{true, true, true, true}, 0, false}); }},
      {"verify-rope-v-cache-ignored", "the V cache (MLA: the kpe cache) is not compared (a role ignored)",
       [](const RunContext& ctx) { return rope_planted(ctx, {{true, true, true, false}}); }},
  };
}

// Passes when the property fails under the mutant (as suite mutants reports the others).
Outcome caught(const ComparatorMutant& m, const RunContext& ctx) {
  const Outcome r = m.run(ctx);
  Outcome o;
  o.cases = r.cases;
  if (r.status == Status::failed) {
    o.detail = std::string(m.name) + " (" + m.bug + "): CAUGHT after " + std::to_string(r.cases) + " cases\n";
    o.classes.emplace_back("caught", static_cast<int>(r.cases));
    return o;
  }
  o.status = Status::failed;
  o.detail = std::string("NOT CAUGHT: ") + m.name + " (" + m.bug + "): " + name_of(r.status) + " after " +
             std::to_string(r.cases) + " cases\n";
  o.replay = replay_line(ctx);
  return o;
}

void register_comparator_properties() {
  for (const char* name : {"nvfp4", "mxfp4-floor", "nvint4", "mxfp8-e4m3-floor", "fp8-e4m3-tensor", "mla-fp8-tile128"}) {
    const Recipe r = recipe_from_name(name)->recipe;
    add_property("ports", std::string("verify/") + name + "/every-planted-difference-reported", Device::cpu,
                 [r](const RunContext& ctx) { return flat_planted(ctx, r, {}); });
  }
  add_property("ports", "verify-mla/every-planted-difference-reported", Device::cpu, mla_planted);
  add_property("ports", "verify-mla/dequantize/every-planted-difference-reported", Device::cpu, mla_dequant_planted);
  add_property("ports", "verify-workspace/every-planted-difference-reported", Device::cpu, workspace_planted);
  add_property("ports", "verify-rope/append/every-planted-difference-reported", Device::cpu,
               [](const RunContext& ctx) { return rope_planted(ctx, {}); });
  for (const PagedFormat f : {PagedFormat::fp8, PagedFormat::nvfp4})
    add_property("ports", std::string("verify-paged/") + (f == PagedFormat::fp8 ? "fp8" : "nvfp4") + "/every-planted-difference-reported",
                 Device::cpu, [f](const RunContext& ctx) { return paged_planted(ctx, f, {}); });
  add_property("ports", "verify-paged/fp8-token-head/every-planted-difference-reported", Device::cpu,
               [](const RunContext& ctx) { return paged_planted(ctx, PagedFormat::fp8, {}, true); });
  static const std::vector<ComparatorMutant> all = comparator_mutants();
  for (const ComparatorMutant& m : all)
    add_property("mutants", m.name, Device::cpu, [&m](const RunContext& ctx) { return caught(m, ctx); });
}
KVQ_REGISTER_PROPERTIES(register_comparator_properties);

}  // namespace
}  // namespace kvq::props
