#include "oracle/verify_mla.hpp"

#include <sstream>

#include "oracle/report_text.hpp"

namespace kvq::ports {

using kernels::MlaPart;

namespace {

Status run_twin(const MlaPort& p, const std::vector<std::uint8_t>* before, std::uint8_t fill, std::vector<std::uint8_t>* out) {
  *out = before ? *before : std::vector<std::uint8_t>(p.after.size(), fill);
  return kernels::mla_quantize_cpu(p.shape, p.k.data(), p.slot_mapping.data(), p.tokens(), out->data());
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
  for (std::int64_t t = 0; t < p.tokens(); ++t)
    if (p.slot_mapping[t] == d.slot) d.token = t;
  return d;
}

}  // namespace

MlaComparison compare_mla(const MlaPort& p, std::size_t keep) {
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

std::string describe_mla(const MlaPort& p, const MlaComparison& c) {
  const kernels::MlaLayout l = p.shape.desc();
  std::ostringstream os;
  os << "kvq verify mla-cache " << l.name << ": " << (c.exact() ? "BIT-EXACT" : "MISMATCH") << "\n";
  if (!c.error.ok()) {
    os << "  the model rejects the port's arguments: " << c.error << "\n";
    return os.str();
  }
  std::int64_t padding = 0;
  for (const std::int64_t s : p.slot_mapping) padding += s < 0 ? 1 : 0;
  os << "  k: " << p.tokens() << " tokens (" << padding << " padding) x " << l.dims() << " bf16; " << p.shape.num_blocks
     << " blocks of " << p.shape.block_size << " tokens, " << l.block_bytes(p.shape.block_size) << " bytes a block\n";
  os << buffer_line("k_cache", c.bytes, c.addressed_mismatches, c.untouched_changed, p.before_known,
                    "bytes differ in the records the tokens address", "changed outside them (other slots, padding)");
  if (!c.first.empty()) os << "  first differences (cache byte: block, entry (slot), token, part[byte]: expected -> actual):\n";
  for (const MlaDifference& d : c.first) {
    os << "    k_cache byte " << d.offset << ": block " << d.block;
    if (d.entry < 0) {
      os << ", block padding: held " << hex_digits(d.before, 2) << ", now " << hex_digits(d.actual, 2) << "\n";
      continue;
    }
    os << ", entry " << d.entry << " (slot " << d.slot << "), ";
    if (d.token < 0) {
      os << "no token addresses this slot: held " << hex_digits(d.before, 2) << ", now " << hex_digits(d.actual, 2) << "\n";
      continue;
    }
    os << "token " << d.token << ", " << kernels::name_of(d.part) << "[" << d.index << "]: " << hex_digits(d.expected, 2) << " -> "
       << hex_digits(d.actual, 2) << "\n";
  }
  return os.str();
}

}  // namespace kvq::ports
