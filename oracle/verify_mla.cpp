#include "oracle/verify_mla.hpp"

#include <cstring>
#include <sstream>

#include "formats/float_bits.hpp"
#include "formats/recipe_names.hpp"
#include "oracle/report_text.hpp"

namespace kvq::ports {

using kernels::MlaPart;

const char* name_of(MlaDequantRounding r) {
  return r == MlaDequantRounding::fp32_product ? "fp32-product" : "exact-product";
}

namespace {

// The bits of output value i (the output dtype's width) in a row-major buffer of `type` values.
std::uint32_t value_bits(const std::vector<std::uint8_t>& bytes, kernels::DType type, std::int64_t i) {
  const int w = kernels::bytes_of(type);
  std::uint32_t v = 0;
  std::memcpy(&v, bytes.data() + i * w, static_cast<std::size_t>(w));  // little-endian hosts (kvq's platforms)
  return v;
}

// What a dequantizer writes: every slot of the cache dequantized (kernels::mla_dequantize_cpu, the
// FP32 product), output row r = slot slot_mapping[r]; under exact_product the finite FP8 products
// rounded once to the output dtype instead.
Status run_dequantize(const MlaPort& p, std::vector<std::uint8_t>* out) {
  const kernels::MlaLayout l = p.shape.desc();
  const int w = kernels::bytes_of(p.output);
  const std::int64_t row_bytes = std::int64_t{l.dims()} * w;
  std::vector<std::uint8_t> all(static_cast<std::size_t>(p.shape.slots() * row_bytes));
  if (auto e = kernels::mla_dequantize_cpu(p.shape, p.src.data(), p.k_scale, p.output, all.data()); !e.ok()) return e;
  out->assign(static_cast<std::size_t>(p.tokens() * row_bytes), 0);
  const FormatId f = p.output == kernels::DType::bf16 ? FormatId::bf16 : p.output == kernels::DType::fp16 ? FormatId::fp16 : FormatId::fp32;
  const Conversion rne = convention_rule(ConventionId::ieee, f).conversion;
  const int scale_bytes = l.tile != 0 ? format_of(l.segment(kernels::MlaPart::tile_scales).format).bits() / 8 : 0;
  for (std::int64_t r = 0; r < p.tokens(); ++r) {
    const std::int64_t s = p.slot_mapping[r];
    if (s < 0 || s >= p.shape.slots())
      return "slot_mapping[" + std::to_string(r) + "] = " + std::to_string(s) + " is not a slot of the cache (" +
             std::to_string(p.shape.slots()) + " slots)";
    std::memcpy(out->data() + r * row_bytes, all.data() + s * row_bytes, static_cast<std::size_t>(row_bytes));
    if (p.rounding == MlaDequantRounding::fp32_product || l.segment(kernels::MlaPart::nope).format != FormatId::e4m3fn) continue;
    const std::uint8_t* codes = p.src.data() + p.shape.part(s, kernels::MlaPart::nope);
    for (int d = 0; d < l.nope_dims(); ++d) {
      const float scale = l.tile == 0 ? p.k_scale
                                      : kernels::mla_detail::tile_scale(
                                            l, p.src.data() + p.shape.part(s, kernels::MlaPart::tile_scales) + (d / l.tile) * scale_bytes);
      const double exact = double{e4m3_value_fast(codes[d])} * double{scale};  // 4 x 24 significant bits: exact
      if (exact != exact) continue;  // NaN: as the FP32 product (canonical)
      const std::uint64_t bits = encode_double(format_of(f), rne, exact);
      std::memcpy(out->data() + r * row_bytes + std::int64_t{d} * w, &bits, static_cast<std::size_t>(w));
    }
  }
  return {};
}

Status run_twin(const MlaPort& p, const std::vector<std::uint8_t>* before, std::uint8_t fill, std::vector<std::uint8_t>* out) {
  *out = before ? *before : std::vector<std::uint8_t>(p.after.size(), fill);
  if (p.call == MlaCall::requantize) {
    const kernels::MlaCacheShape src{kernels::MlaLayoutId::fp8_nope_fp8_rope, p.shape.num_blocks, p.shape.block_size};
    if (p.shape.layout != kernels::MlaLayoutId::fp8_nope_block_scale_bf16_rope)
      return std::string("the requantized cache must be ") + kernels::kMlaFp8NopeBlockScaleBf16Rope.name;
    if (static_cast<std::int64_t>(p.src.size()) != src.bytes())
      return "the source cache holds " + std::to_string(p.src.size()) + " bytes; the written cache's " +
             std::to_string(p.shape.num_blocks) + " blocks of " + std::to_string(p.shape.block_size) + " need " +
             std::to_string(src.bytes());
    return kernels::mla_requantize_576_to_656_cpu(p.shape.num_blocks, p.shape.block_size, p.src.data(), p.k_scale,
                                                  p.k_scale_use, out->data());
  }
  return kernels::mla_quantize_cpu(p.shape, p.tile, p.k.data(), p.slot_mapping.data(), p.tokens(), out->data());
}

// Where byte `offset` of the cache lies: its block, the token entry and the part of its record or
// tail (kernels/mla_layouts.hpp), or block padding; and the token whose slot it is.
MlaDifference locate(const MlaPort& p, std::int64_t offset) {
  const kernels::MlaLayout l = p.shape.desc();
  const std::int64_t T = p.shape.block_size;
  MlaDifference d;
  d.offset = offset;
  d.block = offset / l.block_bytes(T);
  const std::int64_t within = offset % l.block_bytes(T);
  const bool in_tail = within >= T * l.record_bytes();
  const std::int64_t unit = in_tail ? l.tail_bytes() : l.record_bytes();
  const std::int64_t rel = in_tail ? within - T * l.record_bytes() : within;
  if (unit == 0 || rel >= T * unit) return d;  // block padding
  d.entry = rel / unit;
  const std::int64_t byte = rel % unit;
  for (const MlaPart part : {MlaPart::nope, MlaPart::tile_scales, MlaPart::rope, MlaPart::pad}) {
    bool tail = false;
    const kernels::MlaSegment seg = l.segment(part, &tail);
    const std::int64_t size = seg.bytes();
    if (seg.count == 0 || tail != in_tail) continue;
    if (byte >= l.offset_of(part) && byte < l.offset_of(part) + size) d.part = part, d.index = byte - l.offset_of(part);
  }
  d.slot = d.block * T + d.entry;
  if (p.call == MlaCall::requantize) {
    d.token = d.slot;  // every slot is converted
    return d;
  }
  for (std::int64_t t = 0; t < p.tokens(); ++t)
    if (p.slot_mapping[t] == d.slot) d.token = t;
  return d;
}

MlaComparison compare_dequantize(const MlaPort& p, std::size_t keep) {
  MlaComparison c;
  std::vector<std::uint8_t> expected;
  c.error = run_dequantize(p, &expected);
  if (!c.error.ok()) return c;
  if (p.after.size() != expected.size()) {
    c.error = "the output holds " + std::to_string(p.after.size()) + " bytes; " + std::to_string(p.tokens()) + " rows need " +
              std::to_string(expected.size());
    return c;
  }
  const kernels::MlaLayout l = p.shape.desc();
  const std::int64_t values = static_cast<std::int64_t>(p.after.size()) / kernels::bytes_of(p.output);
  c.bytes = values;
  for (std::int64_t i = 0; i < values; ++i) {
    const std::uint32_t want = value_bits(expected, p.output, i), got = value_bits(p.after, p.output, i);
    if (want == got) continue;
    ++c.addressed_mismatches;
    if (c.first.size() >= keep) continue;
    MlaDifference d;
    d.offset = i, d.expected = want, d.actual = got, d.addressed = true;
    d.token = i / l.dims();
    d.slot = p.slot_mapping[d.token];
    d.block = d.slot / p.shape.block_size, d.entry = d.slot % p.shape.block_size;
    const int dim = static_cast<int>(i % l.dims());
    d.part = dim < l.nope_dims() ? kernels::MlaPart::nope : kernels::MlaPart::rope;
    d.index = dim < l.nope_dims() ? dim : dim - l.nope_dims();
    c.first.push_back(d);
  }
  return c;
}

}  // namespace

Status mla_tile_rule(const kernels::MlaLayout& l, const std::string& name, Recipe* rule, std::string* rule_name) {
  if (name.empty()) {
    *rule = kernels::mla_tile_recipe(l);
    *rule_name = kernels::mla_tile_recipe_name(l);
    return {};
  }
  const auto named = recipe_from_name(name);
  if (!named) return "unknown recipe '" + name + "' (kvq recipes lists them)";
  *rule = kernels::mla_tile_rule_of(l, named->recipe);
  *rule_name = name;
  return {};
}

MlaComparison compare_mla(const MlaPort& p, std::size_t keep) {
  if (p.call == MlaCall::dequantize) return compare_dequantize(p, keep);
  MlaComparison c;
  std::vector<std::uint8_t> expected, zeros, ones;
  c.error = first_error({run_twin(p, &p.before, 0, &expected), run_twin(p, nullptr, 0x00, &zeros), run_twin(p, nullptr, 0xFF, &ones)});
  if (!c.error.ok()) return c;
  c.bytes = static_cast<std::int64_t>(p.after.size());
  for (std::int64_t i = 0; i < c.bytes; ++i) {
    if (p.after[i] == expected[i]) continue;
    const bool addressed = zeros[i] != 0x00 || ones[i] != 0xFF;  // a byte the twin writes
    ++(addressed ? c.addressed_mismatches : c.untouched_changed);
    if (c.first.size() < keep) {
      MlaDifference d = locate(p, i);
      d.before = p.before[i], d.expected = expected[i], d.actual = p.after[i], d.addressed = addressed;
      c.first.push_back(d);
    }
  }
  return c;
}

namespace {

// The value of output bits `v` of dtype t.
double output_value(kernels::DType t, std::uint32_t v) {
  if (t == kernels::DType::fp32) return float_from_bits(v);
  return decode_double(format_of(t == kernels::DType::bf16 ? FormatId::bf16 : FormatId::fp16), v);
}

std::string describe_dequantize(const MlaPort& p, const MlaComparison& c) {
  const kernels::MlaLayout l = p.shape.desc();
  std::ostringstream os;
  os << "kvq verify mla-dequant " << l.name << " (code x scale, " << name_of(p.rounding) << ", to "
     << kernels::name_of(p.output) << "): " << (c.exact() ? "BIT-EXACT" : "MISMATCH") << "\n";
  if (!c.error.ok()) {
    os << "  the model rejects the port's arguments: " << c.error << "\n";
    return os.str();
  }
  os << "  k_cache: " << p.shape.num_blocks << " blocks of " << p.shape.block_size << " tokens; output: " << p.tokens()
     << " rows x " << l.dims() << " " << kernels::name_of(p.output) << "\n";
  if (c.addressed_mismatches == 0)
    os << "  output: every one of " << c.bytes << " values as the model dequantizes them\n";
  else
    os << "  output: " << c.addressed_mismatches << " values differ, of " << c.bytes << "\n";
  if (!c.first.empty()) os << "  first differences (output row (slot: block, entry), part[dim]: expected -> actual):\n";
  const int digits = 2 * kernels::bytes_of(p.output);
  for (const MlaDifference& d : c.first)
    os << "    row " << d.token << " (slot " << d.slot << ": block " << d.block << ", entry " << d.entry << "), "
       << kernels::name_of(d.part) << "[" << d.index << "]: " << hex_digits(d.expected, digits) << " ("
       << number(output_value(p.output, d.expected)) << ") -> " << hex_digits(d.actual, digits) << " ("
       << number(output_value(p.output, d.actual)) << ")\n";
  return os.str();
}

}  // namespace

std::string describe_mla(const MlaPort& p, const MlaComparison& c) {
  if (p.call == MlaCall::dequantize) return describe_dequantize(p, c);
  const kernels::MlaLayout l = p.shape.desc();
  std::ostringstream os;
  const bool requant = p.call == MlaCall::requantize;
  if (requant)
    os << "kvq verify mla-requant " << kernels::kMlaFp8NopeFp8Rope.name << " -> " << l.name << " (k_scale "
       << hex_digits(bits_of(p.k_scale), 8) << " = " << number(p.k_scale) << ", " << kernels::name_of(p.k_scale_use) << "): ";
  else
    os << "kvq verify mla-cache " << l.name << " (tile rule " << p.tile_name << " at tile " << l.tile << "): ";
  os << (c.exact() ? "BIT-EXACT" : "MISMATCH") << "\n";
  if (!c.error.ok()) {
    os << "  the model rejects the port's arguments: " << c.error << "\n";
    return os.str();
  }
  std::int64_t padding = 0;
  for (const std::int64_t s : p.slot_mapping) padding += s < 0 ? 1 : 0;
  if (requant)
    os << "  src_cache: " << p.shape.num_blocks << " blocks of " << p.shape.block_size << " tokens, every slot converted, "
       << l.block_bytes(p.shape.block_size) << " bytes a block written\n";
  else
    os << "  k: " << p.tokens() << " tokens (" << padding << " padding) x " << l.dims() << " bf16; " << p.shape.num_blocks
       << " blocks of " << p.shape.block_size << " tokens, " << l.block_bytes(p.shape.block_size) << " bytes a block\n";
  const char* cache = requant ? "dst_cache" : "k_cache";
  os << buffer_line(cache, c.bytes, c.addressed_mismatches, c.untouched_changed, p.before_known,
                    requant ? "bytes differ in the converted records" : "bytes differ in the records the tokens address",
                    "changed outside them (other slots, padding)");
  if (!c.first.empty())
    os << "  first differences (cache byte: block, entry (slot), " << (requant ? "" : "token, ")
       << "part[byte]: expected -> actual):\n";
  for (const MlaDifference& d : c.first) {
    os << "    " << cache << " byte " << d.offset << ": block " << d.block;
    if (d.entry < 0) {
      os << ", block padding: held " << hex_digits(d.before, 2) << ", now " << hex_digits(d.actual, 2) << "\n";
      continue;
    }
    os << ", entry " << d.entry << " (slot " << d.slot << "), ";
    if (d.token < 0) {
      os << "no token addresses this slot: held " << hex_digits(d.before, 2) << ", now " << hex_digits(d.actual, 2) << "\n";
      continue;
    }
    if (!requant) os << "token " << d.token << ", ";
    os << kernels::name_of(d.part) << "[" << d.index << "]: " << hex_digits(d.expected, 2) << " -> "
       << hex_digits(d.actual, 2) << "\n";
  }
  return os.str();
}

MlaIdentification identify_mla(const MlaPort& p, std::size_t nearest) {
  MlaIdentification id;
  if (p.call == MlaCall::dequantize) {
    for (const MlaDequantRounding r : {MlaDequantRounding::fp32_product, MlaDequantRounding::exact_product}) {
      MlaPort q = p;
      q.rounding = r;
      MlaCandidate c{name_of(r), compare_mla(q, 0)};
      if (!c.comparison.error.ok()) return id;
      id.add(std::move(c));
    }
    id.rank(nearest);
    return id;
  }
  if (p.call == MlaCall::requantize) {
    for (const kernels::KScale use : {kernels::KScale::fold, kernels::KScale::drop}) {
      MlaPort q = p;
      q.k_scale_use = use;
      MlaCandidate c{kernels::name_of(use), compare_mla(q, 0)};
      if (!c.comparison.error.ok()) return id;
      id.add(std::move(c));
    }
    id.rank(nearest);
    return id;
  }
  for (const NamedRecipe& named : kRecipes) {
    MlaPort q = p;
    if (!mla_tile_rule(p.shape.desc(), std::string(named.name), &q.tile, &q.tile_name).ok() ||
        !kernels::mla_tile_recipe_error(p.shape, q.tile).ok())
      continue;  // not a tile rule of this layout (a two-level rule, FP4 elements, an FP32 scale in E8M0 bytes)
    MlaCandidate c{q.tile_name, compare_mla(q, 0)};
    if (!c.comparison.error.ok()) return id;  // the port's arguments, whatever the rule: verify says why
    id.add(std::move(c));
  }
  id.rank(nearest);
  return id;
}

}  // namespace kvq::ports
