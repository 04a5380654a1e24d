// A port's tensors in memory (read by cli/port_files.cpp from .npy/.safetensors and a manifest),
// and their comparison with a recipe model: what `kvq verify` reports and `kvq identify` ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/port_layout.hpp"
#include "kernels/quantize.hpp"
#include "kernels/status.hpp"

namespace kvq::ports {

using kernels::DType;

using kernels::NibbleOrder;  // kernels/port_layout.hpp: one source for the host and device comparisons
using kernels::ScaleLayout;
using kernels::scale_index;
using kernels::scale_layout_bytes;
// The stored global scale is g, 1/g, or amax itself (the four-over-six package stores amax and
// derives its scales from it: formats/recipes.hpp tensor_param_is_amax).
enum class ScaleConvention : std::uint8_t { decode, encode, amax };

struct GlobalScale {
  float value = 0;
  ScaleConvention convention = ScaleConvention::decode;
  bool is_output = false;  // written by the port (checked) or given to it (used as is)
};

// The bytes of one of a port's tensors: bytes it owns (read from a file, built by a test), or a view
// of memory that the caller keeps alive while the port's data is in use (a CPU tensor from Python,
// read in place: docs/python.md), aligned for its elements. Copies share the bytes; nothing writes them.
class PortBytes {
 public:
  PortBytes() = default;
  PortBytes(std::vector<std::uint8_t> owned)  // NOLINT: implicit, a file's bytes become the port's
      : owned_(std::make_shared<const std::vector<std::uint8_t>>(std::move(owned))),
        data_(owned_->data()),
        size_(owned_->size()) {}
  static PortBytes view(const std::uint8_t* data, std::size_t size) {
    PortBytes b;
    b.data_ = data, b.size_ = size;
    return b;
  }
  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::uint8_t operator[](std::size_t i) const { return data_[i]; }

 private:
  std::shared_ptr<const std::vector<std::uint8_t>> owned_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

struct PortData {
  std::int64_t rows = 0, cols = 0;  // x is [rows, cols], cols = head_dim (the last dimension)
  DType input = DType::fp32;
  PortBytes x;       // raw input values
  PortBytes codes;   // raw code bytes: packed (two 4-bit codes a byte) or one a byte
  PortBytes scales;  // one byte per block, in scale_layout; empty for per-tensor recipes
  bool has_scales = false;
  std::optional<GlobalScale> global_scale;
  std::optional<PortBytes> dequantized;  // the port's dequantize of its own codes, raw values in:
  DType dequantized_type = DType::fp32;  // the dtype the port wrote them in
  NibbleOrder nibbles = NibbleOrder::low_first;
  ScaleLayout scale_layout = ScaleLayout::row_major;
  int block = 0;  // from the manifest; 0: the recipe's

  float input_value(std::int64_t i) const { return kernels::load_value(input, x.data(), i); }
  float amax() const { return kernels::amax_cpu(input, x.data(), rows * cols); }
  std::int64_t dequantized_count() const {
    return dequantized ? static_cast<std::int64_t>(dequantized->size()) / kernels::bytes_of(dequantized_type) : 0;
  }
  float dequantized_value(std::int64_t i) const { return kernels::load_value(dequantized_type, dequantized->data(), i); }
};

// How the model reads the port's data: the recipe (its block possibly changed) and the layout.
struct Interpretation {
  Recipe recipe;
  NibbleOrder nibbles = NibbleOrder::low_first;
  ScaleLayout scale_layout = ScaleLayout::row_major;
  bool scale_convention_flipped = false;  // read the port's global scale in the other convention
};

// The layout's name, as a manifest and the Python package write it.
const char* name_of(ScaleLayout l);

// The non-negative finite element values of a recipe, ascending.
std::vector<double> element_grid(const Recipe& r);

// The port's tensors by their sizes: what the layout check and the report need (the device
// comparison has the tensors on the GPU, not in a PortData).
struct PortSummary {
  std::int64_t rows = 0, cols = 0;
  DType input = DType::fp32;
  std::int64_t code_bytes = 0, scale_bytes = 0;
  bool has_scales = false;
  std::optional<std::int64_t> dequantized;  // how many values the port's dequantize wrote
  std::optional<GlobalScale> global_scale;
};
PortSummary summary_of(const PortData& d);

// Success when the port's tensors fit the recipe's layout (sizes of codes and scales); else the
// role and what is wrong.
Status check_layout(const PortSummary& d, const Interpretation& how);
inline Status check_layout(const PortData& d, const Interpretation& how) { return check_layout(summary_of(d), how); }
// The element code of element i (row-major), from packed or one-a-byte codes.
std::uint8_t port_code(const PortData& d, const Recipe& r, NibbleOrder order, std::int64_t i);

struct CodeDifference {
  std::int64_t row = 0, col = 0;
  std::uint32_t x_bits = 0;
  std::uint8_t expected = 0, actual = 0;            // element codes
  std::uint8_t expected_scale = 0, actual_scale = 0;  // the block's scale codes
  float expected_value = 0, actual_value = 0;         // dequantized in FP32 (element * scale * g)
};
struct ScaleDifference {
  std::int64_t row = 0, block = 0;
  float block_max = 0;
  std::uint8_t expected = 0, actual = 0;
};
struct ValueDifference {  // the port's dequantized value against the model's decode of the port's codes
  std::int64_t row = 0, col = 0;
  std::uint8_t code = 0, scale = 0;
  float expected = 0, actual = 0;
};
struct ErrorSummary {  // |x - dequantized| against the recipe's bound, over elements it covers
  std::int64_t covered = 0, over_bound = 0;
  double max_ratio = 0;  // max |x - dq| / bound
  double max_error = 0;
};

struct Comparison {
  float g = 0;  // tensor decode scale the model used
  std::int64_t codes = 0, code_mismatches = 0;
  std::int64_t scales = 0, scale_mismatches = 0;
  bool global_scale_checked = false, global_scale_matches = true;
  float expected_global_scale = 0;
  std::int64_t dequantized_mismatches = 0;  // port's dequantized vs the model's decode of the port's codes
  std::int64_t dequantized_checked = 0;
  std::vector<CodeDifference> first_codes;
  std::vector<ScaleDifference> first_scales;
  std::vector<ValueDifference> first_dequantized;
  ErrorSummary port_error, model_error;
  bool errors_computed = false;  // the error summaries (compare's `errors`)
  bool exact() const {
    return code_mismatches == 0 && scale_mismatches == 0 && global_scale_matches && dequantized_mismatches == 0;
  }
  std::int64_t mismatches() const {
    return code_mismatches + scale_mismatches + (global_scale_matches ? 0 : 1) + dequantized_mismatches;
  }
};

// The model's quantization of the port's x under `how`, compared with the port's outputs. keep:
// how many first differences to record; errors: whether to compute the error summaries.
// What a comparison covers: everything, by default. Only the comparator's mutants
// (proptests/comparator_properties.cpp) narrow it, planting the comparator bugs a verifier can
// have: the last rows or the last blocks of each row left out (an off-by-one bound), the block
// scales not compared (a role ignored).
struct CompareScope {
  std::int64_t rows_short = 0;    // the last rows_short rows not compared
  std::int64_t blocks_short = 0;  // the last blocks_short blocks of each row not compared
  bool scales = true;
};
Comparison compare(const PortData& d, const Interpretation& how, std::size_t keep, bool errors,
                   const CompareScope& scope = {});
// compare's first step: the tensor decode scale the codes are compared under (c->g), and the check
// of a port's own global scale (an output) against the one the recipe stores for the tensor's
// amax; amax() is called only where it is needed (the device comparison computes it on the GPU).
void compare_global_scale(const std::optional<GlobalScale>& gs, const Interpretation& how,
                          const std::function<float()>& amax, Comparison* c);

// The report of `kvq verify`: verdict, counts, first differences (input bits, codes in hex,
// decoded and exact values), error against the bound.
std::string describe(const PortSummary& d, const Interpretation& how, const std::string& recipe_name, const Comparison& c);
inline std::string describe(const PortData& d, const Interpretation& how, const std::string& recipe_name,
                            const Comparison& c) {
  return describe(summary_of(d), how, recipe_name, c);
}

}  // namespace kvq::ports
