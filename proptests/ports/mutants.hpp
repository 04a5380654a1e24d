// A catalogue of deliberately broken kernels, one or more per recipe-level bug class of
// the bug classes seen in public kernels (docs/ports.md), built only for tests: each is kvq's CPU twin run with a changed Recipe
// (data, formats/recipes.hpp) or a changed layout/decode step. `kvq check --mutants` (suite
// `mutants`) runs the port properties against each one; every mutant must be caught.
#pragma once

#include <string_view>
#include <vector>

#include "proptests/ports/mutant_bodies.hpp"
#include "proptests/ports/port_kernel.hpp"

namespace kvq::ports {

struct Mutant {
  std::string_view name;
  std::string_view bug_class;  // the bug class it plants
  std::string_view base;       // the named recipe the mutant claims to implement
  Recipe quantize_recipe;      // what its quantize kernel runs
  Recipe dequantize_recipe;    // what its dequantize kernel runs
  MutantBugs bugs;             // the rest: decode step, workspace rounding, nibble order, factor 6
};

const std::vector<Mutant>& mutants();
PortKernel mutant_kernel(const Mutant& m);         // the CPU twin variant
PortKernel device_mutant_kernel(const Mutant& m);  // the device variant (host pointers in, copies to the GPU)

}  // namespace kvq::ports
