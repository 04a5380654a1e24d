// Loads a C ABI plug-in (proptests/ports/kvq_port.h) with dlopen and wraps it as a PortKernel: host
// plug-ins are called directly; device plug-ins get device copies of inputs and outputs
// (outputs poisoned, with guard bytes checked after the call).
#pragma once

#include <memory>
#include <string>

#include "proptests/ports/port_kernel.hpp"

namespace kvq::ports {

struct Plugin {
  std::shared_ptr<void> handle;  // dlclose on release
  PortKernel kernel;
  bool device = false;
};

// "" on success, else a message naming the library and the symbol or value at fault.
std::string load_plugin(const std::string& path, Plugin* out);

}  // namespace kvq::ports
