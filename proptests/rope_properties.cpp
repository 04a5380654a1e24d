// Fused RoPE + FP8 quantize + paged append (kernels/rope_append.hpp, docs/rope.md).
// Suite "rope" (CPU): the twin against an FP32 model written here (its own index arithmetic, the
// codec for E4M3) over whole poisoned caches, and sampled elements against the oracle's rational
// model; the model against the exact rotation within the derived bound; fused == unfused;
// NHD == HND and GPT-J == NeoX after their permutations; errors naming the argument.
// Suite "gpu": the device kernels == the CPU twins, byte for byte.
#include <algorithm>
#include <array>
#include <functional>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "formats/conventions.hpp"
#include "formats/float_bits.hpp"
#include "kernels/rope_append.hpp"
#include "oracle/rope_oracle.hpp"
#include "oracle/verify_rope.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/layout_mutants.hpp"
#include "proptests/harness/mix32.hpp"
#include "proptests/harness/rapidcheck_bridge.hpp"

namespace kvq::props {
namespace {

using kernels::Attention;
using kernels::DType;
using kernels::KvLayout;
using kernels::RopeShape;
using kernels::RopeStyle;

using Bytes = std::vector<std::uint8_t>;
using Indices = std::vector<std::int32_t>;

struct RopeProblem {
  RopeShape s;
  Indices indptr, indices, batch_indices, positions, pos_ids;
  Bytes q_rope, q_nope, k_rope, k_nope, v;  // raw input values of type s.input
  std::vector<float> cos_sin;
  float scale_q = 1.0f, scale_kv = 1.0f;
};

void showValue(const RopeProblem& p, std::ostream& os) {
  const RopeShape& s = p.s;
  os << kernels::name_of(s.attention) << " " << kernels::name_of(s.style) << " " << kernels::name_of(s.layout) << " "
     << kernels::name_of(s.input) << " tokens " << s.tokens << " batch " << s.batch << " heads " << s.q_heads << "/"
     << s.kv_heads << " head_dim " << s.head_dim << " rope_dim " << s.rope_dim << " page_size " << s.page_size
     << " pages " << s.num_pages << " max_pos " << s.max_pos << " scales " << hex_code(kFP32, bits_of(p.scale_q)) << "/"
     << hex_code(kFP32, bits_of(p.scale_kv)) << "\n  kv_indptr";
  for (auto x : p.indptr) os << " " << x;
  os << "\n  kv_indices";
  for (auto x : p.indices) os << " " << x;
  os << "\n  batch_indices";
  for (auto x : p.batch_indices) os << " " << x;
  os << "\n  positions";
  for (auto x : p.positions) os << " " << x;
  os << "\n  pos_ids";
  for (auto x : p.pos_ids) os << " " << x;
}

std::uint32_t hash(std::uint64_t seed, std::uint64_t i) { return mix32(seed * 0x9E3779B97F4A7C15ull + i); }

// One input value: mostly moderate magnitudes (so rotations and scales land across E4M3's range),
// with zeros, FP32 subnormals, huge values, inf and NaN when `specials`.
float rope_value(std::uint64_t seed, std::uint64_t i, bool specials) {
  const std::uint32_t h = hash(seed, i);
  if (specials) {
    switch (h % 32) {
      case 0: return 0.0f;
      case 1: return -0.0f;
      case 2: return float_from_bits(hash(h, 1));  // any bit pattern (NaN and inf included)
      case 3: return float_from_bits(hash(h, 2) & 0x807fffffu);  // subnormal
      case 4: return (h & 64) ? INFINITY : -INFINITY;
      default: break;
    }
  }
  const float unit = static_cast<float>(static_cast<std::int32_t>(hash(h, 3))) * 0x1p-31f;  // (-1, 1)
  return std::ldexp(unit, static_cast<int>(h % 13) - 4);
}

Bytes input_values(DType t, std::int64_t count, std::uint64_t seed, bool specials) {
  Bytes out(static_cast<std::size_t>(count) * kernels::bytes_of(t));
  for (std::int64_t i = 0; i < count; ++i)
    kernels::store_value(t, out.data(), i, rope_value(seed, static_cast<std::uint64_t>(i), specials));  // RNE
  return out;
}

// Element i of a raw input, through the codec (not the kernels' loads).
float value_at(DType t, const Bytes& raw, std::int64_t i) {
  if (t == DType::fp32) {
    float v;
    std::memcpy(&v, &raw[i * 4], 4);
    return v;
  }
  std::uint16_t b;
  std::memcpy(&b, &raw[i * 2], 2);
  return decode_float(t == DType::bf16 ? kBF16 : kFP16, b);
}

// A random batch: ragged requests with existing prefixes, pages shuffled over the cache with spare
// pages never addressed, padding tokens (negative batch index, any position and pos_id) mixed in.
// inputs = false: the shape and page table only (no Q/K/V values, no cos/sin cache), for the append.
rc::Gen<RopeProblem> gen_rope_problem(int max_len, int max_kv_heads, bool specials, bool inputs = true) {
  return rc::gen::exec([=] {
    RopeProblem p;
    RopeShape& s = p.s;
    s.attention = *rc::gen::weightedElement<Attention>({{3, Attention::mha}, {1, Attention::mla}});
    s.style = *rc::gen::element(RopeStyle::neox, RopeStyle::gptj);
    s.layout = *rc::gen::element(KvLayout::nhd, KvLayout::hnd);
    s.input = *rc::gen::element(DType::bf16, DType::fp16, DType::fp32);
    if (s.mla()) {
      s.kv_heads = 1;
      s.q_heads = *rc::gen::inRange(1, 9);
      const int shape = *rc::gen::weightedElement<int>({{1, 0}, {1, 1}, {3, 2}});  // 8+16, 16+32, 64+512
      s.rope_dim = shape == 0 ? 8 : (shape == 1 ? 16 : 64);
      s.head_dim = s.rope_dim + (shape == 0 ? 16 : (shape == 1 ? 32 : 512));
    } else {
      s.kv_heads = *rc::gen::inRange(1, max_kv_heads + 1);
      s.q_heads = s.kv_heads * *rc::gen::element(1, 2, 4);  // GQA ratios
      s.head_dim = *rc::gen::weightedElement<int>({{1, 8}, {1, 24}, {3, 64}, {2, 128}, {2, 256}});
      const int choice = *rc::gen::inRange(0, 3);
      s.rope_dim = choice == 0 ? s.head_dim : (choice == 1 ? s.head_dim / 2 : 2 * *rc::gen::inRange(1, s.head_dim / 2 + 1));
    }
    s.page_size = *rc::gen::element(1, 2, 3, 4, 5, 8, 16, 32, 64, 128, 256);
    s.batch = *rc::gen::inRange(1, 6);
    const std::uint64_t seed = *rc::gen::arbitrary<std::uint32_t>();
    struct Token {
      std::int32_t b, position;
    };
    std::vector<Token> tokens;
    p.indptr = {0};
    for (std::int64_t b = 0; b < s.batch; ++b) {
      const int prefix = *rc::gen::inRange(0, 70), length = *rc::gen::inRange(0, max_len + 1);
      const int pages = (prefix + length + s.page_size - 1) / s.page_size + *rc::gen::inRange(0, 2);
      p.indptr.push_back(p.indptr.back() + pages);
      for (int k = 0; k < length; ++k) tokens.push_back({static_cast<std::int32_t>(b), prefix + k});
    }
    const int padding = *rc::gen::inRange(0, 4);
    for (int k = 0; k < padding; ++k)
      tokens.push_back({-1 - static_cast<std::int32_t>(hash(seed, 100 + k) % 3), static_cast<std::int32_t>(hash(seed, 200 + k) % 5000) - 100});
    for (std::size_t k = tokens.size(); k > 1; --k) std::swap(tokens[k - 1], tokens[hash(seed, 300 + k) % k]);
    s.num_page_indices = p.indptr.back();
    s.num_pages = s.num_page_indices + *rc::gen::inRange(0, 3);
    Indices pages(s.num_pages);
    for (std::int64_t k = 0; k < s.num_pages; ++k) pages[k] = static_cast<std::int32_t>(k);
    for (std::size_t k = pages.size(); k > 1; --k) std::swap(pages[k - 1], pages[hash(seed, 400 + k) % k]);
    p.indices.assign(pages.begin(), pages.begin() + s.num_page_indices);
    const int offset = *rc::gen::element(0, 3, 1000);  // pos_ids and positions are independent inputs
    std::int32_t max_pos_id = 0;
    for (const Token& t : tokens) {
      p.batch_indices.push_back(t.b);
      p.positions.push_back(t.position);
      const bool pad = t.b < 0;
      p.pos_ids.push_back(pad ? static_cast<std::int32_t>(hash(seed, t.position + 500)) : t.position + offset);
      if (!pad) max_pos_id = std::max(max_pos_id, t.position + offset);
    }
    s.tokens = static_cast<std::int64_t>(tokens.size());
    s.max_pos = max_pos_id + 1 + *rc::gen::inRange(0, 3);
    const std::int64_t rope = s.rope_dim, nope = s.nope_dim();
    if (!inputs) return p;
    p.q_rope = input_values(s.input, s.tokens * s.q_heads * rope, seed + 1, specials);
    p.q_nope = input_values(s.input, s.tokens * s.q_heads * nope, seed + 2, specials);
    p.k_rope = input_values(s.input, s.tokens * s.kv_heads * rope, seed + 3, specials);
    p.k_nope = input_values(s.input, s.tokens * s.kv_heads * nope, seed + 4, specials);
    if (!s.mla()) p.v = input_values(s.input, s.tokens * s.kv_heads * s.head_dim, seed + 5, specials);
    p.cos_sin.resize(static_cast<std::size_t>(s.max_pos * rope));
    for (std::size_t k = 0; k < p.cos_sin.size(); ++k) {
      const std::uint32_t h = hash(seed + 6, k);
      p.cos_sin[k] = specials && h % 64 == 0 ? float_from_bits(hash(h, 7))
                                             : static_cast<float>(static_cast<std::int32_t>(h)) * 0x1p-31f;
    }
    p.scale_q = std::ldexp(1.0f + static_cast<float>(hash(seed, 8) % 256) / 256.0f, static_cast<int>(hash(seed, 9) % 13) - 4);
    p.scale_kv = std::ldexp(1.0f + static_cast<float>(hash(seed, 10) % 256) / 256.0f, static_cast<int>(hash(seed, 11) % 13) - 4);
    if (specials && hash(seed, 12) % 8 == 0) p.scale_kv = *rc::gen::element(0.0f, INFINITY, -1.0f, 0x1p-149f);
    return p;
  });
}

// Every output of a run: Q, and the whole cache (or the unfused pair's intermediate).
struct RopeOutputs {
  Bytes q_rope, q_nope, k, v, ckv, kpe;
  bool operator==(const RopeOutputs&) const = default;
};

RopeOutputs poisoned(const RopeShape& s, std::int64_t slots, std::uint8_t poison) {
  const auto bytes = [](std::int64_t n) { return static_cast<std::size_t>(std::max<std::int64_t>(n, 0)); };  // bad shapes
  RopeOutputs o;
  o.q_rope.assign(bytes(s.q_rope_bytes()), poison);
  o.q_nope.assign(bytes(s.q_nope_bytes()), poison);
  o.k.assign(bytes(s.k_bytes(slots)), poison);
  o.v.assign(bytes(s.v_bytes(slots)), poison);
  o.ckv.assign(bytes(s.ckv_bytes(slots)), poison);
  o.kpe.assign(bytes(s.kpe_bytes(slots)), poison);
  return o;
}

kernels::QOutputs q_views(RopeOutputs& o) { return {o.q_rope.data(), o.q_nope.data()}; }
kernels::KvBuffers kv_views(RopeOutputs& o) { return {o.k.data(), o.v.data(), o.ckv.data(), o.kpe.data()}; }

kernels::RopeInputs inputs_of(const RopeProblem& p) {
  kernels::RopeInputs in;
  in.q_rope = p.q_rope.data();
  in.q_nope = p.q_nope.data();
  in.k_rope = p.k_rope.data();
  in.k_nope = p.k_nope.data();
  in.v = p.v.empty() ? nullptr : p.v.data();
  in.cos_sin_cache = p.cos_sin.data();
  in.pos_ids = p.pos_ids.data();
  in.quant_scale_q = p.scale_q;
  in.quant_scale_kv = p.scale_kv;
  return in;
}

kernels::PageTable table_of(const RopeProblem& p) {
  return {p.indptr.data(), p.indices.data(), p.batch_indices.data(), p.positions.data()};
}

void require(const std::string& e) {
  if (!e.empty()) throw std::runtime_error(e);
}

RopeOutputs run_fused_cpu(const RopeProblem& p, std::uint8_t poison) {
  RopeOutputs o = poisoned(p.s, p.s.cache_slots(), poison);
  require(kernels::rope_append_cpu(p.s, inputs_of(p), q_views(o), kv_views(o), table_of(p)).message());
  return o;
}

RopeOutputs run_unfused_cpu(const RopeProblem& p, std::uint8_t poison) {
  RopeOutputs o = poisoned(p.s, p.s.cache_slots(), poison);
  RopeOutputs mid = poisoned(p.s, p.s.tokens, poison);
  require(kernels::rope_quantize_cpu(p.s, inputs_of(p), q_views(o), kv_views(mid), p.batch_indices.data()).message());
  require(kernels::append_paged_cpu(p.s, kv_views(mid), kv_views(o), table_of(p)).message());
  return o;
}

std::uint8_t e4m3_codec(float v) {
  return static_cast<std::uint8_t>(encode_float(
      kE4M3FN, convention_conversion(ConventionId::cuda_satfinite, FormatId::e4m3fn, Rounding::nearest_even), v));
}

// Element j of the rope vector of token i (index base into the raw input): its pair partner,
// frequency, and whether it is the first (subtracting) element of the pair.
struct RopePair {
  int partner, frequency;
  bool first;
};
RopePair pair_of(const RopeShape& s, int j) {
  const int h = s.rope_dim / 2;
  if (s.style == RopeStyle::neox) return j < h ? RopePair{j + h, j, true} : RopePair{j - h, j - h, false};
  return {j ^ 1, j / 2, (j & 1) == 0};
}

// Where every element of a token goes, and what FP32 inputs produce it; calls visit(buffer, byte
// offset, x, partner, c, s, first, scale, rotated) for each output element. Index arithmetic written
// from docs/rope.md, not taken from the kernels.
struct ElementSite {
  Bytes RopeOutputs::*buffer;
  std::int64_t offset;
  float x, partner, c, s, scale;
  bool first, rotated;
};
template <typename Visit>
void for_each_element(const RopeProblem& p, Visit&& visit) {
  const RopeShape& s = p.s;
  const int R = s.rope_dim, N = s.nope_dim(), D = s.head_dim, P = s.page_size, H = R / 2;
  for (std::int64_t i = 0; i < s.tokens; ++i) {
    const std::int32_t b = p.batch_indices[i];
    if (b < 0) continue;
    const std::int64_t flat = static_cast<std::int64_t>(p.indptr[b]) * P + p.positions[i];
    const std::int64_t page = p.indices[flat / P], entry = flat % P;
    const float* cs = &p.cos_sin[static_cast<std::size_t>(p.pos_ids[i]) * R];
    auto rope_site = [&](const Bytes& raw, int heads, int head, int j, float scale, Bytes RopeOutputs::*buffer,
                         std::int64_t offset) {
      const RopePair q = pair_of(s, j);
      const std::int64_t base = (i * heads + head) * R;
      visit(ElementSite{buffer, offset, value_at(s.input, raw, base + j), value_at(s.input, raw, base + q.partner),
                        cs[q.frequency], cs[H + q.frequency], scale, q.first, true});
    };
    auto plain_site = [&](const Bytes& raw, std::int64_t index, float scale, Bytes RopeOutputs::*buffer,
                          std::int64_t offset) {
      visit(ElementSite{buffer, offset, value_at(s.input, raw, index), 0.0f, 0.0f, 0.0f, scale, false, false});
    };
    for (int h = 0; h < s.q_heads; ++h) {
      for (int j = 0; j < R; ++j) rope_site(p.q_rope, s.q_heads, h, j, p.scale_q, &RopeOutputs::q_rope, (i * s.q_heads + h) * R + j);
      for (int j = 0; j < N; ++j)
        plain_site(p.q_nope, (i * s.q_heads + h) * N + j, p.scale_q, &RopeOutputs::q_nope, (i * s.q_heads + h) * N + j);
    }
    if (s.mla()) {
      const std::int64_t row = page * P + entry;
      for (int j = 0; j < R; ++j) rope_site(p.k_rope, 1, 0, j, p.scale_kv, &RopeOutputs::kpe, row * R + j);
      for (int j = 0; j < N; ++j) plain_site(p.k_nope, i * N + j, p.scale_kv, &RopeOutputs::ckv, row * N + j);
      continue;
    }
    for (int h = 0; h < s.kv_heads; ++h) {
      const std::int64_t vec = s.layout == KvLayout::nhd ? (page * P + entry) * s.kv_heads + h
                                                         : (page * s.kv_heads + h) * P + entry;
      for (int j = 0; j < R; ++j) rope_site(p.k_rope, s.kv_heads, h, j, p.scale_kv, &RopeOutputs::k, vec * D + j);
      for (int j = 0; j < N; ++j)
        plain_site(p.k_nope, (i * s.kv_heads + h) * N + j, p.scale_kv, &RopeOutputs::k, vec * D + R + j);
      for (int j = 0; j < D; ++j)
        plain_site(p.v, (i * s.kv_heads + h) * D + j, p.scale_kv, &RopeOutputs::v, vec * D + j);
    }
  }
}

// The FP32 model (docs/rope.md) in host arithmetic (-ffp-contract=off): RN(RN(x*c) -/+ RN(y*s)),
// RN(. * scale), E4M3 by the codec. The rest of the poisoned buffers stays as it was.
std::uint8_t model_code(const ElementSite& e) {
  float v = e.x;
  if (e.rotated) {
    const float a = e.x * e.c, b = e.partner * e.s;
    v = e.first ? a - b : a + b;
  }
  return e4m3_codec(v * e.scale);
}

RopeOutputs expected_outputs(const RopeProblem& p, std::uint8_t poison) {
  RopeOutputs o = poisoned(p.s, p.s.cache_slots(), poison);
  for_each_element(p, [&](const ElementSite& e) { (o.*e.buffer)[e.offset] = model_code(e); });
  return o;
}

std::string first_difference(const RopeOutputs& got, const RopeOutputs& want) {
  const std::pair<const char*, Bytes RopeOutputs::*> buffers[] = {
      {"q_rope_out", &RopeOutputs::q_rope}, {"q_nope_out", &RopeOutputs::q_nope}, {"k_cache", &RopeOutputs::k},
      {"v_cache", &RopeOutputs::v},         {"ckv_cache", &RopeOutputs::ckv},     {"kpe_cache", &RopeOutputs::kpe}};
  for (const auto& [name, member] : buffers) {
    const Bytes &a = got.*member, &b = want.*member;
    if (a.size() != b.size()) return std::string(name) + " sizes differ";
    for (std::size_t k = 0; k < a.size(); ++k)
      if (a[k] != b[k]) {
        std::ostringstream os;
        os << name << " byte " << k << ": got " << hex_code(kE4M3FN, a[k]) << ", expected " << hex_code(kE4M3FN, b[k]);
        return os.str();
      }
  }
  return {};
}

// Permutations: HND -> NHD of a cache buffer of `dim`-byte head vectors; GPT-J -> NeoX of the rope
// part (offset .. offset + rope_dim) of every `stride`-byte vector: NeoX element f is GPT-J's 2f,
// element f + rope_dim/2 is GPT-J's 2f + 1.
Bytes hnd_to_nhd(const RopeShape& s, const Bytes& hnd, int dim) {
  Bytes nhd(hnd.size());
  for (std::int64_t page = 0; page < s.num_pages; ++page)
    for (int h = 0; h < s.kv_heads; ++h)
      for (int e = 0; e < s.page_size; ++e)
        std::memcpy(&nhd[((page * s.page_size + e) * s.kv_heads + h) * dim],
                    &hnd[((page * s.kv_heads + h) * s.page_size + e) * dim], dim);
  return nhd;
}

template <typename T>
std::vector<T> permute_rope(const std::vector<T>& v, std::int64_t stride, int offset, int rope_dim, bool to_neox) {
  std::vector<T> out = v;
  const int h = rope_dim / 2;
  for (std::int64_t base = offset; base - offset + stride <= static_cast<std::int64_t>(v.size()); base += stride)
    for (int f = 0; f < h; ++f) {
      const std::int64_t neox[2] = {base + f, base + h + f}, gptj[2] = {base + 2 * f, base + 2 * f + 1};
      for (int k = 0; k < 2; ++k) (to_neox ? out[neox[k]] : out[gptj[k]]) = to_neox ? v[gptj[k]] : v[neox[k]];
    }
  return out;
}

// Raw inputs permuted element-wise (value size bytes_of(t)): rope vectors of rope_dim values.
Bytes permute_rope_input(const Bytes& raw, DType t, int rope_dim) {
  const int w = kernels::bytes_of(t);
  std::vector<std::array<std::uint8_t, 4>> values(raw.size() / w);
  for (std::size_t k = 0; k < values.size(); ++k) std::memcpy(values[k].data(), &raw[k * w], w);
  values = permute_rope(values, rope_dim, 0, rope_dim, false);
  Bytes out(raw.size());
  for (std::size_t k = 0; k < values.size(); ++k) std::memcpy(&out[k * w], values[k].data(), w);
  return out;
}

// ---- the bound of the FP32 model against the exact rotation (one element) ----

struct BoundCase {
  float x = 0, y = 0, scale = 1;
  std::int64_t pos = 0;
  int frequency = 0, rot = 2;
  double base = 10000.0;
  int cache = 0;  // 0: correctly rounded, 1: +-k ulps off, 2: built like engines (FP32 angle)
  int ulps_c = 0, ulps_s = 0;
  bool first = true;
};

void showValue(const BoundCase& b, std::ostream& os) {
  os << "x " << hex_code(kFP32, bits_of(b.x)) << " partner " << hex_code(kFP32, bits_of(b.y)) << " scale "
     << hex_code(kFP32, bits_of(b.scale)) << " pos " << b.pos << " f " << b.frequency << " rot " << b.rot << " base "
     << b.base << " cache " << b.cache << " (" << b.ulps_c << ", " << b.ulps_s << " ulps) "
     << (b.first ? "first" : "second") << " of pair";
}

float step_ulps(float v, int k) {
  for (int i = 0; i < std::abs(k); ++i) v = std::nextafter(v, k > 0 ? INFINITY : -INFINITY);
  return v;
}

// Elements across E4M3's range (|x * scale| about 2^-12 .. 2^12), and, one case in three, aimed
// at an E4M3 rounding boundary: x chosen (in double, then nudged by FP32 ulps) so that the rotated,
// scaled value lies within a few FP32 ulps of the midpoint of two E4M3 codes.
rc::Gen<BoundCase> gen_bound_case() {
  return rc::gen::exec([] {
    BoundCase b;
    auto value = [](int lo, int hi) {
      const std::uint32_t m = *rc::gen::inRange<std::uint32_t>(0, 1u << 23);
      const int e = *rc::gen::inRange(lo, hi);
      const float v = std::ldexp(1.0f + static_cast<float>(m) * 0x1p-23f, e);
      return *rc::gen::arbitrary<bool>() ? -v : v;
    };
    b.rot = *rc::gen::element(64, 128, 256, 2, 8);
    b.frequency = *rc::gen::inRange(0, b.rot / 2);
    b.pos = *rc::gen::weightedOneOf<std::int64_t>({{3, rc::gen::inRange<std::int64_t>(0, 4096)},
                                                    {1, rc::gen::inRange<std::int64_t>(0, std::int64_t{1} << 20)}});
    b.base = *rc::gen::element(10000.0, 500000.0, 1000000.0);
    b.cache = *rc::gen::weightedElement<int>({{4, 0}, {2, 1}, {1, 2}});
    if (b.cache == 1) {
      b.ulps_c = *rc::gen::inRange(-4, 5);
      b.ulps_s = *rc::gen::inRange(-4, 5);
    }
    b.first = *rc::gen::arbitrary<bool>();
    b.scale = std::fabs(value(-4, 5));
    b.x = *rc::gen::weightedOneOf<float>({{6, rc::gen::exec([&] { return value(-8, 7); })},
                                          {1, rc::gen::element(0.0f, -0.0f, 1.0f, 448.0f)},
                                          {1, rc::gen::exec([&] { return value(-140, -120); })}});
    b.y = *rc::gen::weightedOneOf<float>({{6, rc::gen::exec([&] { return value(-8, 7); })},
                                          {1, rc::gen::just(b.x)},
                                          {1, rc::gen::element(0.0f, 1.0f)}});
    const double theta = static_cast<double>(b.pos) * std::pow(b.base, -2.0 * b.frequency / b.rot);
    const double c = std::cos(theta), s = std::sin(theta);
    if (*rc::gen::inRange(0, 3) == 0 && std::fabs(c) > 0.01) {
      const int code = *rc::gen::inRange(1, 126);  // magnitudes: midpoint of codes k and k + 1
      const double mid = (decode_float(kE4M3FN, code) + decode_float(kE4M3FN, code + 1)) / 2.0;
      const double target = (*rc::gen::arbitrary<bool>() ? -mid : mid) / b.scale;
      // first: x c - y s = target; second: x c + y s = target.
      const double x = (b.first ? target + b.y * s : target - b.y * s) / c;
      b.x = step_ulps(static_cast<float>(x), *rc::gen::inRange(-3, 4));
    }
    return b;
  });
}

// ---- device runs ----

class DeviceArena {  // device buffers freed together
 public:
  ~DeviceArena() {
    for (void* p : owned_) kernels::device::release(p);
  }
  template <typename T>
  T* put(const std::vector<T>& host) {
    void* p = nullptr;
    if (error.empty()) error = kernels::device::allocate(&p, host.size() * sizeof(T)).message();
    if (p) owned_.push_back(p);
    if (error.empty() && !host.empty()) error = kernels::device::upload(p, host.data(), host.size() * sizeof(T)).message();
    return static_cast<T*>(p);
  }
  template <typename T>
  void get(std::vector<T>* host, const T* device) {
    if (error.empty() && !host->empty()) error = kernels::device::download(host->data(), device, host->size() * sizeof(T)).message();
  }
  std::string error;

 private:
  std::vector<void*> owned_;
};

struct DeviceOutputs {
  kernels::QOutputs q;
  kernels::KvBuffers kv;
};
DeviceOutputs put_outputs(DeviceArena& a, const RopeOutputs& o) {
  return {{a.put(o.q_rope), a.put(o.q_nope)}, {a.put(o.k), a.put(o.v), a.put(o.ckv), a.put(o.kpe)}};
}
void get_outputs(DeviceArena& a, const DeviceOutputs& d, RopeOutputs* o) {
  a.get(&o->q_rope, d.q.q_rope);
  a.get(&o->q_nope, d.q.q_nope);
  a.get(&o->k, d.kv.k);
  a.get(&o->v, d.kv.v);
  a.get(&o->ckv, d.kv.ckv);
  a.get(&o->kpe, d.kv.kpe);
}

// The fused kernel, or the unfused pair, on the GPU over poisoned outputs (warps a token: 0, the
// launcher's choice, or 2, 4, 8).
std::string run_device(const RopeProblem& p, bool fused, std::uint8_t poison, RopeOutputs* out, int warps_per_token = 0) {
  DeviceArena a;
  kernels::RopeInputs in = inputs_of(p);
  in.q_rope = a.put(p.q_rope);
  in.q_nope = a.put(p.q_nope);
  in.k_rope = a.put(p.k_rope);
  in.k_nope = a.put(p.k_nope);
  in.v = p.s.mla() ? nullptr : a.put(p.v);
  in.cos_sin_cache = a.put(p.cos_sin);
  in.pos_ids = a.put(p.pos_ids);
  const kernels::PageTable t{a.put(p.indptr), a.put(p.indices), a.put(p.batch_indices), a.put(p.positions)};
  *out = poisoned(p.s, p.s.cache_slots(), poison);
  const DeviceOutputs d = put_outputs(a, *out);
  const RopeOutputs mid_host = poisoned(p.s, p.s.tokens, poison);
  const DeviceOutputs mid = put_outputs(a, mid_host);
  std::string e = a.error;
  if (e.empty() && fused) e = kernels::device::rope_append(p.s, in, d.q, d.kv, t, nullptr, warps_per_token).message();
  if (e.empty() && !fused)
    e = kernels::device::rope_quantize(p.s, in, d.q, mid.kv, t.batch_indices, nullptr, warps_per_token).message();
  if (e.empty() && !fused) e = kernels::device::append_paged(p.s, mid.kv, d.kv, t, nullptr).message();
  if (e.empty()) e = kernels::device::synchronize().message();
  if (e.empty()) get_outputs(a, d, out);
  return e.empty() ? a.error : e;
}

// ---- bad input ----

// A valid MHA problem of two requests, to break one argument at a time.
RopeProblem small_problem() {
  RopeProblem p;
  RopeShape& s = p.s;
  s.input = DType::fp32;
  s.tokens = 3;
  s.batch = 2;
  s.q_heads = 2;
  s.kv_heads = 1;
  s.head_dim = 8;
  s.rope_dim = 4;
  s.max_pos = 8;
  s.page_size = 2;
  s.num_pages = 4;
  s.num_page_indices = 3;
  p.indptr = {0, 1, 3};
  p.indices = {3, 0, 1};
  p.batch_indices = {0, 1, -1};
  p.positions = {1, 2, 0};
  p.pos_ids = {1, 2, 0};
  p.q_rope = input_values(s.input, 3 * 2 * 4, 1, false);
  p.q_nope = input_values(s.input, 3 * 2 * 4, 2, false);
  p.k_rope = input_values(s.input, 3 * 4, 3, false);
  p.k_nope = input_values(s.input, 3 * 4, 4, false);
  p.v = input_values(s.input, 3 * 8, 5, false);
  p.cos_sin.assign(8 * 4, 0.5f);
  return p;
}

// ---- Crafted elements (docs/rope.md "Arithmetic variants"), worked out by hand, u = 2^-24 ----
//
// 1. The first of a NeoX pair, x = 3.5, cos = 1 - 3u, partner = 4.875 - 3 * 2^-21, sin = 0.5, scale 1:
//    x * cos = 3.5 - 10.5u lies between the FP32 neighbours 3.5 - 12u and 3.5 - 8u (a step of 4u
//    there), nearer the first: RN(x * cos) = 3.5 - 12u; partner * sin = 2.4375 - 12u exactly; their
//    difference is exactly 1.0625, the E4M3 midpoint of 1 and 1.125, which goes to even: 0x38. A
//    compiler that contracts x * cos into an FMA computes RN(3.5 - 10.5u - 2.4375 + 12u) =
//    RN(1.0625 + 1.5u) = 1.0625 + 2u (a step of 2u), past the midpoint: 0x39.
// 2. x = 2^-100, cos = 2^-30, partner = sin = 0, scale 2^127: x * cos = 2^-130, an FP32 subnormal, times
//    2^127 is 0.125: 0x20. Flushed to zero (-use_fast_math): 0x00.
struct CraftedElement {
  const char* what;
  float x, partner, c, s, scale;
  std::uint8_t code;
};
const CraftedElement kCraftedElements[] = {
    {"x*cos rounded before the subtraction (no FMA)", 3.5f, 4.875f - 3 * 0x1p-21f, 1.0f - 3 * 0x1p-24f, 0.5f, 1.0f, 0x38},
    {"a subnormal product kept (no flush to zero)", 0x1p-100f, 0.0f, 0x1p-30f, 0.0f, 0x1p127f, 0x20},
};

// One token, one Q and one K head of rope_dim 2 (NeoX; element 0 is x, element 1 its partner), FP32
// inputs, a cos_sin row (cos, sin), one page of one slot; V zero.
RopeProblem crafted_problem(const CraftedElement& e) {
  RopeProblem p;
  RopeShape& s = p.s;
  s.attention = kernels::Attention::mha;
  s.input = DType::fp32;
  s.style = RopeStyle::neox;
  s.layout = KvLayout::nhd;
  s.tokens = 1, s.batch = 1, s.q_heads = 1, s.kv_heads = 1, s.rope_dim = 2, s.head_dim = 2;
  s.max_pos = 1, s.page_size = 1, s.num_pages = 1, s.num_page_indices = 1;
  const auto raw = [](float a, float b) {
    Bytes out(8);
    std::memcpy(out.data(), &a, 4);
    std::memcpy(out.data() + 4, &b, 4);
    return out;
  };
  p.q_rope = p.k_rope = raw(e.x, e.partner);
  p.v = raw(0.0f, 0.0f);
  p.cos_sin = {e.c, e.s};
  p.indptr = {0, 1}, p.indices = {0}, p.batch_indices = {0}, p.positions = {0}, p.pos_ids = {0};
  p.scale_q = p.scale_kv = e.scale;
  return p;
}

// A port's element arithmetic with one -use_fast_math habit (the RoPE mutants): the variant's rule
// of the verifier (ports::rope_element_code), over the whole call as expected_outputs places it.
RopeOutputs outputs_with(const RopeProblem& p, std::uint8_t poison, RopeElementBug bug) {
  ports::RopeArithmetic a;
  a.style = p.s.style;
  a.fma = bug == RopeElementBug::fma_x_cos ? ports::RopeFma::x_cos : ports::RopeFma::none;
  a.ftz = bug == RopeElementBug::flush_to_zero;
  RopeOutputs o = poisoned(p.s, p.s.cache_slots(), poison);
  for_each_element(p, [&](const ElementSite& e) {
    (o.*e.buffer)[e.offset] = ports::rope_element_code(a, p.s.input, e.x, e.partner, e.c, e.s, e.first, e.rotated, e.scale);
  });
  return o;
}

}  // namespace

// rope/crafted-elements-by-hand: Q's and K's first element of each crafted call == the code worked
// out by hand, from kvq's fused twin, the CUDA launcher (device), or a port with `bug`.
Outcome rope_crafted_vs_hand(const RunContext& ctx, RopeElementBug bug, bool device) {
  Tally tally;
  for (const CraftedElement& e : kCraftedElements) {
    const RopeProblem p = crafted_problem(e);
    RopeOutputs got;
    std::string error;
    if (device) error = run_device(p, true, 0xA5, &got);
    else got = bug == RopeElementBug::none ? run_fused_cpu(p, 0xA5) : outputs_with(p, 0xA5, bug);
    if (!error.empty()) {
      tally.fail(std::string(e.what) + ": " + error);
      continue;
    }
    for (const auto& [name, byte] : {std::pair{"q_rope_out", got.q_rope[0]}, std::pair{"k_cache", got.k[0]}}) {
      if (byte == e.code) tally.pass();
      else tally.fail(std::string(e.what) + ": " + name + " element 0 is " + hex_code(kE4M3FN, byte) + ", by hand " +
                      hex_code(kE4M3FN, e.code));
    }
  }
  return tally.outcome(ctx);
}

namespace {

void register_rope_properties() {
  const auto fewer = [](const RunContext& ctx, int divisor) {
    RunContext c = ctx;
    c.cases = std::max(1, ctx.cases / divisor);
    return c;
  };

  // The twin against the FP32 model over the whole (poisoned) cache and Q outputs: every addressed
  // byte is the model's code, every other byte (spare pages, unaddressed slots, padding tokens'
  // slots and Q rows) keeps its poison; sampled elements also against the oracle's rational model.
  add_property("rope", "twin-equals-fp32-model-only-addressed-bytes-change", Device::cpu,
               [fewer](const RunContext& ctx) {
                 const auto problems = gen_rope_problem(16, 4, true);
                 return check_random(fewer(ctx, 4), [&] {
                   const RopeProblem p = *problems;
                   for (const std::uint8_t poison : {std::uint8_t{0x00}, std::uint8_t{0xA5}}) {
                     const RopeOutputs got = run_fused_cpu(p, poison);
                     const std::string diff = first_difference(got, expected_outputs(p, poison));
                     RC_ASSERT(diff == std::string());
                   }
                   const RopeOutputs got = run_fused_cpu(p, 0x5A);
                   std::uint64_t k = 0;
                   for_each_element(p, [&](const ElementSite& e) {
                     if (hash(p.s.tokens, k++) % 97 != 0) return;  // a sample: the rational model is slow
                     const std::uint8_t want = e.rotated ? oracle::rope_model_e4m3(e.x, e.partner, e.c, e.s, e.first, e.scale)
                                                         : oracle::scale_model_e4m3(e.x, e.scale);
                     RC_ASSERT(hex_code(kE4M3FN, (got.*e.buffer)[e.offset]) == hex_code(kE4M3FN, want));
                   });
                 });
               });

  // The launchers' warps a token (rope_warps_per_token): the fewest of 2, 4, 8 whose grid,
  // ceil(tokens * warps / 8) blocks, fills one wave of 4 blocks an SM. Edges worked out by hand from
  // that rule for an H100 (132 SMs: 528 blocks) and for an SM count of 0 (taken as 1: 4 blocks).
  add_property("rope", "warps-per-token-rule", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    struct Case {
      std::int64_t tokens;
      int sms, warps;
    };
    for (const Case c : {Case{1, 132, 8}, Case{256, 132, 8}, Case{1054, 132, 8}, Case{1055, 132, 4}, Case{2108, 132, 4},
                         Case{2109, 132, 2}, Case{16384, 132, 2}, Case{6, 0, 8}, Case{7, 0, 4}, Case{15, 0, 2}}) {
      const int got = kernels::rope_warps_per_token(c.tokens, c.sms);
      if (got == c.warps) tally.pass();
      else tally.fail(std::to_string(c.tokens) + " tokens, " + std::to_string(c.sms) + " SMs: " + std::to_string(got) +
                      " warps a token, expected " + std::to_string(c.warps));
    }
    return tally.outcome(ctx);
  });
  add_property("rope", "fused-equals-unfused", Device::cpu, [fewer](const RunContext& ctx) {
    const auto problems = gen_rope_problem(16, 4, true);
    return check_random(fewer(ctx, 10), [&] {
      const RopeProblem p = *problems;
      RC_ASSERT(first_difference(run_unfused_cpu(p, 0xC3), run_fused_cpu(p, 0xC3)) == std::string());
    });
  });

  add_property("rope", "nhd-equals-hnd-after-permutation", Device::cpu, [fewer](const RunContext& ctx) {
    const auto problems = gen_rope_problem(10, 4, false);
    return check_random(fewer(ctx, 10), [&] {
      RopeProblem p = *problems;
      RC_PRE(!p.s.mla());  // one KV head: the layouts coincide
      p.s.layout = KvLayout::nhd;
      const RopeOutputs nhd = run_fused_cpu(p, 0x3C);
      p.s.layout = KvLayout::hnd;
      RopeOutputs hnd = run_fused_cpu(p, 0x3C);
      hnd.k = hnd_to_nhd(p.s, hnd.k, p.s.head_dim);
      hnd.v = hnd_to_nhd(p.s, hnd.v, p.s.head_dim);
      RC_ASSERT(first_difference(hnd, nhd) == std::string());
    });
  });

  add_property("rope", "gptj-equals-neox-after-permutation", Device::cpu, [fewer](const RunContext& ctx) {
    const auto problems = gen_rope_problem(10, 4, true);
    return check_random(fewer(ctx, 10), [&] {
      RopeProblem p = *problems;
      const RopeShape& s = p.s;
      p.s.style = RopeStyle::neox;
      const RopeOutputs neox = run_fused_cpu(p, 0x99);
      p.s.style = RopeStyle::gptj;
      p.q_rope = permute_rope_input(p.q_rope, s.input, s.rope_dim);
      p.k_rope = permute_rope_input(p.k_rope, s.input, s.rope_dim);
      RopeOutputs gptj = run_fused_cpu(p, 0x99);
      gptj.q_rope = permute_rope(gptj.q_rope, s.rope_dim, 0, s.rope_dim, true);
      if (s.mla()) {
        gptj.kpe = permute_rope(gptj.kpe, s.rope_dim, 0, s.rope_dim, true);
      } else {
        gptj.k = permute_rope(gptj.k, s.head_dim, 0, s.rope_dim, true);
      }
      RC_ASSERT(first_difference(gptj, neox) == std::string());
    });
  });

  // docs/rope.md "Error bound": the model's code lies between the E4M3 roundings of z - E and z + E
  // (z the exact rotated, scaled value); within 1 E4M3 ulp of round(z) when E < 2^-10; and E < 2^-10
  // whenever the cache is correctly rounded and scale * (|x| + |partner|) <= 2^11. The twin's element
  // code equals the rational model on each case.
  add_property("rope", "fp32-model-within-derived-bound-of-exact-rotation", Device::cpu, [fewer](const RunContext& ctx) {
    const auto cases = gen_bound_case();
    int exact = 0, one_ulp = 0, wide = 0;  // model == round(z); 1 ulp away; E >= 2^-10
    Outcome out = check_random(fewer(ctx, 2), [&] {
      const BoundCase b = *cases;
      const oracle::RopeAngle angle = oracle::rope_angle(b.pos, b.frequency, b.rot, b.base);
      float c = oracle::fp32_nearest(angle.cos), s = oracle::fp32_nearest(angle.sin);
      if (b.cache == 1) {
        c = step_ulps(c, b.ulps_c);
        s = step_ulps(s, b.ulps_s);
      } else if (b.cache == 2) {  // FP32 inv_freq and angle, then cos/sin of that angle
        const float inv_freq = 1.0f / static_cast<float>(std::pow(b.base, 2.0 * b.frequency / b.rot));
        const float theta = static_cast<float>(b.pos) * inv_freq;
        c = static_cast<float>(std::cos(static_cast<double>(theta)));
        s = static_cast<float>(std::sin(static_cast<double>(theta)));
      }
      const std::uint8_t model = oracle::rope_model_e4m3(b.x, b.y, c, s, b.first, b.scale);
      const std::uint8_t twin = kernels::quantize_e4m3(kernels::rope_rotate(b.x, b.y, c, s, b.first), b.scale);
      RC_ASSERT(hex_code(kE4M3FN, twin) == hex_code(kE4M3FN, model));
      const oracle::RopeBound bound = oracle::rope_bound(b.x, b.y, c, s, angle, b.first, b.scale);
      RC_ASSERT(oracle::e4m3_between(bound.lo, model, bound.hi));
      const oracle::Wide limit = boost::multiprecision::ldexp(oracle::Wide(1), -10);
      const std::int64_t ulps = oracle::ulp_distance(kE4M3FN, bound.nearest, model);
      if (bound.e < limit) RC_ASSERT(std::abs(ulps) <= 1);
      const oracle::Wide reach = oracle::wide_of(b.scale) * (boost::multiprecision::abs(oracle::wide_of(b.x)) +
                                                             boost::multiprecision::abs(oracle::wide_of(b.y)));
      if (b.cache == 0 && reach <= 2048) RC_ASSERT(bound.e < limit);
      ++(bound.e >= limit ? wide : (ulps == 0 ? exact : one_ulp));
    });
    out.classes = {{"model == round(exact)", exact}, {"model 1 ulp from round(exact)", one_ulp}, {"E >= 2^-10", wide}};
    return out;
  });

  // Bad input: an error naming the argument, and nothing written.
  add_property("rope", "bad-input-errors-name-the-argument", Device::cpu, [](const RunContext& ctx) {
    Tally tally;
    const RopeProblem good = small_problem();
    const RopeOutputs untouched = poisoned(good.s, good.s.cache_slots(), 0xEE);
    auto expect = [&](const char* what, const std::function<void(RopeProblem&)>& spoil, const std::string& word) {
      RopeProblem p = good;
      spoil(p);
      RopeOutputs fused = untouched, unfused = untouched, mid = poisoned(p.s, p.s.tokens, 0xEE);
      const kvq::Status e = kernels::rope_append_cpu(p.s, inputs_of(p), q_views(fused), kv_views(fused), table_of(p));
      std::string e2 = kernels::rope_quantize_cpu(p.s, inputs_of(p), q_views(unfused), kv_views(mid), p.batch_indices.data()).message();
      if (e2.empty()) e2 = kernels::append_paged_cpu(p.s, kv_views(mid), kv_views(unfused), table_of(p)).message();
      const bool named = e.message().find(word) != std::string::npos && e2.find(word) != std::string::npos;
      unfused.q_rope = untouched.q_rope;  // (a) may have run: only (b)'s cache must be untouched
      unfused.q_nope = untouched.q_nope;
      if (named && fused == untouched && unfused == untouched) {
        tally.pass();
      } else {
        tally.fail(std::string(what) + ": expected errors naming '" + word + "' and no write, got '" + e.message() + "' / '" + e2 + "'");
      }
    };
    {
      RopeOutputs o = untouched;
      const kvq::Status e = kernels::rope_append_cpu(good.s, inputs_of(good), q_views(o), kv_views(o), table_of(good));
      if (e.ok() && o != untouched) tally.pass(); else tally.fail("the valid problem was rejected: " + e.message());
    }
    expect("indptr not monotonic", [](RopeProblem& p) { p.indptr = {0, 4, 3}; }, "non-decreasing");
    expect("indptr last", [](RopeProblem& p) { p.indptr[2] = 2; }, "kv_indptr[batch]");
    expect("indptr first", [](RopeProblem& p) { p.indptr[0] = 1; }, "kv_indptr[0]");
    expect("page index", [](RopeProblem& p) { p.indices[1] = 4; }, "kv_indices[1]");
    expect("negative page index", [](RopeProblem& p) { p.indices[0] = -1; }, "kv_indices[0]");
    expect("request index", [](RopeProblem& p) { p.batch_indices[0] = 2; }, "batch_indices[0]");
    expect("position beyond pages", [](RopeProblem& p) { p.positions[0] = 2; }, "positions[0] = 2 is beyond request 0");
    expect("negative position", [](RopeProblem& p) { p.positions[1] = -1; }, "positions[1]");
    expect("same slot", [](RopeProblem& p) { p.batch_indices[2] = 1; p.positions[2] = 2; }, "same slot");
    const auto shape_errors = [&](const char* what, const std::function<void(RopeShape&)>& spoil, const std::string& word) {
      expect(what, [&](RopeProblem& p) { spoil(p.s); }, word);
    };
    shape_errors("rope_dim odd", [](RopeShape& s) { s.rope_dim = 3; }, "rope_dim");
    shape_errors("rope_dim > head_dim", [](RopeShape& s) { s.rope_dim = 10; }, "rope_dim");
    shape_errors("rope_dim 0", [](RopeShape& s) { s.rope_dim = 0; }, "rope_dim");
    shape_errors("page_size", [](RopeShape& s) { s.page_size = 0; }, "page_size");
    shape_errors("q_heads", [](RopeShape& s) { s.q_heads = 0; }, "q_heads");
    shape_errors("kv_heads", [](RopeShape& s) { s.kv_heads = 0; }, "kv_heads");
    shape_errors("MLA kv_heads", [](RopeShape& s) { s.attention = Attention::mla; s.kv_heads = 2; }, "kv_heads");
    shape_errors("max_pos", [](RopeShape& s) { s.max_pos = 0; }, "max_pos");
    shape_errors("tokens", [](RopeShape& s) { s.tokens = -1; }, "tokens");
    // pos_ids and scales: the RoPE kernels (the append alone reads neither).
    auto expect_rope = [&](const char* what, const std::function<void(RopeProblem&)>& spoil, const std::string& word) {
      RopeProblem p = good;
      spoil(p);
      RopeOutputs fused = untouched, unfused = untouched, mid = poisoned(p.s, p.s.tokens, 0xEE);
      const kvq::Status e = kernels::rope_append_cpu(p.s, inputs_of(p), q_views(fused), kv_views(fused), table_of(p));
      const std::string e2 =
          kernels::rope_quantize_cpu(p.s, inputs_of(p), q_views(unfused), kv_views(mid), p.batch_indices.data()).message();
      if (e.message().find(word) != std::string::npos && e2.find(word) != std::string::npos && fused == untouched &&
          unfused == untouched) {
        tally.pass();
      } else {
        tally.fail(std::string(what) + ": expected errors naming '" + word + "', got '" + e.message() + "' / '" + e2 + "'");
      }
    };
    expect_rope("pos_id", [](RopeProblem& p) { p.pos_ids[1] = 8; }, "pos_ids[1] = 8");
    expect_rope("negative pos_id", [](RopeProblem& p) { p.pos_ids[0] = -3; }, "pos_ids[0]");
    expect_rope("NaN quant_scale_q", [](RopeProblem& p) { p.scale_q = NAN; }, "quant_scale_q");
    expect_rope("NaN quant_scale_kv", [](RopeProblem& p) { p.scale_kv = NAN; }, "quant_scale_kv");
    expect_rope("null v", [](RopeProblem& p) { p.v.clear(); }, "v must not be null");
    // A padding token's pos_id and position are never read.
    {
      RopeProblem p = good;
      p.pos_ids[2] = 1 << 30;
      p.positions[2] = -7;
      RopeOutputs o = untouched;
      const kvq::Status e = kernels::rope_append_cpu(p.s, inputs_of(p), q_views(o), kv_views(o), table_of(p));
      if (e.ok()) tally.pass(); else tally.fail("padding token's pos_id/position rejected: " + e.message());
    }
    return tally.outcome(ctx);
  });

  // GPU: the kernels equal the CPU twins byte for byte, over two poison bytes, with the launcher's
  // choice of warps a token and with each of 2, 4 and 8 forced.
  for (const bool fused : {true, false}) {
    const std::string name = std::string("rope/") + (fused ? "fused" : "unfused") + "/device-vs-cpu-twin";
    add_property("gpu", name, Device::cuda, [fused, fewer](const RunContext& ctx) {
      std::string why;
      if (!kernels::device::available(&why)) return skipped(why);
      const auto problems = gen_rope_problem(120, 8, true);  // up to 600 tokens; the twins take most of the time
      return check_random(fewer(ctx, 40), [&] {
        const RopeProblem p = *problems;
        for (const std::uint8_t poison : {std::uint8_t{0x00}, std::uint8_t{0xA5}}) {
          const RopeOutputs want = fused ? run_fused_cpu(p, poison) : run_unfused_cpu(p, poison);
          for (const int warps : {0, 2, 4, 8}) {
            RopeOutputs got;
            const std::string e = run_device(p, fused, poison, &got, warps);
            RC_ASSERT(e == std::string());
            RC_ASSERT(first_difference(got, want) == std::string());
          }
        }
      });
    });
  }
  // The append kernel on batches large enough for chunks of up to 32 tokens a warp (up to 300,000
  // tokens, one KV head): random intermediate bytes, device == CPU twin over the poisoned cache.
  add_property("gpu", "rope/append/device-vs-cpu-twin-many-tokens", Device::cuda, [fewer](const RunContext& ctx) {
    std::string why;
    if (!kernels::device::available(&why)) return skipped(why);
    const auto problems = gen_rope_problem(60000, 1, false, false);
    return check_random(fewer(ctx, 8), [&] {
      const RopeProblem p = *problems;
      RopeOutputs mid = poisoned(p.s, p.s.tokens, 0);
      std::uint32_t k = 0;
      for (Bytes* b : {&mid.k, &mid.v, &mid.ckv, &mid.kpe})
        for (std::uint8_t& byte : *b) byte = static_cast<std::uint8_t>(hash(p.s.tokens, k++));
      RopeOutputs want = poisoned(p.s, p.s.cache_slots(), 0x5A), got = want;
      require(kernels::append_paged_cpu(p.s, kv_views(mid), kv_views(want), table_of(p)).message());
      DeviceArena a;
      const kernels::PageTable t{a.put(p.indptr), a.put(p.indices), a.put(p.batch_indices), a.put(p.positions)};
      const DeviceOutputs d = put_outputs(a, got), m = put_outputs(a, mid);
      std::string e = a.error;
      if (e.empty()) e = kernels::device::append_paged(p.s, m.kv, d.kv, t, nullptr).message();
      if (e.empty()) e = kernels::device::synchronize().message();
      if (e.empty()) get_outputs(a, d, &got);
      RC_ASSERT((e.empty() ? a.error : e) == std::string());
      RC_ASSERT(first_difference(got, want) == std::string());
    });
  });
  // The device never writes for a token it cannot place (index arrays are not validated on the device):
  // a corrupted token gives exactly the bytes of the same problem with that token as padding.
  add_property("gpu", "rope/fused/device-skips-unplaceable-tokens", Device::cuda, [fewer](const RunContext& ctx) {
    std::string why;
    if (!kernels::device::available(&why)) return skipped(why);
    // Problems with a real token (suchThat retries at growing sizes; a precondition would give up
    // when few cases run, as under compute-sanitizer).
    const auto problems = rc::gen::suchThat(gen_rope_problem(40, 4, false), [](const RopeProblem& p) {
      return std::any_of(p.batch_indices.begin(), p.batch_indices.end(), [](std::int32_t b) { return b >= 0; });
    });
    return check_random(fewer(ctx, 10), [&] {
      RopeProblem p = *problems;
      std::vector<std::int64_t> real;
      for (std::int64_t i = 0; i < p.s.tokens; ++i)
        if (p.batch_indices[i] >= 0) real.push_back(i);
      const std::int64_t i = real[*rc::gen::inRange<std::size_t>(0, real.size())];
      const int how = *rc::gen::inRange(0, 4), k = *rc::gen::inRange(0, 3);
      RopeProblem padded = p;
      padded.batch_indices[i] = -1;
      const std::int32_t b = p.batch_indices[i];
      if (how == 0) p.batch_indices[i] = static_cast<std::int32_t>(p.s.batch) + k;
      if (how == 1) p.positions[i] = (p.indptr[b + 1] - p.indptr[b]) * p.s.page_size + k;
      if (how == 2) p.positions[i] = -1 - k;
      if (how == 3) p.pos_ids[i] = static_cast<std::int32_t>(p.s.max_pos) + k;
      RopeOutputs got;
      const std::string e = run_device(p, true, 0x77, &got);
      RC_ASSERT(e == std::string());
      RC_ASSERT(first_difference(got, run_fused_cpu(padded, 0x77)) == std::string());
    });
  });
  add_property("gpu", "rope/launchers-reject-bad-shapes", Device::cuda, [](const RunContext& ctx) {
    std::string why;
    if (!kernels::device::available(&why)) return skipped(why);
    Tally tally;
    RopeProblem p = small_problem();
    p.s.rope_dim = 3;
    RopeOutputs o = poisoned(p.s, p.s.cache_slots(), 0);
    const kvq::Status e = kernels::device::rope_append(p.s, inputs_of(p), q_views(o), kv_views(o), table_of(p), nullptr);
    if (e.message().find("rope_dim") != std::string::npos) tally.pass(); else tally.fail("rope_append: '" + e.message() + "'");
    p = small_problem();
    p.scale_kv = NAN;
    const std::string e2 = kernels::device::rope_quantize(p.s, inputs_of(p), q_views(o), kv_views(o), nullptr, nullptr).message();
    if (e2.find("quant_scale_kv") != std::string::npos) tally.pass(); else tally.fail("rope_quantize: '" + e2 + "'");
    p = small_problem();
    const std::string e3 = kernels::device::rope_append(p.s, inputs_of(p), q_views(o), kv_views(o), table_of(p), nullptr, 3).message();
    if (e3.find("warps_per_token") != std::string::npos) tally.pass(); else tally.fail("rope_append, 3 warps a token: '" + e3 + "'");
    return tally.outcome(ctx);
  });
}
KVQ_REGISTER_PROPERTIES(register_rope_properties);

void register_rope_crafted() {
  add_property("rope", "crafted-elements-by-hand", Device::cpu,
               [](const RunContext& ctx) { return rope_crafted_vs_hand(ctx, RopeElementBug::none, false); });
  add_property("gpu", "rope/crafted-elements-by-hand", Device::cuda, [](const RunContext& ctx) {
    std::string why;
    if (!kernels::device::available(&why)) return skipped(why);
    return rope_crafted_vs_hand(ctx, RopeElementBug::none, true);
  });
}
KVQ_REGISTER_PROPERTIES(register_rope_crafted);

}  // namespace
}  // namespace kvq::props
