// kvq layouts: every MLA per-token layout and the NVFP4 page, with the byte offsets derived
// from their descriptions (kernels/mla_layouts.hpp). docs/layouts.md holds this output verbatim.
#include <iomanip>
#include <ostream>
#include <sstream>

#include "cli/commands.hpp"
#include "formats/names.hpp"
#include "kernels/mla_layouts.hpp"

namespace kvq::cli {
namespace {

void segments(std::ostream& os, const char* where, const kernels::MlaSegment* s, int n) {
  int at = 0;
  for (int i = 0; i < n; ++i) {
    os << "  " << std::left << std::setw(8) << where << std::setw(13) << kernels::name_of(s[i].part) << std::right << std::setw(6)
       << at << std::setw(6) << at + s[i].bytes() << std::setw(6) << s[i].bytes() << "   " << s[i].count << " x "
       << name_of(s[i].format) << "\n";
    at += s[i].bytes();
  }
}

std::string layouts_text() {
  std::ostringstream os;
  for (const auto id : kernels::kMlaLayoutIds) {
    const kernels::MlaLayout l = kernels::mla_layout(id);
    os << l.name << ": " << l.token_bytes() << " B a token, head_dim " << l.dims() << " (" << l.nope_dims() << " nope + "
       << l.rope_dims() << " rope)";
    if (l.tile) os << ", " << l.tiles() << " tiles of " << l.tile;
    os << "\n  " << std::left << std::setw(8) << "where" << std::setw(13) << "part" << std::right << std::setw(6) << "from"
       << std::setw(6) << "to" << std::setw(6) << "bytes" << "   items\n";
    segments(os, "record", l.record, l.record_segments);
    segments(os, "tail", l.tail, l.tail_segments);
    os << "  block of T tokens: [T x " << l.record_bytes() << " B records]";
    if (l.tail_segments) os << "[T x " << l.tail_bytes() << " B tail records]";
    if (l.block_align > 1) os << " padded to a multiple of " << l.block_align << " B";
    os << "; T = 64: " << l.block_bytes(64) << " B\n\n";
  }
  const kernels::Nvfp4PageGeometry g{1, 16, 8, 128};
  os << "nvfp4 paged cache (vLLM, NHD, no swizzle): [num_blocks, 2 (K, V), block_size, heads, D/2 + D/16] bytes;\n"
     << "  a side = [data: block_size x heads x D/2][scales: block_size x heads x D/16]\n"
     << "  block_size 16, heads 8, D 128: full_dim " << g.full_dim() << ", side " << g.side_bytes() << " B, block "
     << g.block_bytes() << " B; token t head h of side s at data " << g.data_offset(0, 0, 0, 0) << " + s x "
     << g.side_bytes() << " + (t x 8 + h) x " << g.data_bytes_per_head() << ", scales " << g.scale_offset(0, 0, 0, 0)
     << " + s x " << g.side_bytes() << " + (t x 8 + h) x " << g.scale_bytes_per_head() << "\n";
  return os.str();
}

}  // namespace

int layouts_command(const Args& args, std::ostream& out, std::ostream& err) {
  if (!args.empty()) {
    err << "usage: kvq layouts   (MLA KV-cache layouts and the NVFP4 page, with byte offsets)\n";
    return 2;
  }
  out << layouts_text();
  return 0;
}

}  // namespace kvq::cli
