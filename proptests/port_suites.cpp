// Suites `ports` (kvq's own twins pass every port property, for every recipe) and `mutants`
// (every broken kernel of proptests/ports/mutants.hpp is caught by at least one port property).
#include <algorithm>
#include <sstream>

#include "formats/recipe_names.hpp"
#include "kernels/quantize.hpp"
#include "proptests/ports/mutants.hpp"
#include "proptests/ports/port_properties.hpp"

namespace kvq::props {
namespace {

// The last line of a failure's detail: the property's own description of the first difference.
std::string last_line(const std::string& detail) {
  std::string text = detail;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const auto nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

// Passes when at least one port property fails on the mutant; the detail says which, after how many cases.
Outcome caught(const ports::Mutant& m, const ports::PortKernel& kernel, const RunContext& ctx) {
  const auto runs = ports::run_port_properties(kernel, ctx.id, ctx);
  Outcome o;
  std::ostringstream os;
  os << kernel.name << " (" << m.bug_class << "; claims " << m.base << "):\n";
  bool any = false;
  for (const auto& r : runs) {
    os << "  " << r.property << ": ";
    o.cases += r.outcome.cases;
    if (r.outcome.status == Status::failed) {
      any = true;
      os << "CAUGHT after " << r.outcome.cases << " cases: " << last_line(r.outcome.detail) << "\n";
      o.classes.emplace_back("caught by " + r.property, static_cast<int>(r.outcome.cases));
    } else {
      os << name_of(r.outcome.status) << " (" << r.outcome.cases << " cases)\n";
    }
  }
  o.detail = os.str();
  if (!any) {
    o.status = Status::failed;
    o.detail = "NOT CAUGHT by any port property: " + o.detail;
    o.replay = replay_line(ctx);
  }
  return o;
}

void register_port_suites() {
  for (const NamedRecipe& named : kRecipes)
    for (const ports::PortProperty& p : ports::port_properties()) {
      const ports::PortKernel twin = ports::twin_kernel(std::string(named.name), named.recipe);
      add_property("ports", std::string(named.name) + "/" + p.name, Device::cpu,
                   [twin, run = p.run](const RunContext& ctx) { return run(ctx, twin); });
    }
  for (const ports::Mutant& m : ports::mutants())
    add_property("mutants", std::string(m.name), Device::cpu,
                 [&m](const RunContext& ctx) { return caught(m, ports::mutant_kernel(m), ctx); });
}
KVQ_REGISTER_PROPERTIES(register_port_suites);

// The device variant of every mutant (kvq's CUDA kernels with the mutant's recipe, and the mutant
// bodies of proptests/ports/mutants_device.cu) must be caught on the GPU too.
void register_device_mutants() {
  for (const ports::Mutant& m : ports::mutants())
    add_property("gpu", "mutants/" + std::string(m.name) + "/device", Device::cuda, [&m](const RunContext& ctx) {
      std::string why;
      if (!kernels::device::available(&why)) return skipped(why);
      RunContext fewer = ctx;  // every call allocates and copies: a tenth of the cases, as the other GPU properties
      fewer.cases = std::max(1, ctx.cases / 10);
      return caught(m, ports::device_mutant_kernel(m), fewer);
    });
}
KVQ_REGISTER_PROPERTIES(register_device_mutants);

}  // namespace
}  // namespace kvq::props
