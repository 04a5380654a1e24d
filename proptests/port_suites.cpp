// Suites `ports` (kvq's own twins pass every port property, for every recipe) and `mutants`
// (every broken kernel of ports/mutants.hpp is caught by at least one port property).
#include <sstream>

#include "formats/recipe_names.hpp"
#include "ports/mutants.hpp"
#include "ports/port_properties.hpp"

namespace kvq::props {
namespace {

// The last line of a failure's detail: the property's own description of the first difference.
std::string last_line(const std::string& detail) {
  std::string text = detail;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const auto nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

void register_port_suites() {
  for (const NamedRecipe& named : kRecipes)
    for (const ports::PortProperty& p : ports::port_properties()) {
      const ports::PortKernel twin = ports::twin_kernel(std::string(named.name), named.recipe);
      add_property("ports", std::string(named.name) + "/" + p.name, Device::cpu,
                   [twin, run = p.run](const RunContext& ctx) { return run(ctx, twin); });
    }
  for (const ports::Mutant& m : ports::mutants()) {
    add_property("mutants", std::string(m.name), Device::cpu, [&m](const RunContext& ctx) {
      const auto runs = ports::run_port_properties(ports::mutant_kernel(m), ctx.id, ctx);
      Outcome o;
      std::ostringstream os;
      os << m.name << " (" << m.bug_class << "; claims " << m.base << "):\n";
      bool caught = false;
      for (const auto& r : runs) {
        os << "  " << r.property << ": ";
        if (r.outcome.status == Status::failed) {
          caught = true;
          os << "CAUGHT after " << r.outcome.cases << " cases: " << last_line(r.outcome.detail) << "\n";
          o.classes.emplace_back("caught by " + r.property, static_cast<int>(r.outcome.cases));
          o.cases += r.outcome.cases;
        } else {
          os << name_of(r.outcome.status) << " (" << r.outcome.cases << " cases)\n";
          o.cases += r.outcome.cases;
        }
      }
      o.detail = os.str();
      if (!caught) {
        o.status = Status::failed;
        o.detail = "NOT CAUGHT by any port property: " + o.detail;
        o.replay = replay_line(ctx);
      }
      return o;
    });
  }
}
KVQ_REGISTER_PROPERTIES(register_port_suites);

}  // namespace
}  // namespace kvq::props
