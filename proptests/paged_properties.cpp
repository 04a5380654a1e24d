// The paged store (kernels/paged_store.hpp, docs/paged.md): the CPU twin against the recipe model
// placed by the layout formulas written out here (suite paged), the layout's offsets a bijection
// and its split views a partition, NHD/HND and swizzle variants the same values after the
// permutation, bad input an error that names the argument; the GPU kernel against the twin over
// the whole cache (suite gpu, paged/...).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "formats/recipe_names.hpp"
#include "kernels/cpu_rows.hpp"
#include "kernels/device_grid.hpp"
#include "kernels/paged_store.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/harness/mix32.hpp"
#include "proptests/harness/rapidcheck_bridge.hpp"
#include "proptests/layout_mutants.hpp"

namespace kvq::props {
namespace {

using kernels::DType;
using kernels::KvOrder;
using kernels::KvSide;
using kernels::token_stride;
using kernels::PagedFormat;
using kernels::PagedKvLayout;
using kernels::PagePart;
using kernels::ScaleSwizzle;

constexpr std::uint8_t kPoisonA = 0xA5, kPoisonB = 0x5A;


struct PagedProblem {
  kernels::PagedStoreShape shape;
  kernels::PagedScales scales;
  std::vector<std::uint8_t> key, value;  // raw input bytes, [T, heads, D]
  std::vector<std::int64_t> slots;
};

void showValue(const PagedProblem& p, std::ostream& os) {
  const PagedKvLayout& L = p.shape.layout;
  os << (L.format == PagedFormat::fp8 ? "FP8 " : "NVFP4 ") << kernels::name_of(L.order) << ", scale swizzle " << kernels::name_of(L.swizzle)
     << ", num_blocks " << L.num_blocks << ", block_size " << L.block_size << ", heads " << L.heads << ", D "
     << L.head_dim << ", T " << p.shape.tokens << ", strides " << p.shape.key_stride << "/" << p.shape.value_stride
     << ", " << kernels::name_of(p.shape.input)
     << (p.shape.per_head_scales ? ", per-head scales" : ", per-tensor scales") << "\nslot_mapping:";
  for (const auto s : p.slots) os << " " << s;
  os << "\nk scales:";
  for (std::int64_t h = 0; h < (p.shape.per_head_scales ? L.heads : 1); ++h) os << " " << hex_code(kFP32, bits_of(p.scales.k[h]));
  os << "\nv scales:";
  for (std::int64_t h = 0; h < (p.shape.per_head_scales ? L.heads : 1); ++h) os << " " << hex_code(kFP32, bits_of(p.scales.v[h]));
}

// KV-like values from one seed: per-channel magnitudes with a few large channels, zeros, E2M1
// and E4M3 grid points and their midpoints, subnormals, and rare NaN/inf.
std::vector<std::uint8_t> make_kv(DType t, std::int64_t count, std::int64_t head_dim, std::uint64_t seed) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(count) * kernels::bytes_of(t));
  kernels::for_ranges(count, count, [&](std::int64_t first, std::int64_t last) {  // each element from its index alone
    for (std::int64_t i = first; i < last; ++i) {
      const std::uint32_t h = mix32(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(i));
      const int channel_scale = (i % head_dim) % 11 == 3 ? 6 : 0;  // outlier channels
      float v;
      switch (h % 32) {
        case 0: v = 0.0f; break;
        case 1: v = (h >> 8) % 64 == 0 ? NAN : ((h >> 8) % 64 == 1 ? -INFINITY : 1.0f); break;
        case 2: v = std::ldexp(static_cast<float>((h >> 8) % 29) * 0.25f, static_cast<int>(h >> 20) % 9 - 4); break;
        case 3: v = float_from_bits(mix32(h) & 0x807fffffu); break;  // FP32 subnormal (0 in BF16/FP16 or tiny)
        default:
          v = std::ldexp(static_cast<float>(static_cast<int>(h >> 8 & 0xfff) - 2048), channel_scale - 11 + static_cast<int>(seed % 5));
      }
      kernels::store_value(t, out.data(), i, (h >> 5) & 1 ? -v : v);  // BF16/FP16: RNE, held to the oracle
    }
  });
  return out;
}

// A decode scale near the realistic one (amax / divisor), or any positive finite FP32.
rc::Gen<float> gen_scale(float realistic) {
  return rc::gen::weightedOneOf<float>({
      {6, rc::gen::map(rc::gen::inRange(-3, 4), [=](int k) { return std::ldexp(realistic, k); })},
      {2, rc::gen::map(rc::gen::arbitrary<std::uint32_t>(), [](std::uint32_t b) {
         return float_from_bits(0x30000000u + b % 0x1e000000u);  // 2^-31 .. 2^29, any mantissa
       })},
      {1, rc::gen::element(1.0f, 0x1p-126f, 0x1p-149f, kFp32Max)}});
}

struct Limits {
  int max_heads, max_tokens, max_blocks;
  // Only geometries the device's staged NVFP4 loop takes (kernels/paged_store_kernel.cuh:
  // staged_loads): 16-bit input, token strides of whole 16-byte pieces, heads * head_dim / 16 a
  // multiple of 32; max_heads is then ignored.
  bool staged = false;
};

rc::Gen<PagedProblem> gen_problem(Recipe recipe, PagedFormat format, Limits lim) {
  return rc::gen::exec([=] {
    PagedProblem p;
    kernels::PagedStoreShape& s = p.shape;
    PagedKvLayout& L = s.layout;
    s.recipe = recipe;
    L.format = format;
    L.order = *rc::gen::element(KvOrder::nhd, KvOrder::hnd);
    L.swizzle = format == PagedFormat::fp8
                    ? ScaleSwizzle::none
                    : *rc::gen::element(ScaleSwizzle::none, ScaleSwizzle::v_only, ScaleSwizzle::k_and_v);
    L.block_size = L.swizzle == ScaleSwizzle::none ? *rc::gen::element<std::int64_t>(1, 2, 3, 4, 7, 8, 16, 32, 64, 128, 256)
                                                   : *rc::gen::element<std::int64_t>(4, 8, 12, 16, 32, 64, 128, 256);
    L.head_dim = *rc::gen::element<std::int64_t>(64, 128, 256);
    const std::int64_t heads_step = lim.staged ? 32 / (L.head_dim / 16) : 1;  // staged: 32 chunks a token and up
    L.heads = heads_step * *rc::gen::inRange<std::int64_t>(1, (lim.staged ? 16 / heads_step : lim.max_heads) + 1);
    L.num_blocks = *rc::gen::inRange(1, lim.max_blocks + 1);
    s.input = lim.staged ? *rc::gen::element(DType::bf16, DType::fp16) : *rc::gen::element(DType::bf16, DType::fp16, DType::fp32);
    s.per_head_scales = *rc::gen::arbitrary<bool>();
    s.tokens = *rc::gen::inRange(0, lim.max_tokens + 1);
    const std::int64_t row = L.heads * L.head_dim;  // token strides: contiguous, a qkv view, unaligned
    s.key_stride = lim.staged ? *rc::gen::element<std::int64_t>(0, row, 3 * row)
                              : *rc::gen::element<std::int64_t>(0, row, 3 * row, row + 1);
    s.value_stride = lim.staged ? *rc::gen::element<std::int64_t>(0, row, 3 * row)
                                : *rc::gen::element<std::int64_t>(0, row, 3 * row, row + 1);
    const std::uint32_t seed = *rc::gen::arbitrary<std::uint32_t>();
    // Distinct slots from a seeded permutation of the cache; about one token in six is padding.
    std::vector<std::int64_t> free_slots(static_cast<std::size_t>(L.slots()));
    std::iota(free_slots.begin(), free_slots.end(), 0);
    for (std::size_t i = free_slots.size(); i > 1; --i) std::swap(free_slots[i - 1], free_slots[mix32(seed + i) % i]);
    std::size_t next = 0;
    for (std::int64_t t = 0; t < s.tokens; ++t) {
      const bool padding = mix32(~seed + t) % 6 == 0 || next == free_slots.size();
      p.slots.push_back(padding ? -1 - static_cast<std::int64_t>(mix32(seed ^ t) % 3) : free_slots[next++]);
    }
    const std::int64_t k_count = s.tokens * token_stride(s, KvSide::k), v_count = s.tokens * token_stride(s, KvSide::v);
    p.key = make_kv(s.input, k_count, L.head_dim, seed);
    p.value = make_kv(s.input, v_count, L.head_dim, seed ^ 0x5bd1e995u);
    const float k_amax = kernels::amax_cpu(s.input, p.key.data(), k_count);
    const float v_amax = kernels::amax_cpu(s.input, p.value.data(), v_count);
    const auto realistic = [&](float amax) {
      const float g = tensor_scale(recipe, amax);
      return g > 0x1p-100f && g < 0x1p100f ? g : 1.0f;
    };
    for (std::int64_t h = 0; h < (s.per_head_scales ? L.heads : 1); ++h) {
      p.scales.k[h] = *gen_scale(realistic(k_amax));
      p.scales.v[h] = *gen_scale(realistic(v_amax));
    }
    return p;
  });
}

struct Caches {
  std::vector<std::uint8_t> k, v;  // FP8: K and V caches; NVFP4: k is the kv_cache, v empty
};

Caches poisoned(const PagedKvLayout& L, std::uint8_t poison) {
  Caches c;
  c.k.assign(static_cast<std::size_t>(L.buffer_bytes()), poison);
  if (L.format == PagedFormat::fp8) c.v.assign(static_cast<std::size_t>(L.buffer_bytes()), poison);
  return c;
}

kernels::PagedStoreArgs args_for(const PagedProblem& p, Caches* c, const std::int64_t* slots) {
  return {p.key.data(), p.value.data(), slots, c->k.data(), c->v.empty() ? nullptr : c->v.data()};
}

Caches run_twin(const PagedProblem& p, std::uint8_t poison) {
  Caches c = poisoned(p.shape.layout, poison);
  const kvq::Status e = kernels::paged_store_cpu(p.shape, p.scales, args_for(p, &c, p.slots.data()));
  if (!e.ok()) throw std::runtime_error(e.message());
  return c;
}

// The store as the generic kernel runs it past 2^32 slots or items: 64-bit index arithmetic and
// NVFP4 chunks through quantize_block (the twin takes the 32-bit path wherever the kernel does,
// and quantize_block_packed, the fixed kernels' quantizer).
Caches run_wide_indices(const PagedProblem& p, std::uint8_t poison) {
  Caches c = poisoned(p.shape.layout, poison);
  const kernels::PagedStoreArgs a = args_for(p, &c, p.slots.data());
  for (std::int64_t item = 0; item < kernels::paged_store_items(p.shape); ++item)
    kernels::paged_store_item<std::int64_t, false>(p.shape, p.scales, a, item);
  return c;
}

// The expected caches: the poison, then every chunk of every non-padding token quantized by the
// recipe model (quantize_block) and placed by the layout formulas of docs/paged.md, written
// out here apart from PagedKvLayout.
Caches expected_caches(const PagedProblem& p, std::uint8_t poison) {
  const kernels::PagedStoreShape& s = p.shape;
  const PagedKvLayout& L = s.layout;
  const std::int64_t H = L.heads, D = L.head_dim, bs = L.block_size, S = D / 16;
  const bool nhd = L.order == KvOrder::nhd;
  Caches c = poisoned(L, poison);
  for (std::int64_t t = 0; t < s.tokens; ++t) {
    const std::int64_t slot = p.slots[t];
    if (slot < 0) continue;
    const std::int64_t blk = slot / bs, off = slot % bs;
    for (int side = 0; side < 2; ++side) {
      const std::vector<std::uint8_t>& x = side == 0 ? p.key : p.value;
      const std::int64_t given = side == 0 ? s.key_stride : s.value_stride, stride = given ? given : H * D;
      for (std::int64_t h = 0; h < H; ++h) {
        const float g = (side == 0 ? p.scales.k : p.scales.v)[s.per_head_scales ? h : 0];
        const std::int64_t row = nhd ? off * H + h : h * bs + off;  // within the block's region
        for (std::int64_t chunk = 0; chunk < S; ++chunk) {
          float values[16];
          std::uint8_t codes[16];
          for (int i = 0; i < 16; ++i) values[i] = kernels::load_value(s.input, x.data(), t * stride + h * D + chunk * 16 + i);
          const std::uint8_t scale = quantize_block(s.recipe, g, values, 16, codes);
          if (L.format == PagedFormat::fp8) {
            std::vector<std::uint8_t>& cache = side == 0 ? c.k : c.v;
            for (int i = 0; i < 16; ++i) cache[(blk * bs * H + row) * D + chunk * 16 + i] = codes[i];
            continue;
          }
          const std::int64_t side_bytes = bs * H * (D / 2 + D / 16);
          const std::int64_t base = blk * 2 * side_bytes + side * side_bytes;
          for (int i = 0; i < 16; i += 2)
            c.k[base + row * (D / 2) + chunk * 8 + i / 2] = static_cast<std::uint8_t>(codes[i] | codes[i + 1] << 4);
          const bool swizzled = L.swizzle == ScaleSwizzle::k_and_v || (L.swizzle == ScaleSwizzle::v_only && side == 1);
          std::int64_t at = row * S + chunk;
          if (swizzled && nhd) at = (off / 4) * 4 * (H * S) + 4 * (h * S + chunk) + off % 4;
          if (swizzled && !nhd) at = h * bs * S + (off / 4) * 4 * S + 4 * chunk + off % 4;
          c.k[base + bs * H * (D / 2) + at] = scale;
        }
      }
    }
  }
  return c;
}

// Which region of its buffer a byte lies in, for failure messages.
std::string where(const PagedKvLayout& L, int buffer, std::int64_t byte) {
  std::ostringstream os;
  const std::int64_t block = byte / L.block_bytes(), within = byte % L.block_bytes();
  os << "block " << block;
  for (const KvSide side : {KvSide::k, KvSide::v})
    for (const PagePart part : {PagePart::data, PagePart::scales}) {
      if (L.format == PagedFormat::fp8 && (static_cast<int>(side) != buffer || part == PagePart::scales)) continue;
      const kernels::PageRegion r = L.region(side, part);
      if (within >= r.offset && within < r.offset + r.bytes)
        os << (side == KvSide::k ? " K " : " V ") << (part == PagePart::data ? "data" : "scales") << " byte "
           << within - r.offset;
    }
  return os.str();
}

// "" or the first byte where two caches differ, located and shown as hex.
std::string first_difference(const PagedKvLayout& L, const Caches& got, const Caches& want) {
  const std::vector<std::uint8_t>* pairs[2][2] = {{&got.k, &want.k}, {&got.v, &want.v}};
  for (int b = 0; b < 2; ++b) {
    const auto& g = *pairs[b][0];
    const auto& w = *pairs[b][1];
    if (g.size() != w.size()) return "cache sizes differ";
    const auto m = std::mismatch(g.begin(), g.end(), w.begin());
    if (m.first == g.end()) continue;
    const std::int64_t i = m.first - g.begin();
    std::ostringstream os;
    os << (L.format == PagedFormat::nvfp4 ? "kv_cache" : (b == 0 ? "key_cache" : "value_cache")) << " byte " << i << " ("
       << where(L, b, i) << "): got " << hex_code(kE4M3FN, *m.first) << ", want " << hex_code(kE4M3FN, *m.second);
    return os.str();
  }
  return {};
}

// Every addressed byte of `from` (laid out by `a`) moved to where layout `b` puts it; bytes no
// (side, block, token, head) addresses keep `poison`. Used to compare NHD with HND and swizzles.
Caches relayout(const Caches& from, const PagedKvLayout& a, const PagedKvLayout& b, std::uint8_t poison) {
  Caches to = poisoned(b, poison);
  for (const KvSide side : {KvSide::k, KvSide::v}) {
    const bool fp8 = a.format == PagedFormat::fp8;
    const std::vector<std::uint8_t>& src = fp8 && side == KvSide::v ? from.v : from.k;
    std::vector<std::uint8_t>& dst = fp8 && side == KvSide::v ? to.v : to.k;
    for (std::int64_t blk = 0; blk < a.num_blocks; ++blk)
      for (std::int64_t t = 0; t < a.block_size; ++t)
        for (std::int64_t h = 0; h < a.heads; ++h) {
          for (std::int64_t j = 0; j < a.data_row_bytes(); ++j)
            dst[b.data_offset(side, blk, t, h, j)] = src[a.data_offset(side, blk, t, h, j)];
          for (std::int64_t sc = 0; !fp8 && sc < a.scales_per_head(); ++sc)
            dst[b.scale_offset(side, blk, t, h, sc)] = src[a.scale_offset(side, blk, t, h, sc)];
        }
  }
  return to;
}

// The recipes the paged store runs: FP8 in both conventions, NVFP4 in kvq's, FlashInfer's and vLLM's,
// and the engine variants of their own kernels (KVQ_PAGED_VARIANT_RECIPES: torchao, ModelOpt,
// compressed-tensors, the four-over-six package's one-candidate rule).
struct StoreRecipe {
  const char* name;
  PagedFormat format;
};
constexpr StoreRecipe kStoreRecipes[] = {{"fp8-e4m3-tensor", PagedFormat::fp8},
                                         {"fp8-e4m3-tensor-rcp", PagedFormat::fp8},
                                         {"nvfp4", PagedFormat::nvfp4},
                                         {"nvfp4-flashinfer-kv", PagedFormat::nvfp4},
                                         {"nvfp4-vllm", PagedFormat::nvfp4},
                                         {"nvfp4-torchao", PagedFormat::nvfp4},
                                         {"nvfp4-4over6-paper", PagedFormat::nvfp4},
                                         {"nvfp4-modelopt", PagedFormat::nvfp4},  // the engine variants' kernels
                                         {"nvfp4-compressed-tensors", PagedFormat::nvfp4},
                                         {"nvfp4-4over6-static6", PagedFormat::nvfp4},
                                         {"nvfp4-4over6", PagedFormat::nvfp4},
                                         {"fp8-e4m3-tensor-triton", PagedFormat::fp8},
                                         {"fp8-e4m3-tensor-rcp-triton", PagedFormat::fp8},
                                         {"fp8-e4m3-token-head-triton", PagedFormat::fp8},
                                         {"fp8-e4m3-tensor-torch", PagedFormat::fp8}};

RunContext with_cases(const RunContext& ctx, int divisor) {
  RunContext fewer = ctx;
  fewer.cases = std::max(1, ctx.cases / divisor);
  return fewer;
}

constexpr Limits kCpuLimits{4, 40, 4};

std::string run_device(const PagedProblem& p, std::uint8_t poison, bool check_slots, Caches* out);

// Calls fn(recipe, format, name) for each recipe the store runs.
template <typename Fn>
void for_each_store_recipe(Fn&& fn) {
  for (const StoreRecipe& sr : kStoreRecipes) fn(recipe_from_name(sr.name)->recipe, sr.format, std::string(sr.name));
}

void register_store_properties() {
  for_each_store_recipe([](const Recipe r, const PagedFormat f, const std::string& name) {
    const std::string base = "store/" + name;
    // Twin == recipe model placed by the written-out layout, over the whole cache, for two
    // poisons: every addressed byte written, every other byte (padding tokens too) untouched.
    add_property("paged", base + "/twin-vs-model-whole-cache", Device::cpu, [r, f](const RunContext& ctx) {
      return paged_store_vs_model(ctx, r, f, nullptr, false);
    });
    // NHD and HND (and, for NVFP4, every swizzle choice) hold the same bytes after the permutation.
    add_property("paged", base + "/layouts-agree-after-permutation", Device::cpu, [r, f](const RunContext& ctx) {
      const auto problems = gen_problem(r, f, kCpuLimits);
      return check_random(with_cases(ctx, 4), [&] {
        const PagedProblem p = *problems;
        const Caches reference = run_twin(p, kPoisonA);
        for (const KvOrder order : {KvOrder::nhd, KvOrder::hnd})
          for (const ScaleSwizzle swz : {ScaleSwizzle::none, ScaleSwizzle::v_only, ScaleSwizzle::k_and_v}) {
            if (f == PagedFormat::fp8 && swz != ScaleSwizzle::none) continue;
            if (swz != ScaleSwizzle::none && p.shape.layout.block_size % 4 != 0) continue;
            PagedProblem q = p;
            q.shape.layout.order = order;
            q.shape.layout.swizzle = swz;
            const std::string diff =
                first_difference(q.shape.layout, run_twin(q, kPoisonA),
                                 relayout(reference, p.shape.layout, q.shape.layout, kPoisonA));
            if (!diff.empty()) RC_FAIL(std::string(kernels::name_of(order)) + ", scale swizzle " + kernels::name_of(swz) + ": " + diff);
          }
      });
    });
  });
}
KVQ_REGISTER_PROPERTIES(register_store_properties);

struct LayoutCase {  // a layout, shown by showValue below
  PagedKvLayout layout;
};

rc::Gen<LayoutCase> gen_layout() {
  return rc::gen::exec([] {
    LayoutCase c;
    PagedKvLayout& L = c.layout;
    L.format = *rc::gen::element(PagedFormat::fp8, PagedFormat::nvfp4);
    L.order = *rc::gen::element(KvOrder::nhd, KvOrder::hnd);
    L.swizzle = L.format == PagedFormat::fp8 ? ScaleSwizzle::none
                                             : *rc::gen::element(ScaleSwizzle::none, ScaleSwizzle::v_only, ScaleSwizzle::k_and_v);
    L.block_size = 4 * *rc::gen::inRange<std::int64_t>(1, 33) - (L.swizzle == ScaleSwizzle::none ? *rc::gen::inRange(0, 4) : 0);
    L.heads = *rc::gen::inRange(1, 9);
    L.head_dim = 16 * *rc::gen::inRange<std::int64_t>(1, 17);
    L.num_blocks = *rc::gen::inRange(1, 4);
    return c;
  });
}

void showValue(const LayoutCase& c, std::ostream& os) {
  const PagedKvLayout& L = c.layout;
  os << (L.format == PagedFormat::fp8 ? "FP8 " : "NVFP4 ") << kernels::name_of(L.order) << ", scale swizzle " << kernels::name_of(L.swizzle)
     << ", num_blocks " << L.num_blocks << ", block_size " << L.block_size << ", heads " << L.heads << ", D " << L.head_dim;
}

void register_layout_properties() {
  // Every byte of every buffer is addressed by exactly one (side, block, token, head, byte or
  // scale), inside the split view of its side and part; the views tile a block in the order
  // [K_data | K_scale | V_data | V_scale] (FP8: one view, the whole block, per cache).
  add_property("paged", "layout/every-byte-addressed-once-in-its-view", Device::cpu, [](const RunContext& ctx) {
    return check_random(with_cases(ctx, 4), [] {
      const PagedKvLayout L = (*gen_layout()).layout;
      const bool fp8 = L.format == PagedFormat::fp8;
      std::vector<int> hits[2] = {std::vector<int>(L.buffer_bytes()), std::vector<int>(fp8 ? L.buffer_bytes() : 0)};
      auto hit = [&](KvSide side, PagePart part, std::int64_t blk, std::int64_t at) {
        const kernels::PageRegion r = L.region(side, part);
        const std::int64_t within = at - blk * L.block_bytes();
        RC_ASSERT(within >= r.offset);
        RC_ASSERT(within < r.offset + r.bytes);
        ++hits[fp8 ? static_cast<int>(side) : 0][at];
      };
      for (const KvSide side : {KvSide::k, KvSide::v})
        for (std::int64_t blk = 0; blk < L.num_blocks; ++blk)
          for (std::int64_t t = 0; t < L.block_size; ++t)
            for (std::int64_t h = 0; h < L.heads; ++h) {
              for (std::int64_t j = 0; j < L.data_row_bytes(); ++j) hit(side, PagePart::data, blk, L.data_offset(side, blk, t, h, j));
              for (std::int64_t s = 0; !fp8 && s < L.scales_per_head(); ++s)
                hit(side, PagePart::scales, blk, L.scale_offset(side, blk, t, h, s));
            }
      for (const auto& buffer : hits)
        RC_ASSERT(std::all_of(buffer.begin(), buffer.end(), [](int n) { return n == 1; }));
      std::int64_t next = 0;
      for (const KvSide side : {KvSide::k, KvSide::v})
        for (const PagePart part : {PagePart::data, PagePart::scales}) {
          const kernels::PageRegion r = L.region(side, part);
          if (fp8) {  // one view: the whole block of the side's own cache
            RC_ASSERT(r.bytes == (part == PagePart::data ? L.block_bytes() : 0));
            if (part == PagePart::data) RC_ASSERT(r.offset == 0);
            continue;
          }
          RC_ASSERT(r.offset == next);
          next += r.bytes;
        }
      if (!fp8) RC_ASSERT(next == L.block_bytes());
      RC_ASSERT(L.block_bytes() == (fp8 ? 1 : 2) * L.block_size * L.heads * (fp8 ? L.head_dim : L.full_dim()));
    });
  });
  // The swizzle is a permutation of [0, rows*cols) and unswizzle is its inverse, both ways.
  // Where aligned_shape holds (the 4over6 kernel's aligned loop: loads and stores without an
  // alignment test), every chunk's input starts on 16 bytes from a 16-byte aligned tensor, and its
  // 8 bytes of codes on 8 bytes from an 8-byte aligned cache, in every block, row and order.
  add_property("paged", "layout/aligned-shape-aligns-every-chunk", Device::cpu, [](const RunContext& ctx) {
    const auto problems = gen_problem(recipe_from_name("nvfp4-4over6-paper")->recipe, PagedFormat::nvfp4, kCpuLimits);
    return check_random(with_cases(ctx, 4), [&] {
      const kernels::PagedStoreShape s = (*problems).shape;
      const bool aligned = kernels::aligned_shape(s);
      RC_CLASSIFY(aligned);
      if (!aligned) return;
      const PagedKvLayout& L = s.layout;
      for (const KvSide side : {KvSide::k, KvSide::v})
        for (std::int64_t t = 0; t < std::max<std::int64_t>(s.tokens, L.block_size); ++t)
          for (std::int64_t h = 0; h < L.heads; ++h)
            for (std::int64_t c = 0; c < L.head_dim / kernels::kPagedChunk; ++c) {
              RC_ASSERT(kernels::chunk_first<std::int64_t>(s, side, t, h, c) * kernels::bytes_of(s.input) % 16 == 0);
              for (std::int64_t blk = 0; blk < L.num_blocks; ++blk)
                RC_ASSERT(L.data_offset(side, blk, t % L.block_size, h, c * kernels::kPagedChunk / 2) % 8 == 0);
            }
    });
  });
  add_property("paged", "layout/swizzle-bijection-and-inverse", Device::cpu, [](const RunContext& ctx) {
    return check_random(with_cases(ctx, 4), [] {
      const std::int64_t rows = 4 * *rc::gen::inRange<std::int64_t>(1, 65), cols = *rc::gen::inRange<std::int64_t>(1, 65);
      std::vector<int> seen(rows * cols);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
          const std::int64_t o = kernels::swizzle_index(cols, r, c);
          RC_ASSERT(o >= 0 && o < rows * cols);
          ++seen[o];
          RC_ASSERT(kernels::unswizzle_index(cols, o) == r * cols + c);
        }
      RC_ASSERT(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
      for (std::int64_t o = 0; o < rows * cols; ++o) {
        const std::int64_t i = kernels::unswizzle_index(cols, o);
        RC_ASSERT(kernels::swizzle_index(cols, i / cols, i % cols) == o);
      }
    });
  });
  // The narrow path's row steps (PagedKvLayout::row_steps) give every NVFP4 data and scale offset
  // of block 0 that data_offset and scale_offset give, for both sides, orders and every swizzle.
  add_property("paged", "layout/row-steps-are-offsets", Device::cpu, [](const RunContext& ctx) {
    return check_random(with_cases(ctx, 4), [] {
      const PagedKvLayout L = (*gen_layout()).layout;
      RC_PRE(L.format == PagedFormat::nvfp4);
      RC_CLASSIFY(name_of(L.order), name_of(L.swizzle));
      for (const KvSide side : {KvSide::k, KvSide::v}) {
        const kernels::RowSteps st = L.row_steps(side);
        for (std::int64_t t = 0; t < L.block_size; ++t)
          for (std::int64_t h = 0; h < L.heads; ++h) {
            const auto t32 = static_cast<std::uint32_t>(t), h32 = static_cast<std::uint32_t>(h);
            for (std::int64_t b = 0; b < L.data_row_bytes(); ++b)
              RC_ASSERT(std::int64_t{st.data(t32, h32, static_cast<std::uint32_t>(b))} == L.data_offset(side, 0, t, h, b));
            for (std::int64_t c = 0; c < L.scales_per_head(); ++c)
              RC_ASSERT(std::int64_t{st.scale(t32, h32, static_cast<std::uint32_t>(c))} == L.scale_offset(side, 0, t, h, c));
          }
      }
    });
  });
  // The kernel's index division by multiply-high equals `/` and `%` for every divisor it meets:
  // small ones (heads, chunks, block sizes), powers of two and their neighbours, any 32-bit one;
  // numerators at the edges (0, multiples of d and their neighbours, 2^32-1) and at random.
  add_property("paged", "layout/fast-divide-is-division", Device::cpu, [](const RunContext& ctx) {
    return check_random(with_cases(ctx, 4), [] {
      const int kind = *rc::gen::inRange(0, 3);
      const int k = *rc::gen::inRange(0, 32);
      const std::uint32_t d =
          kind == 0   ? *rc::gen::inRange<std::uint32_t>(1, 1025)
          : kind == 1 ? std::max<std::uint32_t>(1, static_cast<std::uint32_t>((std::uint64_t{1} << k) + *rc::gen::inRange(-1, 2)))
                      : std::max<std::uint32_t>(1, *rc::gen::arbitrary<std::uint32_t>());
      const kernels::FastDivide32 f(d);
      std::vector<std::uint32_t> ns{0u, 1u, d - 1, d, 0xffffffffu, 0xfffffffeu, 0xffffffffu / d * d,
                                    0xffffffffu / d * d - 1};
      for (int i = 0; i < 256; ++i) ns.push_back(*rc::gen::arbitrary<std::uint32_t>());
      for (std::uint32_t m = 0; m < 64; ++m) ns.push_back(static_cast<std::uint32_t>(std::uint64_t{m} * d % 0x100000000ull));
      for (const std::uint32_t n : ns) {
        std::uint32_t q = 0, r = 0;
        f.divide(n, &q, &r);
        RC_ASSERT(q == n / d);
        RC_ASSERT(r == n % d);
      }
    });
  });
  // Offsets worked out by hand from docs/paged.md (D 64: full_dim 36, S 4; block_size
  // 16, heads 2: side 1152 bytes, block 2304, K scales at 1024 of a block, V data at 1152).
  add_property("paged", "layout/pinned-offsets", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    auto expect = [&](const char* what, std::int64_t got, std::int64_t want) {
      if (got == want) tally.pass(); else tally.fail(std::string(what) + ": got " + std::to_string(got) + ", want " + std::to_string(want));
    };
    PagedKvLayout L{PagedFormat::nvfp4, KvOrder::nhd, ScaleSwizzle::none, 3, 16, 2, 64};
    expect("full_dim", L.full_dim(), 36);
    expect("block bytes", L.block_bytes(), 2304);
    expect("V data view", L.region(KvSide::v, PagePart::data).offset, 1152);
    expect("V scales view", L.region(KvSide::v, PagePart::scales).offset, 2176);
    expect("NHD K data (1, t5, h1, byte 3)", L.data_offset(KvSide::k, 1, 5, 1, 3), 2304 + 11 * 32 + 3);
    expect("NHD K scale (1, t5, h1, s2)", L.scale_offset(KvSide::k, 1, 5, 1, 2), 2304 + 1024 + 46);
    L.swizzle = ScaleSwizzle::v_only;
    expect("NHD K scale, V-only swizzle", L.scale_offset(KvSide::k, 1, 5, 1, 2), 2304 + 1024 + 46);
    expect("NHD V scale, V-only swizzle", L.scale_offset(KvSide::v, 1, 5, 1, 2), 2304 + 2176 + 57);  // C = 8: 32 + 24 + 1
    L.swizzle = ScaleSwizzle::k_and_v;
    expect("NHD K scale, K and V swizzle", L.scale_offset(KvSide::k, 1, 5, 1, 2), 2304 + 1024 + 57);
    L.order = KvOrder::hnd;
    expect("HND V data (0, t5, h1, byte 3)", L.data_offset(KvSide::v, 0, 5, 1, 3), 1152 + 21 * 32 + 3);
    expect("HND V scale swizzled (0, t5, h1, s2)", L.scale_offset(KvSide::v, 0, 5, 1, 2), 2176 + 64 + 16 + 8 + 1);
    L.swizzle = ScaleSwizzle::none;
    expect("HND V scale (0, t5, h1, s2)", L.scale_offset(KvSide::v, 0, 5, 1, 2), 2176 + 21 * 4 + 2);
    const PagedKvLayout fp8{PagedFormat::fp8, KvOrder::hnd, ScaleSwizzle::none, 3, 16, 2, 64};
    expect("FP8 HND (2, t5, h1, d7)", fp8.data_offset(KvSide::v, 2, 5, 1, 7), 2 * 2048 + 21 * 64 + 7);
    expect("swizzle (t5, s2) of S 4", kernels::swizzle_index(4, 5, 2), 25);
    return tally.outcome(ctx);
  });
}
KVQ_REGISTER_PROPERTIES(register_layout_properties);

// A small valid problem for the error checks.
PagedProblem small_problem(const char* recipe, PagedFormat format) {
  PagedProblem p;
  p.shape.recipe = recipe_from_name(recipe)->recipe;
  p.shape.layout = PagedKvLayout{format, KvOrder::nhd, ScaleSwizzle::none, 2, 4, 2, 64};
  p.shape.tokens = 3;
  p.shape.input = DType::fp32;
  p.slots = {5, -1, 0};
  p.key = make_kv(DType::fp32, 3 * 2 * 64, 64, 1);
  p.value = make_kv(DType::fp32, 3 * 2 * 64, 64, 2);
  p.scales.k[0] = p.scales.v[0] = 0.25f;
  return p;
}

void register_error_properties() {
  // Bad input: an error naming the argument, from the twin, and no byte of the cache written.
  add_property("paged", "errors-name-the-argument-and-write-nothing", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    const auto expect = [&](const PagedProblem& p, const char* word, void (*edit)(kernels::PagedStoreArgs&) = nullptr) {
      Caches c = poisoned(p.shape.layout.num_blocks > 0 && p.shape.layout.block_size > 0 && p.shape.layout.heads > 0 &&
                                  p.shape.layout.head_dim > 0
                              ? p.shape.layout
                              : small_problem("nvfp4", PagedFormat::nvfp4).shape.layout,
                          kPoisonA);
      kernels::PagedStoreArgs a = args_for(p, &c, p.slots.data());
      if (edit) edit(a);
      const kvq::Status e = kernels::paged_store_cpu(p.shape, p.scales, a);
      const auto untouched = [](const std::vector<std::uint8_t>& v) {
        return std::all_of(v.begin(), v.end(), [](std::uint8_t b) { return b == kPoisonA; });
      };
      if (e.message().find(word) == std::string::npos)
        tally.fail("expected an error naming '" + std::string(word) + "', got '" + e.message() + "'");
      else if (!untouched(c.k) || !untouched(c.v))
        tally.fail("'" + e.message() + "' but the cache was written");
      else
        tally.pass();
    };
    for (const auto& [recipe, format] : {std::pair{"nvfp4", PagedFormat::nvfp4}, std::pair{"fp8-e4m3-tensor", PagedFormat::fp8}}) {
      const PagedProblem ok = small_problem(recipe, format);
      PagedProblem p = ok;
      p.slots[1] = 8;  // num_blocks * block_size = 8
      expect(p, "slot_mapping[1] = 8 is out of range");
      p = ok;
      p.slots[1] = 5;
      expect(p, "slot_mapping[0] and slot_mapping[1] are both 5");
      p = ok;
      p.shape.layout.head_dim = 72;
      expect(p, "head_dim must be a positive multiple of 16");
      p = ok;
      p.scales.v[0] = NAN;
      expect(p, "v_");
      p = ok;
      p.scales.k[0] = -1.0f;
      expect(p, "k_");
      p = ok;
      p.scales.k[0] = 0.0f;
      expect(p, "must be finite and > 0, got 0");
      p = ok;
      p.shape.per_head_scales = true;  // k[1], v[1] are 0
      expect(p, "[1] must be finite and > 0");
      p = ok;
      p.shape.layout.block_size = 0;
      expect(p, "block_size must be >= 1");
      p = ok;
      p.shape.layout.num_blocks = 0;
      expect(p, "num_blocks must be >= 1");
      p = ok;
      p.shape.layout.heads = kernels::kMaxPagedHeads + 1;
      expect(p, "heads must be in 1..256");
      p = ok;
      p.shape.tokens = -1;
      expect(p, "tokens must be >= 0");
      p = ok;
      p.shape.value_stride = 127;
      expect(p, "value_stride must be 0 (contiguous) or >= heads*head_dim = 128, got 127");
      p = ok;
      p.shape.recipe = recipe_from_name(format == PagedFormat::fp8 ? "nvfp4" : "mxfp4-floor")->recipe;
      expect(p, "recipe must be");
      expect(ok, "key must not be null", [](kernels::PagedStoreArgs& a) { a.key = nullptr; });
      expect(ok, "value must not be null", [](kernels::PagedStoreArgs& a) { a.value = nullptr; });
      expect(ok, "slot_mapping must not be null", [](kernels::PagedStoreArgs& a) { a.slot_mapping = nullptr; });
      expect(ok, "key_cache", [](kernels::PagedStoreArgs& a) { a.key_cache = nullptr; });
    }
    PagedProblem p = small_problem("nvfp4", PagedFormat::nvfp4);
    p.shape.layout.block_size = 6;
    p.shape.layout.swizzle = ScaleSwizzle::v_only;
    expect(p, "block_size must be a multiple of 4 with a scale swizzle, got 6");
    p = small_problem("fp8-e4m3-tensor", PagedFormat::fp8);
    p.shape.layout.swizzle = ScaleSwizzle::k_and_v;
    expect(p, "swizzle must be none for the FP8 layout");
    expect(small_problem("fp8-e4m3-tensor", PagedFormat::fp8), "value_cache must not be null",
           [](kernels::PagedStoreArgs& a) { a.value_cache = nullptr; });
    // NVFP4 has one kv_cache: a value_cache pointer is a mistake, not ignored.
    static std::uint8_t stray = kPoisonA;
    expect(small_problem("nvfp4", PagedFormat::nvfp4), "value_cache must be null",
           [](kernels::PagedStoreArgs& a) { a.value_cache = &stray; });
    // No tokens: valid, nothing written, no pointer needed.
    p = small_problem("nvfp4", PagedFormat::nvfp4);
    p.shape.tokens = 0;
    const kvq::Status none = kernels::paged_store_cpu(p.shape, p.scales, kernels::PagedStoreArgs{});
    if (none.ok()) tally.pass(); else tally.fail("empty store rejected: " + none.message());
    return tally.outcome(ctx);
  });
}
KVQ_REGISTER_PROPERTIES(register_error_properties);

// The store on the GPU: inputs, slots and poisoned caches uploaded, the launcher run, the caches
// downloaded. "" or the first error.
std::string run_device(const PagedProblem& p, std::uint8_t poison, bool check_slots, Caches* out) {
  *out = poisoned(p.shape.layout, poison);
  void *key = nullptr, *value = nullptr, *slots = nullptr, *k = nullptr, *v = nullptr;
  const std::size_t slot_bytes = p.slots.size() * sizeof(std::int64_t);
  kvq::Status e = kernels::device::allocate(&key, p.key.size());
  if (e.ok()) e = kernels::device::allocate(&value, p.value.size());
  if (e.ok()) e = kernels::device::allocate(&slots, slot_bytes);
  if (e.ok()) e = kernels::device::allocate(&k, out->k.size());
  if (e.ok() && !out->v.empty()) e = kernels::device::allocate(&v, out->v.size());
  if (e.ok()) e = kernels::device::upload(key, p.key.data(), p.key.size());
  if (e.ok()) e = kernels::device::upload(value, p.value.data(), p.value.size());
  if (e.ok()) e = kernels::device::upload(slots, p.slots.data(), slot_bytes);
  if (e.ok()) e = kernels::device::upload(k, out->k.data(), out->k.size());
  if (e.ok() && v) e = kernels::device::upload(v, out->v.data(), out->v.size());
  kernels::PagedStoreShape shape = p.shape;
  shape.check_slots = check_slots;
  const kernels::PagedStoreArgs a{key, value, static_cast<const std::int64_t*>(slots), static_cast<std::uint8_t*>(k),
                                  static_cast<std::uint8_t*>(v)};
  if (e.ok()) e = kernels::device::paged_store(shape, p.scales, a, nullptr);
  if (e.ok()) e = kernels::device::synchronize();
  if (e.ok()) e = kernels::device::download(out->k.data(), k, out->k.size());
  if (e.ok() && v) e = kernels::device::download(out->v.data(), v, out->v.size());
  for (void* ptr : {key, value, slots, k, v}) kernels::device::release(ptr);
  return e.message();
}

// A serving-sized store (run_large): `tokens` tokens of [heads, D 128] in blocks of 16, shuffled
// slots over twice the blocks needed, one token in 97 padding, per-tensor scales from the data's
// finite amax (per_head_scales: each head a little apart from it).
struct LargeGeometry {
  std::int64_t tokens, heads;
  KvOrder order;
  ScaleSwizzle swizzle;
  DType input;
  bool qkv_key;  // K a view of a fused qkv tensor: token stride 3 * heads * D
  bool per_head_scales;
  // The store takes the 4over6 kernel's aligned loop (kernels/paged_store.hpp aligned_shape; the
  // device buffers are cudaMalloc's, aligned): checked, so the case cannot drift to the plain loop.
  bool aligned = false;
};
// The grids of these cases: 4 thread blocks an SM (kernels/device_grid.hpp), so that threads run
// several items and the staged loop its later stages whatever cap the launch measured fastest.
constexpr int kLargeBlocksPerSm = 4;
Outcome run_large(const RunContext& ctx, const Recipe& r, PagedFormat f, const LargeGeometry& g) {
  const kernels::device::GridCapOverride grid(kLargeBlocksPerSm);
  constexpr std::int64_t kD = 128;
  PagedProblem p;
  kernels::PagedStoreShape& s = p.shape;
  s.recipe = r;
  s.layout = PagedKvLayout{f, g.order, f == PagedFormat::fp8 ? ScaleSwizzle::none : g.swizzle, g.tokens / 8, 16, g.heads, kD};
  s.tokens = g.tokens;
  s.input = g.input;
  s.key_stride = g.qkv_key ? 3 * g.heads * kD : 0;
  s.per_head_scales = g.per_head_scales;
  std::vector<std::int64_t> all(static_cast<std::size_t>(s.layout.slots()));
  std::iota(all.begin(), all.end(), 0);
  for (std::size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[mix32(ctx.seed + i) % i]);
  for (std::int64_t t = 0; t < s.tokens; ++t) p.slots.push_back(t % 97 == 0 ? -1 : all[t]);
  const std::int64_t k_count = s.tokens * token_stride(s, KvSide::k), v_count = s.tokens * token_stride(s, KvSide::v);
  p.key = make_kv(s.input, k_count, kD, ctx.seed);
  p.value = make_kv(s.input, v_count, kD, ~ctx.seed);
  const auto finite_amax = [&](const std::vector<std::uint8_t>& x, std::int64_t count) {  // the data hold rare inf
    float m = 0.0f;
    for (std::int64_t i = 0; i < count; ++i) {
      const float a = std::fabs(kernels::load_value(s.input, x.data(), i));
      if (std::isfinite(a) && a > m) m = a;
    }
    return m;
  };
  const float k_scale = tensor_scale(r, finite_amax(p.key, k_count)), v_scale = tensor_scale(r, finite_amax(p.value, v_count));
  for (std::int64_t h = 0; h < (g.per_head_scales ? g.heads : 1); ++h) {
    p.scales.k[h] = k_scale * (1.0f + 0.125f * static_cast<float>(h));
    p.scales.v[h] = v_scale * (1.0f + 0.0625f * static_cast<float>(h));
  }
  Tally tally;
  if (g.aligned && !kernels::aligned_shape(s)) tally.fail("the geometry does not take the aligned loop (aligned_shape)");
  Caches got;
  const std::string e = run_device(p, kPoisonA, true, &got);
  if (!e.empty()) throw std::runtime_error(e);
  const std::string diff = first_difference(s.layout, got, run_twin(p, kPoisonA));
  if (diff.empty()) tally.pass(); else tally.fail(diff);
  return tally.outcome(ctx);
}

// Whether a recipe's device store may stage its loads (kernels/paged_store_kernel.cuh kStagedOf:
// the fixed NVFP4 kernels but 4over6), or take the aligned loop (kOccupiedOf: 4over6).
bool staged_recipe(const Recipe& r, PagedFormat f) {
  return f == PagedFormat::nvfp4 && r.two_level != TwoLevel::four_over_six;
}
bool aligned_recipe(const Recipe& r, PagedFormat f) {
  return f == PagedFormat::nvfp4 && r.two_level == TwoLevel::four_over_six;
}

void register_gpu_properties() {
  for_each_store_recipe([](const Recipe r, const PagedFormat f, const std::string& name) {
    const std::string base = "paged/" + name;
    // Kernel == twin over the whole cache (every byte, poisoned), with and without the slot check;
    // the staged NVFP4 recipes also over the geometries the staged loop takes (Limits::staged).
    for (const bool staged : {false, true}) {
      if (staged && !staged_recipe(r, f)) continue;
      const std::string property = staged ? "/device-vs-cpu-twin-staged" : "/device-vs-cpu-twin-whole-cache";
      add_property("gpu", base + property, Device::cuda, [r, f, staged](const RunContext& ctx) {
        std::string why;
        if (!kernels::device::available(&why)) return skipped(why);
        const auto problems = gen_problem(r, f, Limits{8, 300, 6, staged});
        return check_random(with_cases(ctx, 10), [&] {
          const PagedProblem p = *problems;
          if (staged) RC_ASSERT(kernels::staged_shape(p.shape));
          for (const std::uint8_t poison : {kPoisonA, kPoisonB}) {
            Caches got;
            const std::string e = run_device(p, poison, poison == kPoisonA, &got);
            if (!e.empty()) RC_FAIL(e);
            const std::string diff = first_difference(p.shape.layout, got, run_twin(p, poison));
            if (!diff.empty()) RC_FAIL(diff);
          }
        });
      });
    }
    // Serving-sized stores, each more items than one grid of the kernel covers (run_large's 4 blocks
    // of 128 threads an SM: 67,584 on an H100), so threads run several items and the staged loop its
    // later stages: 8 heads, HND, swizzled K and V, BF16; 8192 tokens for FP8 (1M chunks), 24576 for
    // NVFP4 (1.5M items of a K and a V chunk).
    add_property("gpu", base + "/device-vs-cpu-twin-large", Device::cuda, [r, f](const RunContext& ctx) {
      std::string why;
      if (!kernels::device::available(&why)) return skipped(why);
      const std::int64_t tokens = f == PagedFormat::fp8 ? 8192 : 24576;
      return run_large(ctx, r, f,
                       {tokens, 8, KvOrder::hnd, ScaleSwizzle::k_and_v, DType::bf16, false, false, aligned_recipe(r, f)});
    });
    // 4over6's aligned loop also over NHD rows with V's scales swizzled, FP16; 16384 tokens, 1M
    // items (more than one grid covers on an H100's 132 SMs, so threads run several items).
    if (aligned_recipe(r, f))
      add_property("gpu", base + "/device-vs-cpu-twin-large-aligned-nhd", Device::cuda, [r, f](const RunContext& ctx) {
        std::string why;
        if (!kernels::device::available(&why)) return skipped(why);
        return run_large(ctx, r, f, {16384, 8, KvOrder::nhd, ScaleSwizzle::v_only, DType::fp16, false, false, true});
      });
    // The staged recipes also with 20 heads (160 items a token, which the grid's stride of SMs * 512
    // threads does not divide on an H100's 132 SMs: a warp's row steps past a token's end), NHD, V
    // swizzled, FP16, K a qkv view, per-head scales (the loop without the lean terms); 8192 tokens,
    // 1.3M items.
    if (staged_recipe(r, f))
      add_property("gpu", base + "/device-vs-cpu-twin-large-staged", Device::cuda, [r, f](const RunContext& ctx) {
        std::string why;
        if (!kernels::device::available(&why)) return skipped(why);
        return run_large(ctx, r, f, {8192, 20, KvOrder::nhd, ScaleSwizzle::v_only, DType::fp16, true, true});
      });
  });
  // The device launcher rejects bad slots before launching: the cache stays poisoned.
  add_property("gpu", "paged/device-rejects-bad-slots-and-writes-nothing", Device::cuda, [](const RunContext& ctx) {
    std::string why;
    if (!kernels::device::available(&why)) return skipped(why);
    Tally tally;
    for (const std::int64_t bad : {std::int64_t{8}, std::int64_t{0}}) {  // out of range; a duplicate of slot 0
      PagedProblem p = small_problem("nvfp4", PagedFormat::nvfp4);
      p.slots[1] = bad;
      Caches got;
      const std::string e = run_device(p, kPoisonA, true, &got);
      const bool untouched = std::all_of(got.k.begin(), got.k.end(), [](std::uint8_t b) { return b == kPoisonA; });
      if (e.find("slot_mapping[") != std::string::npos && untouched) tally.pass(); else tally.fail("slot " + std::to_string(bad) + ": '" + e + "'");
    }
    return tally.outcome(ctx);
  });
}
KVQ_REGISTER_PROPERTIES(register_gpu_properties);

}  // namespace

// The body of store/<recipe>/twin-vs-model-whole-cache; a mutation (proptests/layout_mutants.hpp)
// changes only what the store under test is given, never the model's input.
Outcome paged_store_vs_model(const RunContext& ctx, const Recipe& r, PagedFormat f, const PagedMutation& mutation,
                             bool device) {
  const auto problems = gen_problem(r, f, kCpuLimits);
  return check_random(with_cases(ctx, 2), [&] {
    const PagedProblem p = *problems;
    RC_CLASSIFY(p.shape.layout.order == KvOrder::nhd, "NHD");
    RC_CLASSIFY(p.shape.layout.swizzle != ScaleSwizzle::none, "swizzled");
    RC_CLASSIFY(p.shape.per_head_scales, "per-head scales");
    PagedProblem run = p;
    if (mutation) mutation(run.shape, run.slots);
    for (const std::uint8_t poison : {kPoisonA, kPoisonB}) {
      Caches got;
      if (device) {
        const std::string e = run_device(run, poison, false, &got);
        if (!e.empty()) RC_FAIL("device store: " + e);
      } else {
        got = run_twin(run, poison);
      }
      const std::string diff = first_difference(p.shape.layout, got, expected_caches(p, poison));
      if (!diff.empty()) RC_FAIL(diff);
      if (device) continue;
      const std::string wide = first_difference(p.shape.layout, run_wide_indices(run, poison), got);
      if (!wide.empty()) RC_FAIL("64-bit indices, quantize_block: " + wide);
    }
  });
}

}  // namespace kvq::props
