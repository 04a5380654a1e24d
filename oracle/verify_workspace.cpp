#include "oracle/verify_workspace.hpp"

#include <sstream>

#include "oracle/report_text.hpp"

namespace kvq::ports {

namespace {

// The twin on copies of the workspaces: as they were before the call (before == nullptr: filled
// with `fill`, to find the bytes it writes).
Status run_twin(const WorkspacePort& p, const std::vector<std::uint8_t>* before, std::uint8_t fill,
                std::vector<std::uint8_t> out[2]) {
  for (int side = 0; side < 2; ++side)
    out[side] = before ? before[side] : std::vector<std::uint8_t>(p.after[side].size(), fill);
  const std::int64_t need = p.batch.workspace_bytes();
  for (int side = 0; side < 2; ++side)
    if (static_cast<std::int64_t>(out[side].size()) < need)
      return std::string(side ? "v_workspace" : "k_workspace") + ": " + std::to_string(out[side].size()) + " bytes, fewer than " +
             std::to_string(p.batch.workspace_tokens) + " rows (cu_seq_lens[batch]) x " + std::to_string(p.batch.pages.heads) +
             " heads x " + std::to_string(p.batch.pages.head_dim) + " dims = " + std::to_string(need);
  if (static_cast<std::int64_t>(p.cache.size()) != p.batch.pages.cache_bytes())
    return "kv_cache: " + std::to_string(p.cache.size()) + " bytes, the page geometry needs " +
           std::to_string(p.batch.pages.cache_bytes());
  if (static_cast<std::int64_t>(p.block_tables.size()) != p.batch.batch * p.batch.max_blocks_per_seq ||
      static_cast<std::int64_t>(p.cu_seq_lens.size()) != p.batch.batch + 1)
    return "block_tables must be [batch, max_blocks_per_seq] and cu_seq_lens [batch + 1]";
  return kernels::nvfp4_paged_to_workspace_cpu(p.batch, p.cache.data(), p.block_tables.data(), p.cu_seq_lens.data(),
                                               p.factor[0], p.factor[1], out[0].data(), out[1].data());
}

// Where byte `offset` of a workspace lies: row, head, dim; the row's request and position, its
// page and entry, and the element's code and scale read from the cache.
WorkspaceDifference locate(const WorkspacePort& p, int side, std::int64_t offset) {
  const kernels::Nvfp4PageGeometry& g = p.batch.pages;
  WorkspaceDifference d;
  d.side = side;
  d.offset = offset;
  d.row = offset / (g.heads * g.head_dim);
  d.head = offset / g.head_dim % g.heads;
  d.dim = offset % g.head_dim;
  for (std::int64_t b = 0; b < p.batch.batch; ++b)
    if (d.row >= p.cu_seq_lens[b] && d.row < p.cu_seq_lens[b + 1]) d.request = b, d.position = d.row - p.cu_seq_lens[b];
  if (d.request < 0) return d;
  d.page = p.block_tables[d.request * p.batch.max_blocks_per_seq + d.position / g.block_size];
  d.entry = d.position % g.block_size;
  const std::uint8_t byte = p.cache[g.data_offset(d.page, side, d.entry, d.head) + d.dim / 2];
  d.code = (d.dim & 1) ? e2m1_odd(byte) : e2m1_even(byte);
  d.scale = p.cache[g.scale_offset(d.page, side, d.entry, d.head) + d.dim / kernels::Nvfp4PageGeometry::kBlock];
  return d;
}

}  // namespace

std::string name_of(const WorkspaceRounding& w) {
  if (w.reference()) return "once";
  std::string s;
  if (w.fp32_products) s += "fp32-products";
  if (w.via_bf16) s += std::string(s.empty() ? "" : "+") + "via-bf16";
  if (!w.saturate) s += std::string(s.empty() ? "" : "+") + "nonsaturating";
  return s;
}

Status parse_rounding(const std::string& text, WorkspaceRounding* out) {
  *out = WorkspaceRounding{};
  if (text == "once") return {};
  if (text.empty()) return "'' is 'once' or fp32-products, via-bf16, nonsaturating joined by '+'";
  std::stringstream in(text);
  std::string flag;
  while (std::getline(in, flag, '+')) {
    if (flag == "fp32-products") out->fp32_products = true;
    else if (flag == "via-bf16") out->via_bf16 = true;
    else if (flag == "nonsaturating") out->saturate = false;
    else return "'" + text + "' is 'once' or fp32-products, via-bf16, nonsaturating joined by '+'";
  }
  return {};
}

WorkspaceComparison compare_workspace(const WorkspacePort& p, std::size_t keep) {
  WorkspaceComparison c;
  std::vector<std::uint8_t> expected[2], zeros[2], ones[2];
  c.error = first_error({run_twin(p, p.before, 0, expected), run_twin(p, nullptr, 0x00, zeros), run_twin(p, nullptr, 0xFF, ones)});
  if (!c.error.ok()) return c;
  for (int side = 0; side < 2; ++side) {
    c.bytes[side] = static_cast<std::int64_t>(p.after[side].size());
    for (std::int64_t i = 0; i < c.bytes[side]; ++i) {
      if (p.after[side][i] == expected[side][i]) continue;
      const bool addressed = zeros[side][i] != 0x00 || ones[side][i] != 0xFF;
      ++(addressed ? c.addressed_mismatches[side] : c.untouched_changed[side]);
      if (c.first.size() < keep) {
        WorkspaceDifference d = locate(p, side, i);
        d.before = p.before[side][i], d.expected = expected[side][i], d.actual = p.after[side][i], d.addressed = addressed;
        c.first.push_back(d);
      }
    }
  }
  return c;
}

std::string describe_workspace(const WorkspacePort& p, const WorkspaceComparison& c) {
  const kernels::Nvfp4PageGeometry& g = p.batch.pages;
  std::ostringstream os;
  os << "kvq verify workspace (rounding " << name_of(p.batch.rounding) << "): " << (c.exact() ? "BIT-EXACT" : "MISMATCH") << "\n";
  if (!c.error.ok()) {
    os << "  the model rejects the port's arguments: " << c.error << "\n";
    return os.str();
  }
  os << "  kv_cache: " << g.num_blocks << " NVFP4 blocks of " << g.block_size << " tokens x " << g.heads << " heads x "
     << g.head_dim << "; batch " << p.batch.batch << ", " << p.batch.workspace_tokens << " workspace rows; factors K "
     << hex_digits(bits_of(p.factor[0]), 8) << " = " << number(p.factor[0]) << ", V " << hex_digits(bits_of(p.factor[1]), 8)
     << " = " << number(p.factor[1]) << "\n";
  for (int side = 0; side < 2; ++side)
    os << buffer_line(side ? "v_workspace" : "k_workspace", c.bytes[side], c.addressed_mismatches[side],
                      c.untouched_changed[side], p.before_known[side], "bytes differ in the batch's rows",
                      "changed outside them (rows past cu_seq_lens[batch])");
  if (!c.first.empty())
    os << "  first differences (workspace byte: row (request, position; page, entry), head, dim: code x scale x factor: "
          "expected -> actual):\n";
  for (const WorkspaceDifference& d : c.first) {
    os << "    " << (d.side ? "v" : "k") << "_workspace byte " << d.offset << ": row " << d.row;
    if (d.request < 0) {
      os << ", no request's row: held " << hex_digits(d.before, 2) << ", now " << hex_digits(d.actual, 2) << "\n";
      continue;
    }
    os << " (request " << d.request << ", position " << d.position << "; page " << d.page << ", entry " << d.entry << "), head "
       << d.head << ", dim " << d.dim << ": e2m1 " << hex_digits(d.code, 1) << " = " << number(e2m1_value_fast(d.code))
       << " x e4m3 " << hex_digits(d.scale, 2) << " = " << number(e4m3_value_fast(d.scale)) << " x " << number(p.factor[d.side])
       << ": " << hex_digits(d.expected, 2) << " = " << number(e4m3_value_fast(d.expected)) << " -> " << hex_digits(d.actual, 2)
       << " = " << number(e4m3_value_fast(d.actual)) << "\n";
  }
  return os.str();
}

WorkspaceIdentification identify_workspace(const WorkspacePort& p, std::size_t nearest) {
  WorkspaceIdentification id;
  for (int bits = 0; bits < 8; ++bits) {
    WorkspacePort q = p;
    q.batch.rounding = {(bits & 1) != 0, (bits & 2) != 0, (bits & 4) == 0};
    WorkspaceCandidate c{q.batch.rounding, compare_workspace(q, 0)};
    if (!c.comparison.error.ok()) return id;  // the port's arguments, whatever the rounding
    id.add(std::move(c));
  }
  id.rank(nearest);
  return id;
}

}  // namespace kvq::ports
