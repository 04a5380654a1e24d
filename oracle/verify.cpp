#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>

#include "formats/names.hpp"
#include "oracle/oracle.hpp"
#include "oracle/report_text.hpp"
#include "oracle/verify.hpp"

namespace kvq::ports {

std::string hex_digits(std::uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, v);
  return buf;
}
std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
std::string exact_decimal(float v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  const oracle::Real r = oracle::real_of_float(v);
  return (r.negative ? "-" : "") + oracle::decimal_expansion(r.magnitude);
}

std::string buffer_line(const std::string& name, std::int64_t bytes, std::int64_t addressed_mismatches,
                        std::int64_t untouched_changed, bool before_known, const std::string& addressed_what,
                        const std::string& untouched_what) {
  const std::string unchecked = before_known ? "" : " (the bytes no input addresses not checked: give \"poison\" or \"before\")";
  if (addressed_mismatches + untouched_changed == 0)
    return "  " + name + ": every one of " + std::to_string(bytes) + " bytes as the model writes it" + unchecked + "\n";
  return "  " + name + ": " + std::to_string(addressed_mismatches) + " " + addressed_what + ", " + std::to_string(untouched_changed) +
         " " + untouched_what + ", of " + std::to_string(bytes) + unchecked + "\n";
}

namespace {

bool packed_element(const Recipe& r) { return format_of(r.element).bits() == 4; }
int block_of(const Recipe& r) { return r.scale == BlockScale::tensor_only ? 1 : r.block; }

// The effective decode scale D of a block from its scale code; 0 where the bound does not apply.
long double block_scale(const Recipe& r, float g, std::uint8_t scale) {
  switch (r.scale) {
    case BlockScale::e4m3_two_level: {
      if (!(g >= 0x1p-100f && g <= 0x1p100f)) return 0;
      const long double d = static_cast<long double>(e4m3_value_fast(scale)) * g;
      return std::isfinite(static_cast<double>(d)) && d >= 0x1p-120L ? d : 0;
    }
    case BlockScale::e8m0_pow2: return scale == 0xFF ? 0 : std::ldexp(1.0L, static_cast<int>(scale) - 127);
    case BlockScale::tensor_only: return g >= 0x1p-100f && g <= 0x1p100f ? g : 0;
  }
  return 0;
}

// docs/recipes.md "Error bounds": |x - dq| <= D * (gap/2 [+ 2^-18 * max(hi, 1)]), gap = hi - lo
// around |x|/D; elements past the element max (saturation), zero-guarded blocks and non-finite
// values are not covered. 0 when not covered.
long double error_bound(const Recipe& r, const std::vector<double>& grid, long double d, float x) {
  if (d <= 0 || !std::isfinite(x)) return 0;
  const long double a = std::fabs(static_cast<long double>(x)) / d;
  if (a > grid.back()) return 0;
  std::size_t k = 1;
  while (k < grid.size() && grid[k] <= a) ++k;
  if (k == grid.size()) return 0;  // exactly the max: no gap above
  const long double lo = grid[k - 1], hi = grid[k];
  long double bound = d * (hi - lo) / 2;
  if (r.scale != BlockScale::e8m0_pow2) bound += d * std::ldexp(1.0L, -18) * (hi > 1 ? hi : 1);
  return bound;
}

void tally_error(ErrorSummary* s, long double bound, float x, float dq) {
  if (bound <= 0 || !std::isfinite(dq)) return;
  const long double err = std::fabs(static_cast<long double>(x) - static_cast<long double>(dq));
  ++s->covered;
  if (err > bound) ++s->over_bound;
  s->max_ratio = std::max(s->max_ratio, static_cast<double>(err / bound));
  s->max_error = std::max(s->max_error, static_cast<double>(err));
}

}  // namespace

std::vector<double> element_grid(const Recipe& r) {
  std::vector<double> grid;
  const int magnitudes = 1 << (format_of(r.element).bits() - 1);
  for (int c = 0; c < magnitudes; ++c) {
    const float v = element_value(r, static_cast<std::uint8_t>(c));
    if (std::isfinite(v) && v >= 0 && (grid.empty() || v > grid.back())) grid.push_back(v);
  }
  return grid;
}

const char* name_of(ScaleLayout l) {
  switch (l) {
    case ScaleLayout::row_major: return "row_major";
    case ScaleLayout::token_group4: return "token_group4";
    case ScaleLayout::swizzle_128x4: return "swizzle_128x4";
  }
  return "";
}

PortSummary summary_of(const PortData& d) {
  PortSummary s{d.rows, d.cols, d.input, static_cast<std::int64_t>(d.codes.size()),
                static_cast<std::int64_t>(d.scales.size()), d.has_scales, std::nullopt, d.global_scale};
  if (d.dequantized) s.dequantized = d.dequantized_count();
  return s;
}

Status check_layout(const PortSummary& d, const Interpretation& how) {
  const Recipe& r = how.recipe;
  std::ostringstream os;
  const std::int64_t n = d.rows * d.cols;
  const int block = block_of(r);
  if (d.cols <= 0) {
    os << "x: head_dim (last dimension) must be > 0";
  } else if (d.cols % block) {
    os << "x: head_dim " << d.cols << " is not a multiple of the block size " << block;
  } else if (block > kMaxRecipeBlock) {
    os << "block " << block << " is larger than " << kMaxRecipeBlock;
  } else if (!(d.code_bytes == n ||
               (packed_element(r) && d.cols % 2 == 0 && d.code_bytes * 2 == n))) {
    os << "codes: " << d.code_bytes << " bytes, expected " << (packed_element(r) ? std::to_string(n / 2) + " (packed "
       + std::string(name_of(r.element)) + ", two a byte) or " : std::string()) << n << " (one code a byte) for x of "
       << d.rows << "x" << d.cols;
  } else if (r.scale != BlockScale::tensor_only && !d.has_scales) {
    os << "block_scales: the recipe has a scale per " << block << " elements; the manifest names no block_scales";
  } else if (r.scale != BlockScale::tensor_only &&
             d.scale_bytes != scale_layout_bytes(how.scale_layout, d.rows, d.cols / block)) {
    os << "block_scales: " << d.scale_bytes << " bytes, expected " << scale_layout_bytes(how.scale_layout, d.rows, d.cols / block)
       << " (one per " << block << " elements of " << d.rows << "x" << d.cols << ", " << name_of(how.scale_layout) << ")";
  } else if (d.dequantized && *d.dequantized != n) {
    os << "dequantized: " << *d.dequantized << " values, expected " << n;
  }
  return os.str();
}

std::uint8_t port_code(const PortData& d, const Recipe& r, NibbleOrder order, std::int64_t i) {
  return kernels::port_element_code(d.codes.data(), packed_element(r),
                                    packed_element(r) && static_cast<std::int64_t>(d.codes.size()) != d.rows * d.cols, order, i);
}

namespace {
// The convention a stored global scale is read in (identify may flip decode <-> encode).
ScaleConvention read_convention(const GlobalScale& gs, const Interpretation& how) {
  if (gs.convention == ScaleConvention::amax || !how.scale_convention_flipped) return gs.convention;
  return gs.convention == ScaleConvention::decode ? ScaleConvention::encode : ScaleConvention::decode;
}
// The recipe's tensor parameter (tensor_scale: g, e for an encode parameter, amax for the
// four-over-six package's rules) from a global scale v stored in convention c.
float param_from(const Recipe& r, ScaleConvention c, float v) {
  if (c == ScaleConvention::amax) return tensor_scale(r, v);  // the recipe's own rule from amax
  const bool amax_form = tensor_param_is_amax(r), encode_form = r.tensor_param == TensorParam::encode;
  if (c == ScaleConvention::decode) return amax_form ? v * r.tensor_divisor : (encode_form ? 1.0f / v : v);
  return amax_form ? r.tensor_divisor / v : (encode_form ? v : 1.0f / v);  // encode
}
// The global scale a port following recipe r stores in convention c, from the tensor's amax;
// alternative: the other way an encode scale may be computed (1/(amax/D) or D/amax).
struct StoredScale {
  float value, alternative;
};
StoredScale stored_scale(const Recipe& r, ScaleConvention c, float amax) {
  const float param = tensor_scale(r, amax);
  if (c == ScaleConvention::amax) return {amax, amax};
  const bool amax_form = tensor_param_is_amax(r), encode_form = r.tensor_param == TensorParam::encode;
  const float decode = amax_form ? amax / r.tensor_divisor : (encode_form ? 1.0f / param : param);
  if (c == ScaleConvention::decode) return {decode, decode};
  return {encode_form ? param : 1.0f / decode, r.tensor_divisor / amax};
}
}  // namespace

void compare_global_scale(const std::optional<GlobalScale>& gs, const Interpretation& how,
                          const std::function<float()>& amax, Comparison* c) {
  const Recipe& r = how.recipe;
  if (gs && !gs->is_output) {
    c->g = param_from(r, read_convention(*gs, how), gs->value);
    return;
  }
  const float tensor_amax = amax();
  c->g = tensor_scale(r, tensor_amax);
  if (gs && gs->is_output && r.scale != BlockScale::e8m0_pow2) {
    const float port = gs->value;
    c->global_scale_checked = true;
    const ScaleConvention conv = read_convention(*gs, how);
    const StoredScale expected = stored_scale(r, conv, tensor_amax);
    c->expected_global_scale = expected.value;
    c->global_scale_matches = bits_of(port) == bits_of(expected.value) || bits_of(port) == bits_of(expected.alternative);
    c->g = param_from(r, conv, port);  // the codes are compared under the port's own scale
  }
}

Comparison compare(const PortData& d, const Interpretation& how, std::size_t keep, bool errors, const CompareScope& scope) {
  const Recipe& r = how.recipe;
  Comparison c;
  c.errors_computed = errors;
  compare_global_scale(d.global_scale, how, [&] { return d.amax(); }, &c);
  const int n = block_of(r);
  const bool blocked = r.scale != BlockScale::tensor_only;
  const std::vector<double> grid = errors ? element_grid(r) : std::vector<double>{};
  float values[kMaxRecipeBlock];
  std::uint8_t expected[kMaxRecipeBlock];
  for (std::int64_t row = 0; row < d.rows - scope.rows_short; ++row) {
    for (std::int64_t b = 0; b < d.cols / n - scope.blocks_short; ++b) {
      const std::int64_t first = row * d.cols + b * n;
      float bmax = 0;
      for (int i = 0; i < n; ++i) {
        values[i] = d.input_value(first + i);
        const float a = std::fabs(values[i]);
        bmax = a > bmax ? a : bmax;
      }
      const std::uint8_t want_scale = quantize_block(r, c.g, values, n, expected);
      const std::uint8_t got_scale = blocked ? d.scales[scale_index(how.scale_layout, d.cols / n, row, b)] : 0;
      if (blocked && scope.scales) {
        ++c.scales;
        if (want_scale != got_scale) {
          ++c.scale_mismatches;
          if (c.first_scales.size() < keep) c.first_scales.push_back({row, b, bmax, want_scale, got_scale});
        }
      }
      const long double want_d = errors ? block_scale(r, c.g, want_scale) : 0;
      for (int i = 0; i < n; ++i) {
        const std::int64_t k = first + i;
        const std::uint8_t got = port_code(d, r, how.nibbles, k);
        ++c.codes;
        const float got_value = dequantize_element(r, c.g, got_scale, got);
        const float got_in_port_dtype = kernels::in_port_dtype(d.dequantized_type, got_value);
        if (got != expected[i]) {
          ++c.code_mismatches;
          if (c.first_codes.size() < keep)
            c.first_codes.push_back({row, b * n + i, bits_of(values[i]), expected[i], got, want_scale, got_scale,
                                     dequantize_element(r, c.g, want_scale, expected[i]), got_value});
        }
        if (d.dequantized) {
          ++c.dequantized_checked;
          const float port = d.dequantized_value(k);
          if (!kernels::dequantized_matches(port, got_in_port_dtype)) {
            ++c.dequantized_mismatches;
            if (c.first_dequantized.size() < keep)
              c.first_dequantized.push_back({row, b * n + i, got, got_scale, got_in_port_dtype, port});
          }
        }
        if (errors) {
          const long double bound = error_bound(r, grid, want_d, values[i]);
          tally_error(&c.model_error, bound, values[i], dequantize_element(r, c.g, want_scale, expected[i]));
          tally_error(&c.port_error, bound, values[i], got_value);
        }
      }
    }
  }
  return c;
}


std::string describe(const PortSummary& d, const Interpretation& how, const std::string& recipe_name, const Comparison& c) {
  const Recipe& r = how.recipe;
  const Format scale_format = r.scale == BlockScale::e4m3_two_level ? kE4M3FN : kE8M0FNU;
  std::ostringstream os;
  os << "kvq verify " << recipe_name << ": " << (c.exact() ? "BIT-EXACT" : "MISMATCH") << "\n";
  os << "  x: " << d.rows << "x" << d.cols << " " << kernels::name_of(d.input) << "; codes "
     << (packed_element(r) && d.code_bytes * 2 == d.rows * d.cols
             ? std::string("packed, element 2i in the ") + (how.nibbles == NibbleOrder::low_first ? "low" : "high") + " nibble"
             : std::string("one a byte"))
     << "; block " << (r.scale == BlockScale::tensor_only ? std::string("(per tensor)") : std::to_string(r.block) + ", scales " + name_of(how.scale_layout))
     << "; tensor decode scale g = " << hex_digits(bits_of(c.g), 8) << " = " << number(c.g)
     << (d.global_scale ? (d.global_scale->is_output ? " (the port's)" : " (given to the port)") : " (amax / divisor)")
     << "\n";
  os << "  codes: " << c.code_mismatches << " of " << c.codes << " differ";
  if (r.scale != BlockScale::tensor_only) os << "; block scales: " << c.scale_mismatches << " of " << c.scales << " differ";
  if (c.global_scale_checked)
    os << "; global scale: port " << hex_digits(bits_of(d.global_scale->value), 8) << " = " << number(d.global_scale->value)
       << (c.global_scale_matches ? " matches" : ", expected " + hex_digits(bits_of(c.expected_global_scale), 8) + " = " +
                                                     number(c.expected_global_scale) + " (ratio " +
                                                     number(static_cast<double>(d.global_scale->value) / c.expected_global_scale) + ")");
  if (c.dequantized_checked) os << "; dequantized: " << c.dequantized_mismatches << " of " << c.dequantized_checked << " differ";
  os << "\n";
  if (!c.first_scales.empty()) {
    os << "  first block-scale differences (row, block: block max; expected -> actual):\n";
    for (const auto& s : c.first_scales)
      os << "    (" << s.row << ", " << s.block << "): bmax " << hex_digits(bits_of(s.block_max), 8) << " = "
         << exact_decimal(s.block_max) << "; " << hex_digits(s.expected, 2) << " (" << number(decode_float(scale_format, s.expected))
         << ") -> " << hex_digits(s.actual, 2) << " (" << number(decode_float(scale_format, s.actual)) << ")\n";
  }
  if (!c.first_codes.empty()) {
    os << "  first code differences (row, col: input bits = exact value; scale expected/actual; code expected -> "
          "actual; decoded expected / actual):\n";
    for (const auto& e : c.first_codes) {
      const float x = float_from_bits(e.x_bits);
      os << "    (" << e.row << ", " << e.col << "): x " << hex_digits(e.x_bits, 8) << " = " << exact_decimal(x);
      if (r.scale != BlockScale::tensor_only) os << "; scale " << hex_digits(e.expected_scale, 2) << "/" << hex_digits(e.actual_scale, 2);
      os << "; code " << hex_digits(e.expected, 1) << " -> " << hex_digits(e.actual, 1) << "; decoded "
         << exact_decimal(e.expected_value) << " / " << exact_decimal(e.actual_value) << "\n";
    }
  }
  if (!c.first_dequantized.empty()) {
    os << "  first dequantized differences (row, col: the port's code and scale; expected -> the port's value):\n";
    for (const auto& v : c.first_dequantized)
      os << "    (" << v.row << ", " << v.col << "): code " << hex_digits(v.code, 1) << " scale " << hex_digits(v.scale, 2) << "; "
         << hex_digits(bits_of(v.expected), 8) << " = " << exact_decimal(v.expected) << " -> " << hex_digits(bits_of(v.actual), 8)
         << " = " << exact_decimal(v.actual) << "\n";
  }
  auto error_line = [&](const char* who, const ErrorSummary& s) {
    os << "    " << who << ": " << s.over_bound << " of " << s.covered << " covered elements over the bound; max |x - dq| "
       << number(s.max_error) << ", max |x - dq| / bound " << number(s.max_ratio) << "\n";
  };
  if (c.errors_computed) {
    os << "  error |x - dq| against the recipe's bound (docs/recipes.md \"Error bounds\"; bound from kvq's scale):\n";
    error_line("port", c.port_error);
    error_line("kvq ", c.model_error);
  }
  return os.str();
}

}  // namespace kvq::ports
