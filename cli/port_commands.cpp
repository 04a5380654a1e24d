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

struct PortOptions {
  std::string recipe;
  PortFiles files;
  int show = 8;
  int changes = 2;
};

std::string parse(const Args& args, bool takes_recipe, PortOptions* o) {
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

}  // namespace

int verify_command(const Args& args, std::ostream& out, std::ostream& err) {
  PortOptions o;
  if (auto e = parse(args, true, &o); !e.empty()) {
    err << "kvq verify: " << e << "\nusage: kvq verify RECIPE|rope-quantize|rope-append|mla-cache --inputs DIR --outputs DIR [--manifest FILE] [--show N]\n";
    return 2;
  }
  // The RoPE and MLA kinds have no recipe: the argument names the kind (rope-fp8: either RoPE kind).
  if (o.recipe == "mla-cache") {
    LoadedPort port;
    if (auto e = load_port(o.files, &port); !e.empty()) {
      err << "kvq verify: " << e << "\n";
      return 2;
    }
    if (port.kind != PortKind::mla_cache) {
      err << "kvq verify: 'mla-cache' does not name the kind of " << port.manifest << "\n";
      return 2;
    }
    const ports::MlaComparison c = ports::compare_mla(port.mla, static_cast<std::size_t>(o.show));
    if (!c.error.ok()) {
      err << "kvq verify: " << c.error << " (manifest " << port.manifest << ")\n";
      return 2;
    }
    out << ports::describe_mla(port.mla, c);
    return c.exact() ? 0 : 1;
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
  if (rope_arg != (port.kind == PortKind::rope) || port.kind == PortKind::mla_cache ||
      (port.kind == PortKind::rope && o.recipe != "rope-fp8" &&
       (o.recipe == "rope-append") != (port.rope.kind == ports::RopeKind::append))) {
    err << "kvq verify: '" << o.recipe << "' does not name the kind of " << port.manifest
        << " (RoPE manifests: kvq verify rope-quantize or rope-append; others: a recipe)\n";
    return 2;
  }
  if (port.kind == PortKind::rope) {
    ports::RopeArithmetic a;
    a.style = port.rope.shape.style;
    const ports::RopeComparison c = ports::compare_rope(port.rope, a, static_cast<std::size_t>(o.show));
    if (!c.error.ok()) {
      err << "kvq verify: " << c.error << " (manifest " << port.manifest << ")\n";
      return 2;
    }
    out << ports::describe_rope(port.rope, a, c);
    return c.exact() ? 0 : 1;
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
  return c.exact() ? 0 : 1;
}

int identify_command(const Args& args, std::ostream& out, std::ostream& err) {
  PortOptions o;
  if (auto e = parse(args, false, &o); !e.empty()) {
    err << "kvq identify: " << e << "\nusage: kvq identify --inputs DIR --outputs DIR [--manifest FILE] [--changes 0|1|2] [--show N]\n";
    return 2;
  }
  LoadedPort port;
  if (auto e = load_port(o.files, &port); !e.empty()) {
    err << "kvq identify: " << e << "\n";
    return 2;
  }
  if (port.kind == PortKind::mla_cache) {
    err << "kvq identify: an MLA cache has one model for its layout; run kvq verify mla-cache\n";
    return 2;
  }
  if (port.kind == PortKind::rope) {
    const ports::RopeIdentification id = ports::identify_rope(port.rope, static_cast<std::size_t>(o.show));
    if (id.tried == 0) {
      err << "kvq identify: the RoPE model cannot read " << port.manifest << " (see kvq verify rope-fp8 for why)\n";
      return 2;
    }
    out << "kvq identify: " << id.tried << " RoPE arithmetic variants tried; " << id.exact.size() << " reproduce every byte\n";
    for (const auto& c : id.exact) out << "  exact: this port follows " << c.arithmetic.phrase() << "\n";
    if (!id.nearest.empty()) out << (id.exact.empty() ? "  nearest (bytes differing):\n" : "  next nearest (bytes differing):\n");
    for (const auto& c : id.nearest) out << "    " << c.arithmetic.phrase() << ": " << c.comparison.differing() << "\n";
    return id.exact.empty() ? 1 : 0;
  }
  if (port.kind == PortKind::paged_store) {
    const ports::PagedIdentification id = ports::identify_paged(port.paged, static_cast<std::size_t>(o.show));
    if (id.tried == 0) {
      err << "kvq identify: no named recipe's paged store takes the tensors of " << port.manifest
          << " (see kvq verify RECIPE for why)\n";
      return 2;
    }
    out << "kvq identify: " << id.tried << " paged-store recipes tried; " << id.exact.size() << " reproduce every cache byte\n";
    for (const auto& c : id.exact) out << "  exact: this port follows " << c.recipe << "\n";
    if (!id.nearest.empty()) out << (id.exact.empty() ? "  nearest (bytes differing):\n" : "  next nearest (bytes differing):\n");
    for (const auto& c : id.nearest) out << "    " << c.recipe << ": " << c.differing() << "\n";
    return id.exact.empty() ? 1 : 0;
  }
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
