// kvq check: the property suite with progress, a summary table, a JSON report,
// and on failure the minimal input and the one-line replay.
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <fstream>
#include <iostream>
#include <set>

#include "cli/commands.hpp"
#include "cli/output_files.hpp"
#include "cli/untrusted.hpp"
#include "proptests/ports/plugin.hpp"
#include "proptests/ports/port_properties.hpp"
#include "proptests/harness/runner.hpp"

namespace kvq::cli {

namespace {
constexpr const char* kCheckUsage =
    "usage: kvq check [--suite NAME]... [--property ID] [--match TEXT]... [--device cpu|cuda|all] [--cases N]\n"
    "                 [--seed S]"
    " [--report FILE.json] [--reproduce STRING] [--list]\n"
    "       kvq check --mutants [--cases N] [--seed S]     the mutant catalogue: each must be caught\n"
    "       kvq check --plugin LIB.so [--cases N] [--seed S] [--reproduce STRING]   a C ABI port (docs/ports.md)\n";

// The port properties against a plug-in, as registry properties under suite "plugin".
std::vector<props::Property> plugin_properties(const ports::Plugin& plugin) {
  std::vector<props::Property> out;
  for (const auto& p : ports::port_properties())
    out.push_back({"plugin", p.name, plugin.device ? props::Device::cuda : props::Device::cpu,
                   [kernel = plugin.kernel, run = p.run, device = plugin.device](const props::RunContext& ctx) {
                     std::string why;
                     if (device && !kernels::device::available(&why)) return props::skipped("device plug-in: " + why);
                     return run(ctx, kernel);
                   }});
  return out;
}
}

int check_command(const Args& args, std::ostream& out, std::ostream& err) {
  props::Selection selection;
  props::RunOptions options;
  std::string report, device = "all", plugin_path;
  bool list = false, mutants = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    auto number = [&](const char* what, std::int64_t min, std::int64_t max) -> std::optional<std::int64_t> {
      std::int64_t v = 0;
      if (auto e = integer_option(what, args[i + 1], min, max, &v); !e.empty()) {
        err << "kvq check: " << e << "\n";
        return std::nullopt;
      }
      return v;
    };
    if (a == "--suite" && has_value) {
      selection.suites.push_back(args[++i]);
    } else if (a == "--match" && has_value) {
      selection.matches.push_back(args[++i]);
    } else if (a == "--property" && has_value) {
      selection.property = args[++i];
    } else if (a == "--device" && has_value) {
      device = args[++i];
      if (device != "cpu" && device != "cuda" && device != "all") {
        err << "kvq check: --device is cpu, cuda or all, got '" << device << "'\n";
        return 2;
      }
    } else if (a == "--cases" && has_value) {
      const auto v = number("--cases", 1, 100000000);
      if (!v) return 2;
      options.cases = static_cast<int>(*v);
      ++i;
    } else if (a == "--seed" && has_value) {
      const auto v = number("--seed", 0, std::numeric_limits<std::int64_t>::max());
      if (!v) return 2;
      options.seed = *v;
      ++i;
    } else if (a == "--report" && has_value) {
      report = args[++i];
    } else if (a == "--reproduce" && has_value) {
      options.reproduce = args[++i];
    } else if (a == "--list") {
      list = true;
    } else if (a == "--mutants") {
      mutants = true;
      selection.suites.push_back("mutants");
    } else if (a == "--plugin" && has_value) {
      plugin_path = args[++i];
    } else {
      err << "kvq check: unexpected argument '" << a << "'\n" << kCheckUsage;
      return 2;
    }
  }
  selection.cpu = device != "cuda";
  selection.cuda = device != "cpu";
  std::set<std::string> known;
  for (const auto& p : props::registry()) known.insert(p.suite);
  for (const auto& s : selection.suites) {
    if (!known.count(s)) {
      err << "kvq check: unknown suite '" << s << "' (known:";
      for (const auto& k : known) err << " " << k;
      err << ")\n";
      return 2;
    }
  }
  ports::Plugin plugin;
  std::vector<props::Property> plugin_props;
  if (!plugin_path.empty()) {
    if (auto e = ports::load_plugin(plugin_path, &plugin); !e.empty()) {
      err << "kvq check: " << e << "\n";
      return 2;
    }
    out << "plug-in " << plugin.kernel.name << ", " << (plugin.device ? "device" : "host") << " pointers\n";
    plugin_props = plugin_properties(plugin);
  }
  auto chosen = props::select(selection);
  if (!plugin_path.empty()) {
    chosen.clear();
    for (const auto& p : plugin_props)
      if (selection.property.empty() || p.id() == selection.property) chosen.push_back(&p);
  }
  if (chosen.empty()) {
    err << "kvq check: no property matches the selection\n";
    return 2;
  }
  if (!options.reproduce.empty()) {  // a replay string replays properties the selection runs
    const auto ids = props::reproduce_ids(options.reproduce);
    if (!ids) {
      err << "kvq check: --reproduce: not a replay string (copy it from a failure's replay line)\n";
      return 2;
    }
    for (const auto& id : *ids)
      if (std::none_of(chosen.begin(), chosen.end(), [&](const props::Property* p) { return p->id() == id; })) {
        err << "kvq check: --reproduce replays '" << id << "', which the selection does not run (add --property " << id
            << ")\n";
        return 2;
      }
  }
  if (list) {
    for (const auto* p : chosen) out << props::name_of(p->device) << "\t" << p->id() << "\n";
    return 0;
  }
  const auto results = props::run_properties(chosen, options, err);
  props::print_summary(results, out);
  props::print_failures(results, out);
  if (mutants) {
    out << "\nmutants (proptests/ports/mutants.hpp): which port property caught each\n";
    for (const auto& r : results) out << r.outcome.detail;
  }
  if (!plugin_path.empty() && props::totals(results).failed)
    out << "(replay a plug-in failure with --plugin " << plugin_path << " added to the replay line)\n";
  if (!report.empty()) {
    OutputFiles files;
    std::string e = write_file(files.stage(report), props::json_report(results, options));
    if (e.empty()) e = files.commit();
    if (!e.empty()) {
      err << "kvq check: --report: " << e << "\n";
      return 2;
    }
    out << "report: " << report << "\n";
  }
  const auto t = props::totals(results);
  if (t.skipped > 0) out << "NOTE: " << t.skipped << " properties SKIPPED (see the table)\n";
  return t.failed == 0 ? 0 : 1;
}

}  // namespace kvq::cli
