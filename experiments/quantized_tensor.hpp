// A tensor through a recipe on the CPU twin (the code the GPU kernels run) or the GPU kernels: codes, scales, the
// dequantized values, and per element its code and its block's decode scale. Shared by the studies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/recipe_names.hpp"
#include "kernels/quantize.hpp"

namespace kvq::experiments {

struct QuantizedTensor {
  kernels::QuantizeShape shape;
  float g = 0;                             // tensor scale (amax as the recipe defines it)
  std::vector<std::uint8_t> codes, scales;  // as the kernels store them
  std::vector<float> values;               // dequantized, FP32

  std::uint8_t code(std::int64_t k) const;        // element code of flat index k
  std::uint8_t scale_code(std::int64_t k) const;  // its block's scale code (0 per tensor)
  double decode_scale(std::int64_t k) const;      // its block's decode scale: sf * g, 2^e or g
  bool clipped(std::int64_t k, float x) const;    // the top code, with |x| beyond its value
};

// rows x cols FP32 values (row-major) through the recipe (block already set); throws on a bad shape.
// on_device: amax, quantize and dequantize by the GPU kernels (== the CPU twins, byte for byte;
// property gpu/studies/quantized-tensor-device-equals-cpu), so a study's output does not change.
QuantizedTensor quantize_tensor(const Recipe& r, const std::vector<float>& x, std::int64_t rows, int cols,
                                bool on_device = false);

// The recipes of a study: names, or every named recipe when empty; "" or an error naming --recipes.
std::string recipes_from_names(const std::vector<std::string>& names, std::vector<NamedRecipe>* out);
// The manifest member "recipes": each recipe's name, element, default block and scale convention.
std::string recipes_manifest(const std::vector<NamedRecipe>& recipes);

}  // namespace kvq::experiments
