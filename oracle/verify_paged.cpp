#include "oracle/verify_paged.hpp"

#include <algorithm>
#include <sstream>

#include "formats/names.hpp"
#include "formats/recipe_names.hpp"
#include "kernels/quantize.hpp"
#include "oracle/report_text.hpp"

namespace kvq::ports {

using kernels::KvOrder;
using kernels::KvSide;
using kernels::PagedFormat;
using kernels::PagePart;
using kernels::ScaleSwizzle;

int paged_buffers(const kernels::PagedKvLayout& l, bool token_head_scales) {
  return l.format == PagedFormat::fp8 ? (token_head_scales ? 4 : 2) : 1;
}
const char* paged_buffer_name(const kernels::PagedKvLayout& l, int buffer) {
  if (l.format == PagedFormat::nvfp4) return "kv_cache";
  static const char* const kNames[kMaxPagedBuffers] = {"key_cache", "value_cache", "k_scale_cache", "v_scale_cache"};
  return kNames[buffer];
}

namespace {

// The FP32 scale of (slot, head) in a per-token-head scale cache [blocks, block_size, heads].
std::int64_t token_head_scale_offset(const kernels::PagedKvLayout& L, std::int64_t slot, std::int64_t head) {
  return (slot * L.heads + head) * 4;
}

// vLLM's per-token-head FP8 store (PagedPort::token_head_scales): each addressed (token, head) row a
// tensor of its own under the recipe (its amax, tensor_scale, kernels::quantize_cpu: the flat rule),
// the codes at the slot's row, the FP32 scale at [slot, head] of the scale cache.
Status run_token_head(const PagedPort& p, std::vector<std::uint8_t>* out) {
  const kernels::PagedKvLayout& L = p.shape.layout;
  const Recipe& r = p.shape.recipe;
  if (r.scale != BlockScale::tensor_only || r.element != FormatId::e4m3fn)
    return "a per-token-head store takes a per-tensor E4M3 recipe (fp8-e4m3-token-head-triton, kvq recipes)";
  for (int b = 0; b < kMaxPagedBuffers; ++b)
    if (static_cast<std::int64_t>(out[b].size()) != (b < 2 ? L.buffer_bytes() : L.slots() * L.heads * 4))
      return std::string(paged_buffer_name(L, b)) + ": " + std::to_string(out[b].size()) + " bytes, the layout needs " +
             std::to_string(b < 2 ? L.buffer_bytes() : L.slots() * L.heads * 4);
  const kernels::QuantizeShape row{r, 1, L.head_dim};
  const int width = kernels::bytes_of(p.shape.input);
  std::vector<bool> taken(static_cast<std::size_t>(L.slots()), false);
  for (std::int64_t t = 0; t < p.shape.tokens; ++t) {
    const std::int64_t slot = p.slot_mapping[static_cast<std::size_t>(t)];
    if (slot < 0) continue;
    if (slot >= L.slots())
      return "slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot) + " is past the cache's " +
             std::to_string(L.slots()) + " slots";
    if (taken[static_cast<std::size_t>(slot)])  // the write order would decide the cache
      return "slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot) + " repeats an earlier token's slot";
    taken[static_cast<std::size_t>(slot)] = true;
    for (int side = 0; side < 2; ++side)
      for (std::int64_t h = 0; h < L.heads; ++h) {
        const std::uint8_t* x = (side == 0 ? p.key : p.value).data() + (t * L.heads + h) * L.head_dim * width;
        const float g = tensor_scale(r, kernels::amax_cpu(p.shape.input, x, L.head_dim));
        std::uint8_t* codes =
            out[side].data() + L.data_offset(static_cast<KvSide>(side), slot / L.block_size, slot % L.block_size, h, 0);
        if (auto e = kernels::quantize_cpu(row, p.shape.input, x, g, codes, nullptr); !e.ok()) return e;
        const std::uint32_t bits = bits_of(g);
        for (int i = 0; i < 4; ++i)
          out[2 + side][static_cast<std::size_t>(token_head_scale_offset(L, slot, h) + i)] = static_cast<std::uint8_t>(bits >> (8 * i));
      }
  }
  return {};
}

// The twin on the caches as they were before the call (or filled with `fill`).
Status run_twin(const PagedPort& p, const std::vector<std::uint8_t>* before, int fill, std::vector<std::uint8_t>* out) {
  const int n = paged_buffers(p.shape.layout, p.token_head_scales);
  for (int b = 0; b < n; ++b)
    out[b] = before ? before[b] : std::vector<std::uint8_t>(p.after[b].size(), static_cast<std::uint8_t>(fill));
  if (p.token_head_scales) return run_token_head(p, out);
  const kernels::PagedStoreArgs a{p.key.data(), p.value.data(), p.slot_mapping.data(), out[0].data(),
                                  n == 2 ? out[1].data() : nullptr};
  return kernels::paged_store_cpu(p.shape, p.scales, a);
}

// Where byte `offset` of buffer `buffer` lies in the layout (kernels/paged_layout.hpp), and the
// token whose slot it is.
PagedDifference locate(const PagedPort& p, int buffer, std::int64_t offset) {
  const kernels::PagedKvLayout& L = p.shape.layout;
  PagedDifference d;
  d.buffer = buffer;
  d.offset = offset;
  if (buffer >= 2) {  // a per-token-head scale cache [blocks, block_size, heads] of FP32
    d.side = buffer == 2 ? KvSide::k : KvSide::v;
    d.scale = true;
    d.index = offset % 4;
    d.slot = offset / 4 / L.heads;
    d.head = offset / 4 % L.heads;
    d.page = d.slot / L.block_size;
    d.position = d.slot % L.block_size;
    for (std::size_t t = 0; t < p.slot_mapping.size(); ++t)
      if (p.slot_mapping[t] == d.slot) d.token = static_cast<std::int64_t>(t);
    return d;
  }
  d.page = offset / L.block_bytes();
  std::int64_t within = offset % L.block_bytes();
  d.side = L.format == PagedFormat::fp8 ? static_cast<KvSide>(buffer) : (within >= L.side_bytes() ? KvSide::v : KvSide::k);
  const kernels::PageRegion data = L.region(d.side, PagePart::data), scales = L.region(d.side, PagePart::scales);
  std::int64_t row = -1;
  if (within < data.offset + data.bytes) {
    within -= data.offset;
    row = within / L.data_row_bytes();
    d.index = within % L.data_row_bytes();
  } else {
    d.scale = true;
    within -= scales.offset;
    const std::int64_t S = L.scales_per_head();
    if (!L.swizzled(d.side)) {
      row = within / S;
      d.index = within % S;
    } else if (L.order == KvOrder::nhd) {
      const std::int64_t flat = kernels::unswizzle_index(L.heads * S, within), c = flat % (L.heads * S);
      d.position = flat / (L.heads * S);
      d.head = c / S;
      d.index = c % S;
    } else {
      d.head = within / (L.block_size * S);
      const std::int64_t flat = kernels::unswizzle_index(S, within % (L.block_size * S));
      d.position = flat / S;
      d.index = flat % S;
    }
  }
  if (row >= 0) {
    d.position = L.order == KvOrder::nhd ? row / L.heads : row % L.block_size;
    d.head = L.order == KvOrder::nhd ? row % L.heads : row / L.block_size;
  }
  d.slot = d.page * L.block_size + d.position;
  for (std::size_t t = 0; t < p.slot_mapping.size(); ++t)
    if (p.slot_mapping[t] == d.slot) d.token = static_cast<std::int64_t>(t);
  return d;
}

// A buffer byte as the port names it: "kv_cache byte 70", or the piece of SGLang's pool it lies in.
std::string byte_name(const PagedPort& p, int buffer, std::int64_t offset) {
  for (const auto& [role, bytes] : p.pieces) {
    if (offset < bytes) return role + " byte " + std::to_string(offset);
    offset -= bytes;
  }
  return std::string(paged_buffer_name(p.shape.layout, buffer)) + " byte " + std::to_string(offset);
}

std::string cache_byte(const kernels::PagedKvLayout& L, const PagedDifference& d, std::uint8_t b) {
  if (d.scale || L.format == PagedFormat::fp8)
    return hex_digits(b, 2) + " (" + number(decode_float(kE4M3FN, b)) + ")";
  return hex_digits(b, 2) + " (codes " + number(decode_float(kE2M1, b & 0xF)) + ", " + number(decode_float(kE2M1, b >> 4)) + ")";
}

}  // namespace

Status paged_store_model(const PagedPort& p, std::vector<std::uint8_t>* out) { return run_twin(p, p.before, 0, out); }

PagedComparison compare_paged(const PagedPort& p, std::size_t keep, const PagedScope& scope) {
  PagedComparison c;
  const int n = paged_buffers(p.shape.layout, p.token_head_scales);
  std::vector<std::uint8_t> expected[kMaxPagedBuffers], zeros[kMaxPagedBuffers], ones[kMaxPagedBuffers];
  c.error = first_error({run_twin(p, p.before, 0, expected), run_twin(p, nullptr, 0x00, zeros), run_twin(p, nullptr, 0xFF, ones)});
  if (!c.error.ok()) return c;
  for (int b = 0; b < n; ++b) {
    c.bytes[b] = static_cast<std::int64_t>(p.after[b].size());
    if (!scope.buffers[b]) continue;
    for (std::int64_t i = 0; i < c.bytes[b] - scope.bytes_short; ++i) {
      if (p.after[b][i] == expected[b][i]) continue;
      // A byte the twin writes differs from one of the two fills (it cannot equal both).
      const bool addressed = zeros[b][i] != 0x00 || ones[b][i] != 0xFF;
      if (!addressed && !scope.untouched) continue;
      ++(addressed ? c.addressed_mismatches : c.untouched_changed)[b];
      if (c.first.size() < keep) {
        PagedDifference d = locate(p, b, i);
        d.before = p.before[b][i];
        d.expected = expected[b][i];
        d.actual = p.after[b][i];
        c.first.push_back(d);
      }
    }
  }
  return c;
}

std::string describe_paged(const PagedPort& p, const std::string& recipe_name, const PagedComparison& c) {
  const kernels::PagedKvLayout& L = p.shape.layout;
  std::ostringstream os;
  os << "kvq verify paged-store " << recipe_name << ": " << (c.exact() ? "BIT-EXACT" : "MISMATCH") << "\n";
  if (!c.error.ok()) {
    os << "  the model rejects the port's arguments: " << c.error << "\n";
    return os.str();
  }
  std::int64_t padding = 0;
  for (const std::int64_t s : p.slot_mapping) padding += s < 0 ? 1 : 0;
  os << "  key/value: " << p.shape.tokens << " tokens (" << padding << " padding) x " << L.heads << " heads x "
     << L.head_dim << " " << kernels::name_of(p.shape.input) << "; " << kernels::name_of(L.order) << ", "
     << L.num_blocks << " pages of " << L.block_size << " slots";
  if (L.format == PagedFormat::nvfp4)
    os << ", NVFP4 page (scales swizzled: "
       << (L.swizzle == kernels::ScaleSwizzle::none ? "none" : L.swizzle == kernels::ScaleSwizzle::v_only ? "V" : "K and V") << ")";
  if (p.token_head_scales)
    os << "; a scale per token and head (k_scale_cache, v_scale_cache)\n";
  else
    os << "; " << (L.format == PagedFormat::fp8 ? "k_scale " : "K tensor scale ") << hex_digits(bits_of(p.scales.k[0]), 8)
       << " = " << number(p.scales.k[0]) << ", " << (L.format == PagedFormat::fp8 ? "v_scale " : "V tensor scale ")
       << hex_digits(bits_of(p.scales.v[0]), 8) << " = " << number(p.scales.v[0])
       << (p.shape.per_head_scales ? " (head 0 of per-head scales)" : "") << "\n";
  std::string pool;  // SGLang's buffers, in page order
  for (const auto& piece : p.pieces) pool += (pool.empty() ? "" : " | ") + piece.first;
  for (int b = 0; b < paged_buffers(L, p.token_head_scales); ++b)
    os << buffer_line(pool.empty() ? paged_buffer_name(L, b) : "the pool (" + pool + ")", c.bytes[b], c.addressed_mismatches[b], c.untouched_changed[b], p.before_known[b],
                      "bytes differ in the slots the tokens address", "changed outside them (bytes the port must leave as they were)");
  if (!c.first.empty()) os << "  first differences (buffer byte: page, position (slot); side, token, head, element: expected -> actual):\n";
  for (const PagedDifference& d : c.first) {
    os << "    " << byte_name(p, d.buffer, d.offset) << ": page " << d.page << ", position "
       << d.position << " (slot " << d.slot << "); ";
    if (d.token < 0) {
      os << "no token addresses this slot: held " << hex_digits(d.before, 2) << ", now " << hex_digits(d.actual, 2) << "\n";
      continue;
    }
    os << (d.side == KvSide::k ? "K" : "V") << " of token " << d.token << ", head " << d.head << ", ";
    if (d.scale && d.buffer >= 2) {
      os << "FP32 scale byte " << d.index << ": " << hex_digits(d.expected, 2) << " -> " << hex_digits(d.actual, 2) << "\n";
      continue;
    }
    if (d.scale) {
      os << "block scale " << d.index;
    } else if (L.format == PagedFormat::fp8) {
      const std::int64_t element = (d.token * L.heads + d.head) * L.head_dim + d.index;
      const auto& x = d.side == KvSide::k ? p.key : p.value;
      const float v = kernels::load_value(p.shape.input, x.data(), element);
      os << "dim " << d.index << " (input " << hex_digits(bits_of(v), 8) << " = " << exact_decimal(v) << ")";
    } else {
      os << "dims " << 2 * d.index << ", " << 2 * d.index + 1;
    }
    os << ": " << cache_byte(L, d, d.expected) << " -> " << cache_byte(L, d, d.actual) << "\n";
  }
  return os.str();
}

PagedIdentification identify_paged(const PagedPort& p, std::size_t nearest) {
  PagedIdentification id;
  const bool nvfp4 = p.shape.layout.format == PagedFormat::nvfp4;
  const FormatId element = nvfp4 ? FormatId::e2m1 : FormatId::e4m3fn;
  // Each named recipe of the page's element in each layout the same bytes may hold: NHD or HND
  // (same block_size and heads), and for an NVFP4 page each scale swizzle; the manifest's layout
  // is named only where another is tried.
  const ScaleSwizzle swizzles[] = {ScaleSwizzle::none, ScaleSwizzle::v_only, ScaleSwizzle::k_and_v};
  for (const NamedRecipe& named : kRecipes) {
    if (named.recipe.element != element || (p.token_head_scales && named.recipe.scale != BlockScale::tensor_only)) continue;
    for (const KvOrder order : {KvOrder::nhd, KvOrder::hnd})
      for (const ScaleSwizzle swizzle : swizzles) {
        if ((!nvfp4 && swizzle != ScaleSwizzle::none) || (!p.pieces.empty() && order != KvOrder::nhd)) continue;
        PagedPort q = p;
        q.shape.recipe = named.recipe;
        q.shape.layout.order = order;
        q.shape.layout.swizzle = swizzle;
        std::string name(named.name);
        if (order != p.shape.layout.order || swizzle != p.shape.layout.swizzle) {
          name += std::string(" (") + kernels::name_of(order);
          if (nvfp4) name += std::string(", scale swizzle ") + kernels::name_of(swizzle);
          name += ")";
        }
        PagedCandidate c{name, compare_paged(q, 0)};
        if (!c.comparison.error.ok()) continue;  // a recipe or layout the store does not take (a block scale, a swizzle)
        id.add(std::move(c));
      }
  }
  id.rank(nearest);
  return id;
}

}  // namespace kvq::ports
