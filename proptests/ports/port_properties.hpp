// The kernel properties any port must satisfy, as functions of a PortKernel: kvq's twins pass
// them (suite `ports`), every mutant fails at least one (suite `mutants`, kvq check --mutants),
// and a C ABI plug-in runs them (kvq check --plugin LIB.so). Expected values come from kvq's
// recipe model, which suite `recipes` holds to the oracle bit for bit.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "proptests/ports/port_kernel.hpp"
#include "proptests/harness/property.hpp"

namespace kvq::ports {

struct PortProperty {
  std::string name;
  std::string checks;  // one line: what it holds the port to
  std::function<props::Outcome(const props::RunContext&, const PortKernel&)> run;
};

const std::vector<PortProperty>& port_properties();

// Runs every port property against one kernel (ids "<prefix>/<property>"), each with its own
// derived seed; the caller reports.
struct PortRun {
  std::string property;
  props::Outcome outcome;
};
std::vector<PortRun> run_port_properties(const PortKernel& k, const std::string& prefix, const props::RunContext& ctx);

}  // namespace kvq::ports
