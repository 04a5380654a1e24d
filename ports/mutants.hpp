// A catalogue of deliberately broken kernels, one or more per recipe-level bug class of
// REFERENCE.md section 7, built only for tests: each is kvq's CPU twin run with a changed Recipe
// (data, formats/recipes.hpp) or a changed layout/decode step. `kvq check --mutants` (suite
// `mutants`) runs the port properties against each one; every mutant must be caught.
#pragma once

#include <string_view>
#include <vector>

#include "ports/port_kernel.hpp"

namespace kvq::ports {

enum class DecodeBug : std::uint8_t {
  none,
  ignores_block_scale,  // value = element * g: the block scale dropped on the decode path
  nan_as_number,        // the E4M3 NaN code 0x7F/0xFF read as +-480 (the "next" binade's value)
};

struct Mutant {
  std::string_view name;
  std::string_view bug_class;  // REFERENCE.md section 7, in its words
  std::string_view base;       // the named recipe the mutant claims to implement
  Recipe quantize_recipe;      // what its quantize kernel runs
  Recipe dequantize_recipe;    // what its dequantize kernel runs
  float dequantize_g_factor = 1.0f;  // its dequantize multiplies the given g by this (factor-6 mismatch)
  bool swap_nibbles = false;         // element 2i packed in the high nibble
  DecodeBug decode = DecodeBug::none;
  bool workspace_through_fp32 = false;  // the E4M3 workspace rounds element*scale*factor to FP32 first
};

const std::vector<Mutant>& mutants();
PortKernel mutant_kernel(const Mutant& m);

}  // namespace kvq::ports
