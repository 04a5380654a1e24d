// The table of a g's code terms (formats/packed_quantize.hpp: CodeTerms) for the kernels (nvcc
// only): each thread block computes it once into shared memory, a thread an entry (a plan reads it
// at a per-thread index).
#pragma once

#include "formats/packed_quantize.hpp"

namespace kvq::kernels {

// Entry threadIdx.x of the table of recipe r's plans for g (recipe_code_terms; threads kE4m3Codes
// and up write nothing: a kernel has at least kE4m3Codes threads, static_assert there). The
// caller's barrier publishes it.
__device__ inline void fill_code_table(const Recipe& r, float g, float rg, CodeTerms* table) {
  if (threadIdx.x < kE4m3Codes) table[threadIdx.x] = recipe_code_terms(r, g, rg, static_cast<int>(threadIdx.x));
}

}  // namespace kvq::kernels
