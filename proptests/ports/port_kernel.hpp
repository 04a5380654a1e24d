// A quantize / dequantize implementation under test, whatever it is: kvq's own CPU twin, a
// mutant from the catalogue (proptests/ports/mutants.hpp), or a C ABI plug-in (proptests/ports/plugin.hpp). The port
// properties (proptests/ports/port_properties.hpp) run against this one interface. Host pointers; layout
// and tensor scale as kernels/quantize.hpp states (g = tensor_scale(recipe, amax), a decode scale).
#pragma once

#include <functional>
#include <string>

#include "kernels/quantize.hpp"

namespace kvq::ports {

using kernels::QuantizeShape;

struct PortKernel {
  std::string name;
  Recipe recipe;  // the recipe it claims to implement: the properties' reference
  // Each returns success or an error; an empty function is an entry point the port does not have.
  std::function<Status(const QuantizeShape&, kernels::DType input, const void* x, float g, std::uint8_t* codes,
                            std::uint8_t* scales)>
      quantize;
  std::function<Status(const QuantizeShape&, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                            kernels::DType output, void* y)>
      dequantize;
  std::function<Status(const QuantizeShape&, const std::uint8_t* codes, const std::uint8_t* scales, float factor,
                            std::uint8_t* out)>
      requantize_e4m3;
};

// kvq's own CPU twins under the recipe's name (the properties must pass on them).
PortKernel twin_kernel(std::string name, const Recipe& r);

}  // namespace kvq::ports
