#include "oracle/verify_rope.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "oracle/report_text.hpp"
#include "oracle/rope_oracle.hpp"

namespace kvq::ports {

using kernels::Attention;
using kernels::DType;
using kernels::KvLayout;
using kernels::RopeStyle;

namespace {

// ---- the element rule and its variants ----

float flushed(float v) { return v != 0.0f && std::fabs(v) < 0x1p-126f ? std::copysign(0.0f, v) : v; }

float rotate(const RopeArithmetic& a, float x, float p, float c, float s, bool first) {
  if (a.fma == RopeFma::none && !a.ftz) return kernels::rope_rotate(x, p, c, s, first);  // kvq's model
  const auto f = [&](float v) { return a.ftz ? flushed(v) : v; };
  x = f(x), p = f(p), c = f(c), s = f(s);
  switch (a.fma) {
    case RopeFma::none: {
      const float u = f(x * c), w = f(p * s);
      return f(first ? u - w : u + w);
    }
    case RopeFma::x_cos: {
      const float w = f(p * s);
      return f(std::fma(x, c, first ? -w : w));
    }
    case RopeFma::partner_sin: return f(std::fma(first ? -p : p, s, f(x * c)));
  }
  return 0.0f;
}

std::uint8_t code(const RopeArithmetic& a, DType input, float v, float scale) {
  if (a.scale == RopeScaleOp::multiply && a.saturate && !a.round_to_input && !a.ftz)
    return kernels::quantize_e4m3(v, scale);  // kvq's model
  if (a.round_to_input && input != DType::fp32) {
    std::uint16_t bits = 0;
    kernels::store_value(input, &bits, 0, v);
    v = kernels::load_value(input, &bits, 0);
  }
  const auto f = [&](float w) { return a.ftz ? flushed(w) : w; };
  v = f(v);
  float q = 0.0f;
  switch (a.scale) {
    case RopeScaleOp::multiply: q = v * f(scale); break;
    case RopeScaleOp::divide: q = v / f(scale); break;
    case RopeScaleOp::reciprocal: q = v * f(1.0f / scale); break;
  }
  q = f(q);
  if (a.saturate) return e4m3_satfinite_fast(q);
  return static_cast<std::uint8_t>(
      encode_float(kE4M3FN, convention_conversion(ConventionId::cuda_nosat, FormatId::e4m3fn, Rounding::nearest_even), q));
}

// ---- where every element goes ----

struct Site {
  int buffer = 0;
  std::int64_t offset = 0;
  std::int64_t token = 0, head = 0, dim = 0, page = -1, entry = -1;
  bool rotated = false, first = false;
  float x = 0, partner = 0, c = 0, s = 0, scale = 0;
};

// Calls visit(site) for every output element of the port's call, placed by FlashInfer's
// semantics (kernels/rope_append.hpp's header comment): the pairing of `style`, cos/sin from row
// pos_ids[i] of the cache, K and V of a non-padding token at its page and entry.
// cos/sin rows: the port's cache (row pos_ids[i]) or rows computed per token (row i).
struct CosSinRows {
  const std::vector<float>& rows;
  bool per_token = false;
};

template <typename Visit>
void for_each_site(const RopePort& p, RopeStyle style, const CosSinRows& cos_sin, Visit&& visit) {
  const kernels::RopeShape& s = p.shape;
  const int R = s.rope_dim, N = s.nope_dim(), D = s.head_dim, P = s.page_size, half = R / 2;
  const bool append = p.kind == RopeKind::append;
  for (std::int64_t i = 0; i < s.tokens; ++i) {
    std::int64_t page = -1, entry = -1;
    if (append) {
      const std::int32_t b = p.batch_indices[i];
      if (b < 0) continue;  // padding: nothing written, Q included
      const std::int64_t flat = static_cast<std::int64_t>(p.kv_indptr[b]) * P + p.positions[i];
      page = p.kv_indices[flat / P], entry = flat % P;
    }
    const float* cs = &cos_sin.rows[static_cast<std::size_t>(cos_sin.per_token ? i : p.pos_ids[i]) * R];
    const auto rope = [&](const std::vector<std::uint8_t>& raw, int heads, int head, float scale, int buffer,
                          std::int64_t out) {
      for (int j = 0; j < R; ++j) {
        const bool neox = style == RopeStyle::neox;
        const int partner = neox ? (j < half ? j + half : j - half) : (j ^ 1);
        const int f = neox ? (j < half ? j : j - half) : j / 2;
        const std::int64_t base = (i * heads + head) * R;
        Site e{buffer, out + j, i, head, j, page, entry, true, neox ? j < half : (j & 1) == 0};
        e.x = kernels::load_value(s.input, raw.data(), base + j);
        e.partner = kernels::load_value(s.input, raw.data(), base + partner);
        e.c = cs[f], e.s = cs[half + f], e.scale = scale;
        visit(e);
      }
    };
    const auto plain = [&](const std::vector<std::uint8_t>& raw, std::int64_t in, int count, int head, int dim0, float scale,
                           int buffer, std::int64_t out) {
      for (int j = 0; j < count; ++j) {
        Site e{buffer, out + j, i, head, dim0 + j, page, entry};
        e.x = kernels::load_value(s.input, raw.data(), in + j);
        e.scale = scale;
        visit(e);
      }
    };
    for (int h = 0; h < s.q_heads; ++h) {
      rope(p.q_rope, s.q_heads, h, p.quant_scale_q, 0, (i * s.q_heads + h) * R);
      plain(p.q_nope, (i * s.q_heads + h) * N, N, h, R, p.quant_scale_q, 1, (i * s.q_heads + h) * N);
    }
    for (int h = 0; h < s.kv_heads; ++h) {
      const std::int64_t in_nope = (i * s.kv_heads + h) * N;
      if (!append) {
        rope(p.k_rope, s.kv_heads, h, p.quant_scale_kv, 2, (i * s.kv_heads + h) * R);
        plain(p.k_nope, in_nope, N, h, R, p.quant_scale_kv, 3, in_nope);
      } else if (s.mla()) {
        rope(p.k_rope, 1, 0, p.quant_scale_kv, 3, (page * P + entry) * R);
        plain(p.k_nope, in_nope, N, 0, R, p.quant_scale_kv, 2, (page * P + entry) * N);
      } else {
        const std::int64_t vec = s.layout == KvLayout::nhd ? (page * P + entry) * s.kv_heads + h : (page * s.kv_heads + h) * P + entry;
        rope(p.k_rope, s.kv_heads, h, p.quant_scale_kv, 2, vec * D);
        plain(p.k_nope, in_nope, N, h, R, p.quant_scale_kv, 2, vec * D + R);
        plain(p.v, (i * s.kv_heads + h) * D, D, h, 0, p.quant_scale_kv, 3, vec * D);
      }
    }
  }
}

std::uint8_t site_code(const RopePort& p, const RopeArithmetic& a, const Site& e) {
  return rope_element_code(a, p.shape.input, e.x, e.partner, e.c, e.s, e.first, e.rotated, e.scale);
}

bool finite(float v) { return std::isfinite(v); }

// The rotated differences checked against the bound (each a 100-digit computation): the first these many.
constexpr std::int64_t kBoundChecks = 20000;

// The cos/sin a port computes (RopeCosSin), a row per token [tokens, rope_dim] (cos of frequencies
// 0..rope_dim/2-1, then their sin), each the FP32 nearest to the 100-digit value
// (oracle/rope_oracle.hpp); each position computed once.
std::vector<float> computed_cos_sin(const RopePort& p, RopeCosSin mode) {
  const int R = p.shape.rope_dim, half = R / 2;
  std::vector<float> table(p.pos_ids.size() * static_cast<std::size_t>(R), 0.0f);
  std::map<std::int32_t, std::size_t> first;  // position -> the first token's row
  for (std::size_t i = 0; i < p.pos_ids.size(); ++i) {
    const std::int32_t pos = p.pos_ids[i];
    float* row = &table[i * static_cast<std::size_t>(R)];
    if (const auto it = first.find(pos); it != first.end()) {
      std::copy_n(&table[it->second * static_cast<std::size_t>(R)], R, row);
      continue;
    }
    first[pos] = i;
    for (int f = 0; f < half; ++f) {
      const oracle::RopeAngle a = mode == RopeCosSin::exact_angle ? oracle::rope_angle(pos, f, R, p.rope_theta)
                                                                  : oracle::rope_fp32_angle(pos, f, R, p.rope_theta);
      row[f] = oracle::fp32_nearest(a.cos);
      row[half + f] = oracle::fp32_nearest(a.sin);
    }
  }
  return table;
}

// Why the port's cos/sin under `mode` cannot be had, or "".
std::string cos_sin_error(const RopePort& p, RopeCosSin mode) {
  if (mode == RopeCosSin::cache && p.cos_sin_cache.empty())
    return "the port was given no cos_sin_cache: name a computed cos/sin (parameters.cos_sin) with rope_theta";
  if (mode != RopeCosSin::cache && !(p.rope_theta > 0.0 && std::isfinite(p.rope_theta)))
    return std::string("cos/sin ") + name_of(mode) + " needs parameters.rope_theta (the base, > 0)";
  return {};
}

// compare under `a` with the cos/sin rows `table` (the port's cache where a reads it, else computed).
RopeComparison compare(const RopePort& p, const RopeArithmetic& a, std::size_t keep, bool bounds, const RopeScope& scope,
                       const std::vector<float>& table);

RopeComparison compare(const RopePort& p, const RopeArithmetic& a, std::size_t keep, bool bounds, const RopeScope& scope) {
  if (a.cos_sin == RopeCosSin::cache) return compare(p, a, keep, bounds, scope, p.cos_sin_cache);
  RopeComparison c;
  if (auto e = cos_sin_error(p, a.cos_sin); !e.empty()) {
    c.error = e;
    return c;
  }
  if (c.error = validate_rope(p); !c.error.ok()) return c;
  return compare(p, a, keep, bounds, scope, computed_cos_sin(p, a.cos_sin));
}

RopeComparison compare(const RopePort& p, const RopeArithmetic& a, std::size_t keep, bool bounds, const RopeScope& scope,
                       const std::vector<float>& table) {
  RopeComparison c;
  c.error = validate_rope(p);
  if (!c.error.ok()) return c;
  if (auto e = cos_sin_error(p, a.cos_sin); !e.empty()) {
    c.error = e;
    return c;
  }
  std::vector<std::uint8_t> expected[kRopeBuffers], addressed[kRopeBuffers];
  for (int b = 0; b < kRopeBuffers; ++b) {
    expected[b] = p.before[b];
    addressed[b].assign(p.before[b].size(), 0);
    c.bytes[b] = static_cast<std::int64_t>(p.after[b].size());
  }
  const CosSinRows rows{table, a.cos_sin != RopeCosSin::cache};
  for_each_site(p, a.style, rows, [&](const Site& e) {
    expected[e.buffer][e.offset] = site_code(p, a, e);
    addressed[e.buffer][e.offset] = 1;
  });
  std::map<std::pair<int, std::int64_t>, std::size_t> shown;  // (buffer, offset) -> index in c.first
  for (int b = 0; b < kRopeBuffers; ++b) {
    for (std::int64_t k = 0; scope.buffers[b] && k < c.bytes[b]; ++k) {
      if (p.after[b][k] == expected[b][k]) continue;
      ++(addressed[b][k] ? c.addressed_mismatches : c.untouched_changed)[b];
      if (c.first.size() < keep) {
        RopeDifference d;
        d.buffer = b, d.offset = k, d.before = p.before[b][k], d.expected = expected[b][k], d.actual = p.after[b][k];
        d.addressed = addressed[b][k] != 0;
        shown[{b, k}] = c.first.size();
        c.first.push_back(d);
      }
    }
  }
  if (!bounds && shown.empty()) return c;
  for_each_site(p, a.style, rows, [&](const Site& e) {  // details of the shown differences; the bound of rotated ones
    const std::uint8_t got = p.after[e.buffer][e.offset];
    const bool differs = scope.buffers[e.buffer] && got != expected[e.buffer][e.offset];
    bool within = false;
    if (bounds && differs && e.rotated && c.rotated_mismatches < kBoundChecks) {
      ++c.rotated_mismatches;
      if (finite(e.x) && finite(e.partner) && finite(e.c) && finite(e.s) && finite(e.scale)) {
        const oracle::RopeBound rb = oracle::rope_bound(e.x, e.partner, e.c, e.s, {oracle::wide_of(e.c), oracle::wide_of(e.s)},
                                                        e.first, e.scale);
        within = oracle::e4m3_between(rb.lo, got, rb.hi);
        c.rotated_within_bound += within ? 1 : 0;
      }
    }
    const auto it = shown.find({e.buffer, e.offset});
    if (it == shown.end()) return;
    RopeDifference& d = c.first[it->second];
    d.token = e.token, d.head = e.head, d.dim = e.dim, d.page = e.page, d.entry = e.entry, d.rotated = e.rotated;
    d.x = e.x, d.partner = e.partner, d.c = e.c, d.s = e.s, d.scale = e.scale, d.within_bound = within;
  });
  return c;
}

std::string fp32(float v) { return hex_digits(bits_of(v), 8) + " = " + number(v); }

}  // namespace

std::uint8_t rope_element_code(const RopeArithmetic& a, DType input, float x, float partner, float c, float s, bool first,
                               bool rotated, float scale) {
  return code(a, input, rotated ? rotate(a, x, partner, c, s, first) : x, scale);
}

int RopeArithmetic::changes(const RopeArithmetic& d) const {
  return (style != d.style) + (fma != d.fma) + (ftz != d.ftz) + (scale != d.scale) + (saturate != d.saturate) +
         (round_to_input != d.round_to_input) + (cos_sin != d.cos_sin);
}

const char* name_of(RopeCosSin c) {
  switch (c) {
    case RopeCosSin::cache: return "cache";
    case RopeCosSin::exact_angle: return "computed-exact-angle";
    case RopeCosSin::fp32_angle: return "computed-fp32-angle";
  }
  return "";
}

std::string RopeArithmetic::phrase() const {
  std::string s = style == RopeStyle::neox ? "NeoX pairs" : "GPT-J pairs";
  s += fma == RopeFma::none ? ", no FMA" : (fma == RopeFma::x_cos ? ", fma(x, cos, -/+RN(partner*sin))" : ", fma(-/+partner, sin, RN(x*cos))");
  if (ftz) s += ", flush to zero";
  if (scale == RopeScaleOp::divide) s += ", value / quant_scale";
  if (scale == RopeScaleOp::reciprocal) s += ", value * RN(1/quant_scale)";
  if (!saturate) s += ", NaN on overflow (no satfinite)";
  if (round_to_input) s += ", rotated value rounded to the input dtype";
  if (cos_sin == RopeCosSin::exact_angle) s += ", cos/sin computed (nearest FP32 to those of pos * theta^(-2f/rot))";
  if (cos_sin == RopeCosSin::fp32_angle) s += ", cos/sin computed (nearest FP32 to those of the FP32 angle RN(pos * RN(theta^(-2f/rot))))";
  return s;
}

bool RopeComparison::exact() const { return error.ok() && differing() == 0; }
std::int64_t RopeComparison::differing() const {
  std::int64_t n = 0;
  for (int b = 0; b < kRopeBuffers; ++b) n += addressed_mismatches[b] + untouched_changed[b];
  return n;
}

const char* rope_buffer_name(const RopePort& p, int buffer) {
  static const char* quantize[] = {"q_rope_out", "q_nope_out", "k_rope_out", "k_nope_out"};
  static const char* mha[] = {"q_rope_out", "q_nope_out", "k_cache", "v_cache"};
  static const char* mla[] = {"q_rope_out", "q_nope_out", "ckv_cache", "kpe_cache"};
  return (p.kind == RopeKind::quantize ? quantize : (p.shape.mla() ? mla : mha))[buffer];
}

std::int64_t rope_buffer_bytes(const RopePort& p, int buffer) {
  const kernels::RopeShape& s = p.shape;
  switch (buffer) {
    case 0: return s.q_rope_bytes();
    case 1: return s.q_nope_bytes();
    case 2:
      if (p.kind == RopeKind::quantize) return s.tokens * s.kv_heads * s.rope_dim;
      return s.mla() ? s.ckv_bytes(s.cache_slots()) : s.k_bytes(s.cache_slots());
    case 3:
      if (p.kind == RopeKind::quantize) return s.tokens * s.kv_heads * s.nope_dim();
      return s.mla() ? s.kpe_bytes(s.cache_slots()) : s.v_bytes(s.cache_slots());
  }
  return 0;
}

Status validate_rope(const RopePort& p) {
  const kernels::RopeShape& s = p.shape;
  if (Status e = kernels::validate(s); !e.ok()) return e;
  for (int b = 0; b < kRopeBuffers; ++b)
    if (static_cast<std::int64_t>(p.after[b].size()) != rope_buffer_bytes(p, b) || p.before[b].size() != p.after[b].size())
      return std::string(rope_buffer_name(p, b)) + ": " + std::to_string(p.after[b].size()) + " bytes, expected " +
             std::to_string(rope_buffer_bytes(p, b));
  if (!p.cos_sin_cache.empty() && static_cast<std::int64_t>(p.cos_sin_cache.size()) != s.max_pos * s.rope_dim)
    return "cos_sin_cache: must be [max_pos, rope_dim] float32";
  if (static_cast<std::int64_t>(p.pos_ids.size()) != s.tokens) return "pos_ids: must hold one entry a token";
  if (p.kind == RopeKind::quantize) {
    for (std::int64_t i = 0; i < s.tokens; ++i)
      if (p.pos_ids[i] < 0 || p.pos_ids[i] >= s.max_pos)
        return "pos_ids[" + std::to_string(i) + "] = " + std::to_string(p.pos_ids[i]) + " is outside the cos_sin_cache's " +
               std::to_string(s.max_pos) + " rows";
    return {};
  }
  const kernels::PageTable t{p.kv_indptr.data(), p.kv_indices.data(), p.batch_indices.data(), p.positions.data()};
  return kernels::validate_indices(s, p.pos_ids.data(), t);
}

RopeComparison compare_rope(const RopePort& p, const RopeArithmetic& a, std::size_t keep, const RopeScope& scope) {
  return compare(p, a, keep, true, scope);
}

std::string describe_rope(const RopePort& p, const RopeArithmetic& a, const RopeComparison& c) {
  const kernels::RopeShape& s = p.shape;
  std::ostringstream os;
  os << "kvq verify " << (p.kind == RopeKind::quantize ? "rope-quantize" : "rope-append") << ": "
     << (c.exact() ? "BIT-EXACT" : "MISMATCH") << " (model: " << a.phrase() << ")\n";
  if (!c.error.ok()) {
    os << "  the model rejects the port's arguments: " << c.error << "\n";
    return os.str();
  }
  os << "  " << s.tokens << " tokens, " << (s.mla() ? "MLA" : "MHA") << ", " << s.q_heads << " q heads, " << s.kv_heads
     << " kv heads, rope_dim " << s.rope_dim << ", nope_dim " << s.nope_dim() << ", " << kernels::name_of(s.input)
     << "; quant_scale_q " << fp32(p.quant_scale_q) << ", quant_scale_kv " << fp32(p.quant_scale_kv);
  if (p.kind == RopeKind::append)
    os << "; " << s.num_pages << " pages of " << s.page_size << " (" << (s.layout == KvLayout::nhd ? "NHD" : "HND") << ")";
  os << "\n";
  for (int b = 0; b < kRopeBuffers; ++b) {
    if (c.bytes[b] == 0) continue;
    // rope-quantize writes every byte of its outputs: nothing goes unchecked without a poison.
    const bool checked = p.before_known[b] || p.kind == RopeKind::quantize;
    os << buffer_line(rope_buffer_name(p, b), c.bytes[b], c.addressed_mismatches[b], c.untouched_changed[b], checked,
                      "elements differ", "bytes no element addresses changed");
  }
  if (c.rotated_mismatches)
    os << "  rotated elements that differ: " << c.rotated_within_bound << " of " << c.rotated_mismatches
       << (c.rotated_mismatches == kBoundChecks ? " (the first checked)" : "")
       << " within the FP32 model's derived bound (docs/rope.md \"Error bound\", with the cache's cos/sin as exact)\n";
  if (!c.first.empty()) os << "  first differences (buffer byte: token, head, dim [page, entry]; inputs; expected -> actual):\n";
  for (const RopeDifference& d : c.first) {
    os << "    " << rope_buffer_name(p, d.buffer) << " byte " << d.offset << ": ";
    if (!d.addressed) {
      os << "no element addresses this byte: held " << hex_digits(d.before, 2) << ", now " << hex_digits(d.actual, 2) << "\n";
      continue;
    }
    os << "token " << d.token << ", head " << d.head << ", dim " << d.dim;
    if (d.page >= 0) os << " [page " << d.page << ", entry " << d.entry << "]";
    os << "; x " << fp32(d.x);
    if (d.rotated) os << ", partner " << fp32(d.partner) << ", cos " << fp32(d.c) << ", sin " << fp32(d.s);
    os << ", scale " << fp32(d.scale) << "; " << hex_digits(d.expected, 2) << " (" << number(decode_float(kE4M3FN, d.expected))
       << ") -> " << hex_digits(d.actual, 2) << " (" << number(decode_float(kE4M3FN, d.actual)) << ")";
    if (d.rotated) os << (d.within_bound ? ", within the bound" : ", outside the bound");
    os << "\n";
  }
  return os.str();
}

RopeIdentification identify_rope(const RopePort& p, std::size_t nearest) {
  RopeIdentification id;
  RopeArithmetic base;
  base.style = p.shape.style;
  base.cos_sin = p.cos_sin_cache.empty() ? RopeCosSin::exact_angle : RopeCosSin::cache;
  std::vector<RopeCandidate> all;
  // The cos/sin sources the port's data allows: its cache, and with rope_theta the computed ones
  // (each table computed once; the port's arguments are validated first).
  if (!validate_rope(p).ok()) return id;
  std::vector<std::pair<RopeCosSin, std::vector<float>>> sources;
  for (const RopeCosSin cs : {RopeCosSin::cache, RopeCosSin::exact_angle, RopeCosSin::fp32_angle})
    if (cos_sin_error(p, cs).empty())
      sources.emplace_back(cs, cs == RopeCosSin::cache ? p.cos_sin_cache : computed_cos_sin(p, cs));
  for (const auto& [cos_sin, table] : sources)
    for (const RopeStyle style : {RopeStyle::neox, RopeStyle::gptj})
      for (const RopeFma fma : {RopeFma::none, RopeFma::x_cos, RopeFma::partner_sin})
        for (const bool ftz : {false, true})
          for (const RopeScaleOp op : {RopeScaleOp::multiply, RopeScaleOp::divide, RopeScaleOp::reciprocal})
            for (const bool saturate : {true, false})
              for (const bool round : {false, true}) {
                const RopeArithmetic a{style, fma, ftz, op, saturate, round, cos_sin};
                RopeCandidate c{a, compare(p, a, 0, false, {}, table)};
                if (!c.comparison.error.ok()) return id;  // the port's arguments: no variant can read them
                all.push_back(std::move(c));
              }
  std::stable_sort(all.begin(), all.end(), [&](const RopeCandidate& x, const RopeCandidate& y) {
    return x.arithmetic.changes(base) < y.arithmetic.changes(base);
  });
  for (RopeCandidate& c : all) id.add(std::move(c));
  id.rank(nearest);
  return id;
}

}  // namespace kvq::ports
