// kvq verify / kvq identify: a port's tensors (any framework, dumped as .npy or .safetensors with
// a manifest) against kvq's recipe models. docs/ports.md.
#include <cstdlib>
#include <optional>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/port_files.hpp"
#include "cli/untrusted.hpp"
#include "formats/recipe_names.hpp"
#include "oracle/identify.hpp"

namespace kvq::cli {
namespace {

std::string parse(const Args& args, bool takes_recipe, PortRequest* o) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool value = i + 1 < args.size();
    if (a == "--inputs" && value) {
      o->files.inputs = args[++i];
    } else if (a == "--outputs" && value) {
      o->files.outputs = args[++i];
    } else if (a == "--manifest" && value) {
      o->files.manifest = args[++i];
    } else if ((a == "--show" || a == "--changes") && value) {
      if (auto e = integer_option(a, args[i + 1], 0, a == "--show" ? 100000 : 2, a == "--show" ? &o->show : &o->changes);
          !e.empty())
        return e;
      ++i;
    } else if (takes_recipe && o->recipe.empty() && !a.starts_with("--")) {
      o->recipe = a;
    } else {
      return "unexpected argument '" + a + "'";
    }
  }
  if (takes_recipe && o->recipe.empty()) return "needs RECIPE";
  if (o->files.inputs.empty() || o->files.outputs.empty()) return "needs --inputs DIR and --outputs DIR";
  return {};
}

// ---- the first differences as records (PortRequest::records) ----

using Record = DifferenceRecord;
std::int64_t i64(auto v) { return static_cast<std::int64_t>(v); }

Record byte_record(const std::string& buffer, std::int64_t offset, std::uint32_t before, std::uint32_t expected,
                   std::uint32_t actual) {
  return {{"buffer", buffer}, {"offset", offset}, {"before", i64(before)}, {"expected", i64(expected)}, {"actual", i64(actual)}};
}

void add_records(const LoadedPort& port, const ports::PagedComparison& c, std::vector<Record>* out) {
  for (const auto& d : c.first) {
    Record r = byte_record(ports::paged_buffer_name(port.paged.shape.layout, d.buffer), d.offset, d.before, d.expected, d.actual);
    r["side"] = std::string(d.side == kernels::KvSide::k ? "k" : "v");
    r["scale"] = i64(d.scale);
    r["page"] = d.page, r["position"] = d.position, r["slot"] = d.slot, r["head"] = d.head, r["index"] = d.index;
    r["token"] = d.token;
    out->push_back(std::move(r));
  }
}
void add_records(const LoadedPort& port, const ports::RopeComparison& c, std::vector<Record>* out) {
  for (const auto& d : c.first) {
    Record r = byte_record(ports::rope_buffer_name(port.rope, d.buffer), d.offset, d.before, d.expected, d.actual);
    r["addressed"] = i64(d.addressed);
    r["token"] = d.token, r["head"] = d.head, r["dim"] = d.dim, r["page"] = d.page, r["entry"] = d.entry;
    r["rotated"] = i64(d.rotated);
    r["x"] = double{d.x}, r["partner"] = double{d.partner}, r["cos"] = double{d.c}, r["sin"] = double{d.s};
    r["scale"] = double{d.scale};
    r["within_bound"] = i64(d.within_bound);
    out->push_back(std::move(r));
  }
}
void add_records(const LoadedPort& port, const ports::MlaComparison& c, std::vector<Record>* out) {
  // A dequantize's offset is the output value's index, its before/expected/actual the value's bits.
  const char* buffer = port.mla.call == ports::MlaCall::dequantize   ? "output"
                       : port.mla.call == ports::MlaCall::requantize ? "dst_cache"
                                                                     : "k_cache";
  for (const auto& d : c.first) {
    Record r = byte_record(buffer, d.offset, d.before, d.expected, d.actual);
    r["addressed"] = i64(d.addressed);
    r["block"] = d.block, r["entry"] = d.entry, r["slot"] = d.slot, r["token"] = d.token;
    r["part"] = std::string(kernels::name_of(d.part));
    r["index"] = d.index;
    out->push_back(std::move(r));
  }
}
void add_records(const LoadedPort&, const ports::WorkspaceComparison& c, std::vector<Record>* out) {
  for (const auto& d : c.first) {
    Record r = byte_record(d.side == 0 ? "k_workspace" : "v_workspace", d.offset, d.before, d.expected, d.actual);
    r["addressed"] = i64(d.addressed);
    r["row"] = d.row, r["head"] = d.head, r["dim"] = d.dim, r["request"] = d.request, r["position"] = d.position;
    r["page"] = d.page, r["entry"] = d.entry, r["code"] = i64(d.code), r["scale"] = i64(d.scale);
    out->push_back(std::move(r));
  }
}
void add_records(const LoadedPort&, const ports::Comparison& c, std::vector<Record>* out) {
  for (const auto& d : c.first_codes)
    out->push_back({{"buffer", std::string("codes")}, {"row", d.row}, {"col", d.col}, {"x_bits", i64(d.x_bits)},
                    {"expected", i64(d.expected)}, {"actual", i64(d.actual)}, {"expected_scale", i64(d.expected_scale)},
                    {"actual_scale", i64(d.actual_scale)}, {"expected_value", double{d.expected_value}},
                    {"actual_value", double{d.actual_value}}});
  for (const auto& d : c.first_scales)
    out->push_back({{"buffer", std::string("block_scales")}, {"row", d.row}, {"block", d.block},
                    {"block_max", double{d.block_max}}, {"expected", i64(d.expected)}, {"actual", i64(d.actual)}});
  for (const auto& d : c.first_dequantized)
    out->push_back({{"buffer", std::string("dequantized")}, {"row", d.row}, {"col", d.col}, {"code", i64(d.code)},
                    {"scale", i64(d.scale)}, {"expected", double{d.expected}}, {"actual", double{d.actual}}});
}

// The verdict of a comparison made from a loaded port: its report and exit 0 (bit-exact) or 1, or
// exit 2 where the model rejects the port's arguments.
template <class Comparison, class Describe>
int report(const PortRequest& o, const LoadedPort& port, const Comparison& c, std::ostream& out, std::ostream& err,
           Describe describe) {
  if (!c.error.ok()) {
    err << "kvq verify: " << c.error << " (manifest " << port.manifest << ")\n";
    return 2;
  }
  out << describe();
  if (o.records) add_records(port, c, o.records);
  return c.exact() ? 0 : 1;
}

int verify_mla(const PortRequest& o, const LoadedPort& port, std::ostream& out, std::ostream& err) {
  const ports::MlaComparison c = ports::compare_mla(port.mla, static_cast<std::size_t>(o.show));
  return report(o, port, c, out, err, [&] { return ports::describe_mla(port.mla, c); });
}

// kvq identify's answer for a layout-aware kind (oracle/layout_identification.hpp): the counts,
// each exact candidate, the nearest others with their differing bytes (or values: `counted`); exit 0 where one is exact,
// 1 where none is, 2 where no candidate could read the port.
template <class Found, class Name>
int print_identification(const LoadedPort& port, const Found& id, const std::string& tried_what, const std::string& unit,
                         const std::string& counted, const std::string& exact_phrase, const std::string& unreadable, const std::string& verify,
                         std::ostream& out, std::ostream& err, Name name) {
  if (id.tried == 0) {
    err << "kvq identify: " << unreadable << " " << port.manifest << " (see " << verify << " for why)\n";
    return 2;
  }
  out << "kvq identify: " << id.tried << " " << tried_what << " tried; " << id.exact.size() << " reproduce every " << unit << "\n";
  for (const auto& c : id.exact) out << "  exact: " << exact_phrase << " " << name(c) << "\n";
  if (!id.nearest.empty()) out << (id.exact.empty() ? "  nearest (" : "  next nearest (") << counted << " differing):\n";
  for (const auto& c : id.nearest) out << "    " << name(c) << ": " << c.comparison.differing() << "\n";
  return id.exact.empty() ? 1 : 0;
}

}  // namespace

int verify_command(const Args& args, std::ostream& out, std::ostream& err) {
  PortRequest o;
  if (auto e = parse(args, true, &o); !e.empty()) {
    err << "kvq verify: " << e << "\nusage: kvq verify RECIPE|rope-quantize|rope-append|mla-cache|mla-requant|mla-dequant|workspace --inputs DIR --outputs DIR [--manifest FILE] [--show N]\n";
    return 2;
  }
  return verify_port(o, out, err);
}

int verify_port(const PortRequest& o, std::ostream& out, std::ostream& err) {
  // The RoPE, requantize and workspace kinds have no recipe: the argument names the kind (rope-fp8:
  // either RoPE kind). An MLA cache has its layout's tile rule (or the manifest's tile_recipe):
  // `mla-cache`, or a recipe named as its tile rule.
  if (o.recipe == "workspace" || o.recipe == "mla-cache" || o.recipe == "mla-requant" || o.recipe == "mla-dequant") {
    LoadedPort port;
    if (auto e = load_port(o.files, &port); !e.empty()) {
      err << "kvq verify: " << e << "\n";
      return 2;
    }
    const bool workspace = o.recipe == "workspace";
    const ports::MlaCall call = o.recipe == "mla-requant"   ? ports::MlaCall::requantize
                                : o.recipe == "mla-dequant" ? ports::MlaCall::dequantize
                                                            : ports::MlaCall::quantize;
    if (port.kind != (workspace ? PortKind::workspace : PortKind::mla) || (!workspace && call != port.mla.call)) {
      err << "kvq verify: '" << o.recipe << "' does not name the kind of " << port.manifest << "\n";
      return 2;
    }
    if (!workspace) return verify_mla(o, port, out, err);
    const ports::WorkspaceComparison c = ports::compare_workspace(port.workspace, static_cast<std::size_t>(o.show));
    return report(o, port, c, out, err, [&] { return ports::describe_workspace(port.workspace, c); });
  }
  const bool rope_arg = o.recipe == "rope-quantize" || o.recipe == "rope-append" || o.recipe == "rope-fp8";
  const auto named = rope_arg ? std::nullopt : recipe_from_name(o.recipe);
  if (!rope_arg && !named) {
    err << "kvq verify: unknown recipe '" << o.recipe << "' (kvq recipes lists them; rope-quantize, rope-append for RoPE)\n";
    return 2;
  }
  LoadedPort port;
  if (auto e = load_port(o.files, &port, named ? &named->recipe : nullptr); !e.empty()) {
    err << "kvq verify: " << e << "\n";
    return 2;
  }
  if (port.kind == PortKind::mla && named && port.mla.call == ports::MlaCall::quantize) {
    if (auto e = ports::mla_tile_rule(port.mla.shape.desc(), o.recipe, &port.mla.tile, &port.mla.tile_name); !e.ok()) {
      err << "kvq verify: " << e << "\n";
      return 2;
    }
    if (auto e = kernels::mla_tile_recipe_error(port.mla.shape, port.mla.tile); !e.ok()) {
      err << "kvq verify: RECIPE '" << o.recipe << "' as the tile rule: " << e << " (manifest " << port.manifest << ")\n";
      return 2;
    }
    return verify_mla(o, port, out, err);
  }
  if (rope_arg != (port.kind == PortKind::rope) || port.kind == PortKind::mla || port.kind == PortKind::workspace ||
      (port.kind == PortKind::rope && o.recipe != "rope-fp8" &&
       (o.recipe == "rope-append") != (port.rope.kind == ports::RopeKind::append))) {
    err << "kvq verify: '" << o.recipe << "' does not name the kind of " << port.manifest
        << " (RoPE manifests: kvq verify rope-quantize or rope-append; others: a recipe)\n";
    return 2;
  }
  if (port.kind == PortKind::rope) {
    ports::RopeArithmetic a;
    a.style = port.rope.shape.style;
    a.cos_sin = port.rope.cos_sin;
    const ports::RopeComparison c = ports::compare_rope(port.rope, a, static_cast<std::size_t>(o.show));
    return report(o, port, c, out, err, [&] { return ports::describe_rope(port.rope, a, c); });
  }
  if (!port.recipe.empty() && port.recipe != named->name)
    out << "note: the manifest says recipe '" << port.recipe << "'; checking against '" << named->name << "'\n";
  if (port.kind == PortKind::paged_store) {
    const ports::PagedComparison c = ports::compare_paged(port.paged, static_cast<std::size_t>(o.show));
    if (!c.error.ok()) {
      err << "kvq verify: " << c.error << " (manifest " << port.manifest << ", recipe " << named->name << ")\n";
      return 2;
    }
    out << ports::describe_paged(port.paged, std::string(named->name), c);
    if (o.records) add_records(port, c, o.records);
    return c.exact() ? 0 : 1;
  }
  ports::Interpretation how{named->recipe, port.data.nibbles, port.data.scale_layout};
  if (port.data.block && how.recipe.scale != BlockScale::tensor_only) how.recipe.block = port.data.block;
  if (const Status e = ports::check_layout(port.data, how); !e.ok()) {
    err << "kvq verify: " << e << " (manifest " << port.manifest << ", recipe " << named->name << ")\n";
    return 2;
  }
  const ports::Comparison c = ports::compare(port.data, how, static_cast<std::size_t>(o.show), true);
  out << ports::describe(port.data, how, std::string(named->name), c);
  if (o.records) add_records(port, c, o.records);
  return c.exact() ? 0 : 1;
}

int identify_command(const Args& args, std::ostream& out, std::ostream& err) {
  PortRequest o;
  if (auto e = parse(args, false, &o); !e.empty()) {
    err << "kvq identify: " << e << "\nusage: kvq identify --inputs DIR --outputs DIR [--manifest FILE] [--changes 0|1|2] [--show N]\n";
    return 2;
  }
  return identify_port(o, out, err);
}

int identify_port(const PortRequest& o, std::ostream& out, std::ostream& err) {
  LoadedPort port;
  if (auto e = load_port(o.files, &port); !e.empty()) {
    err << "kvq identify: " << e << "\n";
    return 2;
  }
  const auto keep = static_cast<std::size_t>(o.show);
  if (port.kind == PortKind::workspace)
    return print_identification(port, ports::identify_workspace(port.workspace, keep), "workspace roundings", "workspace byte", "bytes",
                                "this workspace rounds", "the workspace model cannot read", "kvq verify workspace", out, err,
                                [](const auto& c) { return ports::name_of(c.rounding); });
  if (port.kind == PortKind::mla) {
    const ports::MlaCall call = port.mla.call;
    const bool requant = call == ports::MlaCall::requantize, dequant = call == ports::MlaCall::dequantize;
    return print_identification(port, ports::identify_mla(port.mla, keep),
                                dequant ? "dequantize roundings" : requant ? "uses of k_scale" : "tile rules",
                                dequant ? std::string("output value") : std::string("byte of the ") + port.mla.shape.desc().name + " cache",
                                dequant ? "values" : "bytes",
                                dequant ? "this dequantizer rounds" : requant ? "this requantizer follows" : "this writer follows",
                                "the MLA model cannot read",
                                dequant ? "kvq verify mla-dequant" : requant ? "kvq verify mla-requant" : "kvq verify mla-cache", out,
                                err, [](const auto& c) { return c.recipe; });
  }
  if (port.kind == PortKind::rope)
    return print_identification(port, ports::identify_rope(port.rope, keep), "RoPE arithmetic variants", "byte", "bytes",
                                "this port follows", "the RoPE model cannot read", "kvq verify rope-fp8", out, err,
                                [](const auto& c) { return c.arithmetic.phrase(); });
  if (port.kind == PortKind::paged_store)
    return print_identification(port, ports::identify_paged(port.paged, keep), "paged-store recipes", "cache byte", "bytes",
                                "this port follows", "no named recipe's paged store takes the tensors of", "kvq verify RECIPE",
                                out, err, [](const auto& c) { return c.recipe; });
  const ports::Identification id = ports::identify(port.data, o.changes, static_cast<std::size_t>(o.show));
  if (id.tried == 0) {
    err << "kvq identify: no recipe fits the layout of " << port.manifest
        << " (codes and block_scales sizes against x's shape; see kvq verify RECIPE for why)\n";
    return 2;
  }
  out << "kvq identify: " << id.tried << " variants tried; " << id.exact.size() << " reproduce every output\n";
  for (const auto& c : id.exact) out << "  exact: this port follows " << c.variant.phrase() << "\n";
  if (!id.nearest.empty()) out << (id.exact.empty() ? "  nearest (mismatches):\n" : "  next nearest (mismatches):\n");
  for (const auto& c : id.nearest) {
    const auto& m = c.comparison;
    out << "    " << c.variant.phrase() << ": " << m.code_mismatches << " of " << m.codes << " codes";
    if (m.scales) out << ", " << m.scale_mismatches << " of " << m.scales << " scales";
    if (m.global_scale_checked && !m.global_scale_matches) out << ", the global scale";
    if (m.dequantized_checked) out << ", " << m.dequantized_mismatches << " dequantized";
    out << " differ\n";
  }
  return id.exact.empty() ? 1 : 0;
}

}  // namespace kvq::cli
