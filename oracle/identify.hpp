// kvq identify: which recipe, convention and variant a port's outputs follow. Variants are
// Recipe data (formats/recipes.hpp fields) plus the layout reading (nibble order, global-scale
// convention), one or two changes away from a named recipe; each is run through the model and
// compared with the port's outputs.
#pragma once

#include <string>
#include <vector>

#include "oracle/verify.hpp"

namespace kvq::ports {

struct Variant {
  std::string base;                  // a named recipe (formats/recipe_names.hpp)
  Interpretation how;
  std::vector<std::string> changes;  // what differs from the base, in words ("ties round up")
  std::string phrase() const;        // "nvfp4-vllm except ties round up and block 32"
};

struct Candidate {
  Variant variant;
  Comparison comparison;
};

struct Identification {
  std::size_t tried = 0;
  std::vector<Candidate> exact;    // reproduce every output, fewest changes first
  std::vector<Candidate> nearest;  // by mismatch count (when nothing is exact, or for context)
};

// Every variant at most max_changes away from a named recipe that fits the data's layout.
std::vector<Variant> variants_for(const PortData& d, int max_changes);
// Tries variants by distance 0, 1, ... max_changes, stopping at the first distance with an exact match.
Identification identify(const PortData& d, int max_changes, std::size_t nearest);

}  // namespace kvq::ports
