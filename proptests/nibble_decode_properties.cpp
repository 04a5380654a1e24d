// The 4-bit dequantize fast path (formats/fast_decode.hpp; dequantize_nibble_span in
// kernels/quantize.hpp) against the general element code, exhaustively: every scale code (one a
// row), every element code at every position of a word beside every code of its partner 16 bits
// away (the one that shares its isolating mask), and tensor scales g at zero, subnormal, ordinary,
// the largest NaN-free, the first not NaN-free, the largest finite, inf and NaN. The CPU twin (the
// kernel's code) against dequantize_scaled_element (suite kernels); the GPU kernel against the
// twin, byte for byte (suite gpu). The same for the prefill workspace (requantize_e4m3), over
// workspace factors that make factor * 2^10 or factor * 2^e inexact or non-finite; and the
// workspace of the 8-bit recipes (E4M3, INT8 codes sixteen at a time: byte_words_e4m3), every code
// at every scale code in a span with and without an E4M3 NaN code.
#include <cmath>
#include <cstring>
#include <sstream>

#include "formats/fast_decode.hpp"
#include "formats/float_bits.hpp"
#include "formats/recipe_names.hpp"
#include "kernels/quantize.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/harness/property.hpp"

namespace kvq::props {
namespace {

using kernels::DType;
using kernels::QuantizeShape;

constexpr std::int64_t kWordsPerRow = 256;  // word q: element i < 4 from q's low nibble, i >= 4 from its high one

struct CodeTensor {
  QuantizeShape shape;
  std::vector<std::uint8_t> codes, scales;
};

// 256 rows (row r: every block's scale code is r) x 256 words of eight codes.
CodeTensor every_code_and_scale(const Recipe& r) {
  CodeTensor t;
  t.shape = QuantizeShape{r, 256, 8 * kWordsPerRow};
  t.codes.resize(t.shape.code_bytes());
  t.scales.resize(t.shape.scale_bytes());
  for (std::int64_t row = 0; row < t.shape.rows; ++row) {
    for (std::int64_t q = 0; q < kWordsPerRow; ++q) {
      std::uint32_t word = 0;
      for (int i = 0; i < 8; ++i) {  // (element i, element i + 4) runs over all 256 pairs as q does
        const std::uint32_t code = i < 4 ? ((q & 15) + 5 * i) & 15 : ((q >> 4) + 3 * i) & 15;
        word |= code << (4 * i);
      }
      std::memcpy(&t.codes[(row * kWordsPerRow + q) * 4], &word, 4);
    }
    for (std::int64_t b = 0; b < t.shape.scales_per_row(); ++b)
      t.scales[row * t.shape.scales_per_row() + b] = static_cast<std::uint8_t>(row);
  }
  return t;
}

// The 8-bit recipes' workspace tensor: 256 rows (row r: scale code r) x 512 codes. Each half lists
// every code but the E4M3 NaN codes (0x7F, 0xFF) in order, the second rotated by 16, and ends with
// those two, so every other code sits in some span of sixteen without a NaN code (the NaN-free path;
// INT8 has no NaN codes) and the last span of each half holds both (the general element code).
CodeTensor every_byte_code_and_scale(const Recipe& r) {
  CodeTensor t;
  t.shape = QuantizeShape{r, 256, 512};
  t.codes.resize(t.shape.code_bytes());
  t.scales.resize(t.shape.scale_bytes());
  std::vector<std::uint8_t> plain;
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7F) != 0x7F) plain.push_back(static_cast<std::uint8_t>(c));
  for (std::int64_t row = 0; row < t.shape.rows; ++row) {
    std::uint8_t* codes = &t.codes[row * 512];
    for (int half = 0; half < 2; ++half) {
      for (std::size_t i = 0; i < plain.size(); ++i) codes[256 * half + i] = plain[(i + 16 * half) % plain.size()];
      codes[256 * half + 254] = 0x7F, codes[256 * half + 255] = 0xFF;
    }
    for (std::int64_t b = 0; b < t.shape.scales_per_row(); ++b)
      t.scales[row * t.shape.scales_per_row() + b] = static_cast<std::uint8_t>(row);
  }
  return t;
}

// g where the two-level or per-tensor decision or arithmetic changes (0, subnormal, the 2^118
// bound, the ends of kDecodeQuotientRange, inf, NaN), and amax or encode scales as a tensor of
// amax 7 has them; power-of-two recipes ignore g.
std::vector<float> tensor_scales(const Recipe& r) {
  if (r.scale == BlockScale::e8m0_pow2) return {1.0f, NAN};
  return {0.0f,      -0.0f,          0x1p-149f,       0x1.8p-140f, 0x1.fffffep-41f, 0x1p-40f,  1.0f / 2688.0f,
          1.0f,      -0.3f,          7.0f,            2688.0f / 7.0f, 0x1p40f,      0x1.000002p40f,
          0x1.fffffep117f, 0x1p118f, kFp32Max,        INFINITY,    -INFINITY,       NAN};
}

// Workspace factors (NaN is rejected): zero, subnormal, ordinary, the two-level bound, the largest
// finite, inf.
std::vector<float> workspace_factors() {
  return {0.0f, -0.0f, 0x1p-149f, 0x1.8p-140f, 1.0f / 6.0f, 1.0f, -0.37f, 3.1e5f, 0x1.fffffep117f, 0x1p118f,
          kFp32Max, INFINITY, -INFINITY};
}

// The recipes whose dequantize differs: element format x scale kind x block (fixed kernels and
// the generic one at block 8), block 4, not a whole word (the general element code), and the decode
// arithmetic of engine variants (an encode or amax tensor parameter, block-FP4's +0 zeros: the
// decode-only configurations of kernels/quantize_kernel.cuh).
std::vector<std::pair<std::string, Recipe>> nibble_recipes() {
  std::vector<std::pair<std::string, Recipe>> out;
  for (const char* name : {"nvfp4", "mxfp4-floor", "blockfp4-e8m0-ceil", "mxint4", "nvint4", "nvfp4-compressed-tensors",
                           "nvfp4-4over6", "nvfp4-4over6-static6"})
    out.emplace_back(name, recipe_from_name(name)->recipe);
  for (const int block : {32, 8, 4}) {
    Recipe r = recipe_from_name("nvfp4")->recipe;
    r.block = block;
    out.emplace_back("nvfp4-block" + std::to_string(block), r);
  }
  Recipe mx16 = recipe_from_name("mxfp4-floor")->recipe;
  mx16.block = 16;
  out.emplace_back("mxfp4-floor-block16", mx16);
  for (const TensorParam param : {TensorParam::encode, TensorParam::amax}) {  // INT4's v * sf: the smallest quotients
    Recipe r = recipe_from_name("nvint4")->recipe;
    r.tensor_param = param;
    out.emplace_back(param == TensorParam::encode ? "nvint4-encode" : "nvint4-amax", r);
  }
  return out;
}

// The 8-bit recipes whose workspace differs: E4M3 and INT8 codes, E8M0 blocks of 32 and 128, per
// tensor; block 16 (one span a block) and 8 (no whole span: the general element code).
std::vector<std::pair<std::string, Recipe>> byte_recipes() {
  std::vector<std::pair<std::string, Recipe>> out;
  for (const char* name : {"mxfp8-e4m3-floor", "mla-fp8-tile128", "mxint8", "fp8-e4m3-tensor"})
    out.emplace_back(name, recipe_from_name(name)->recipe);
  for (const int block : {16, 8}) {
    Recipe r = recipe_from_name("mxfp8-e4m3-floor")->recipe;
    r.block = block;
    out.emplace_back("mxfp8-e4m3-floor-block" + std::to_string(block), r);
  }
  return out;
}

// "scale code 0x.. element j code 0x.." of row (= scale code) and column j.
std::string where(const CodeTensor& t, std::int64_t row, std::int64_t j) {
  std::ostringstream os;
  os << "scale code 0x" << std::hex << row << std::dec << " element " << j << " code 0x" << std::hex
     << int{kernels::code_at(t.shape, t.codes.data() + row * t.shape.code_bytes_per_row(), j)};
  return os.str();
}
std::string describe(const CodeTensor& t, DType d, float g, std::int64_t row, std::int64_t j) {
  return std::string(kernels::name_of(d)) + " g " + hex_code(kFP32, bits_of(g)) + " " + where(t, row, j);
}

// Every element code under every scale code (8-bit codes: every byte under every scale code).
CodeTensor every_code_tensor(const Recipe& r) {
  return kernels::byte_span_codes(r.element) ? every_byte_code_and_scale(r) : every_code_and_scale(r);
}

// The route the CPU twin takes for element j of row `row` (docs/recipes.md "Decode routes"): the
// NaN-free decode of formats/fast_decode.hpp, the general element code on the same words, or the
// element code alone (a block that is no whole number of words), decided as the twin decides it
// (kernels/block_dequantize.hpp). `value` is g (dequantize) or the workspace factor.
enum class DecodeRoute : std::uint8_t { nan_free, general, element_code };
constexpr const char* kDecodeRouteNames[] = {"nan-free", "general", "element-code"};

bool span_has_e4m3_nan(const CodeTensor& t, std::int64_t row, std::int64_t first, int n) {
  for (int i = 0; i < n; ++i)
    if ((t.codes[row * t.shape.code_bytes_per_row() + first + i] & 0x7F) == 0x7F) return true;
  return false;
}

DecodeRoute decode_route(const CodeTensor& t, bool workspace, std::int64_t row, std::int64_t j, float value) {
  const QuantizeShape& s = t.shape;
  const Recipe& r = s.recipe;
  const int n = s.block();
  const std::uint8_t scale = s.scales_per_row() ? t.scales[row * s.scales_per_row() + j / n] : 0;
  if (s.packed()) {
    if (n % 8) return DecodeRoute::element_code;
    const bool nan_free = workspace ? nibble_requant_scaling(r, scale, value).nan_free : nibble_scaling(r, scale, value).nan_free;
    return nan_free ? DecodeRoute::nan_free : DecodeRoute::general;
  }
  const int span = workspace ? kernels::kByteSpan : 4;
  if (!kernels::byte_span_codes(r.element) || n % span) return DecodeRoute::element_code;
  const bool nan_code = r.element != FormatId::int8 && span_has_e4m3_nan(t, row, j / span * span, span);
  const bool nan_free = workspace ? byte_requant_scaling(r, scale, value).nan_free : byte_scaling(r, scale, value).nan_free;
  return nan_free && !nan_code ? DecodeRoute::nan_free : DecodeRoute::general;
}

// Elements a route decoded; every route the recipe's blocks can take must have some (a generator
// that loses NaN scales or large g would otherwise leave the general route untested silently).
// Whole words can always take the general route (a NaN scale code, or g = inf per tensor); they
// can take the NaN-free one where an ordinary block does (scale value 1, g or factor 1): some
// recipes never do (two-level 8-bit codes, INT8 per tensor; formats/fast_decode.hpp).
struct RouteCounts {
  std::int64_t count[3] = {};
  void add(DecodeRoute r) { ++count[static_cast<int>(r)]; }
  void require(const CodeTensor& t, bool workspace, Tally* tally) const {
    const QuantizeShape& s = t.shape;
    const int span = s.packed() ? 8 : (workspace ? kernels::kByteSpan : 4);
    const bool words = (s.packed() || kernels::byte_span_codes(s.recipe.element)) && s.block() % span == 0;
    const std::int64_t unit_row = s.recipe.scale == BlockScale::e8m0_pow2 ? 127 : 0x38;  // scale code of 1
    CodeTensor ordinary = t;
    for (std::int64_t j = 0; j < s.cols; ++j)  // the ordinary block's codes: no E4M3 NaN code
      ordinary.codes[unit_row * s.code_bytes_per_row() + (s.packed() ? j / 2 : j)] = 0x11;
    const bool nan_free_reachable = words && decode_route(ordinary, workspace, unit_row, 0, 1.0f) == DecodeRoute::nan_free;
    const bool required[3] = {nan_free_reachable, words, !words};  // nan_free, general, element_code
    for (int r = 0; r < 3; ++r)
      if (required[r] && count[r] == 0) tally->fail(std::string("route ") + kDecodeRouteNames[r] + " got no element");
  }
};

Outcome twin_equals_element_code(const RunContext& ctx, const Recipe& r, DType d) {
  const CodeTensor t = every_code_tensor(r);
  const QuantizeShape& s = t.shape;
  const int bytes = kernels::bytes_of(d);
  Tally tally;
  RouteCounts routes;
  std::vector<std::uint8_t> y(s.rows * s.cols * bytes), want(bytes);
  for (const float g : tensor_scales(r)) {
    const kvq::Status e = kernels::dequantize_cpu(s, t.codes.data(), t.scales.data(), g, d, y.data());
    if (!e.ok()) throw std::runtime_error(e.message());
    for (std::int64_t row = 0; row < s.rows; ++row) {
      for (std::int64_t j = 0; j < s.cols; ++j) {
        const std::uint8_t code = kernels::code_at(s, t.codes.data() + row * s.code_bytes_per_row(), j);
        const std::uint8_t scale = s.scales_per_row() ? t.scales[row * s.scales_per_row() + j / s.block()] : 0;
        const float v = dequantize_scaled_element(r, g, block_scale_value(r, scale), code);
        routes.add(decode_route(t, false, row, j, g));
        kernels::store_value(d, want.data(), 0, v);
        if (std::memcmp(want.data(), &y[(row * s.cols + j) * bytes], bytes) == 0) {
          tally.pass();
        } else {
          std::uint32_t got = 0, expected = 0;
          std::memcpy(&got, &y[(row * s.cols + j) * bytes], bytes);
          std::memcpy(&expected, want.data(), bytes);
          std::ostringstream os;
          os << describe(t, d, g, row, j) << std::hex << ": twin 0x" << got << ", element code 0x" << expected;
          tally.fail(os.str());
        }
      }
    }
  }
  routes.require(t, false, &tally);
  return tally.outcome(ctx);
}

// Decoding by magnitude (formats/fast_decode.hpp nibble_entries, nibble_word_from_entries) against
// the NaN-free values packed pairwise, for every word of every_code_and_scale under every scale
// code and g whose span is NaN-free, to BF16 and FP16, with the entries in either order.
Outcome entries_equal_values(const RunContext& ctx, const Recipe& r) {
  const CodeTensor t = every_code_and_scale(r);
  const int mag_shift = nibble_format(r.element).mag_shift;
  Tally tally;
  std::int64_t spans = 0;
  for (const float g : tensor_scales(r)) {
    for (int scale = 0; scale < 256; ++scale) {
      const NibbleScaling k = nibble_scaling(r, static_cast<std::uint8_t>(scale), g);
      if (!k.nan_free) continue;
      ++spans;
      for (const bool fp16 : {false, true}) {
        const NibbleEntries low = nibble_entries(k, mag_shift, 0, fp16), high = nibble_entries(k, mag_shift, 4, fp16);
        for (std::int64_t q = 0; q < kWordsPerRow; ++q) {
          std::uint32_t w = 0;
          std::memcpy(&w, &t.codes[(scale * kWordsPerRow + q) * 4], 4);
          float values[8];
          nibble_word_values(w, mag_shift, k, values);
          for (const bool swapped : {false, true}) {
            std::uint32_t got[4];
            nibble_word_from_entries(w, swapped ? high : low, swapped ? low : high, swapped, k.unsigned_zero, got);
            for (int i = 0; i < 4; ++i) {
              const std::uint32_t want = fp16 ? fp16x2_rne_finite(values[2 * i], values[2 * i + 1])
                                              : bf16x2_rne_finite(values[2 * i], values[2 * i + 1]);
              if (got[i] == want) {
                tally.pass();
              } else {
                std::ostringstream os;
                os << (fp16 ? "fp16" : "bf16") << " g " << hex_code(kFP32, bits_of(g)) << " scale code 0x" << std::hex
                   << scale << " word 0x" << w << " pair " << i << (swapped ? " (swapped)" : "") << ": by magnitude 0x"
                   << got[i] << ", values 0x" << want;
                tally.fail(os.str());
              }
            }
          }
        }
      }
    }
  }
  if (spans == 0) tally.fail("no NaN-free span: the generator lost its ordinary scales");
  return tally.outcome(ctx);
}

// A kernel against its twin on tensor t, once per parameter (g or factor) named `parameter`: the
// outputs (`bytes` per element, poisoned before each launch) byte for byte. twin(value, out) and
// launch(value, codes, scales, out) return "" or an error.
template <typename Twin, typename Launch>
Outcome device_vs_twin(const RunContext& ctx, const CodeTensor& t, int bytes, const std::vector<float>& values,
                       const char* parameter, Twin twin, Launch launch) {
  std::string why;
  if (!kernels::device::available(&why)) return skipped(why);
  const QuantizeShape& s = t.shape;
  const std::size_t out_bytes = static_cast<std::size_t>(s.rows * s.cols) * bytes;
  Tally tally;
  void *codes = nullptr, *scales = nullptr, *y = nullptr;
  kvq::Status e = kernels::device::allocate(&codes, t.codes.size());
  if (e.ok()) e = kernels::device::allocate(&scales, t.scales.size() + 1);
  if (e.ok()) e = kernels::device::allocate(&y, out_bytes);
  if (e.ok()) e = kernels::device::upload(codes, t.codes.data(), t.codes.size());
  if (e.ok()) e = kernels::device::upload(scales, t.scales.data(), t.scales.size());
  for (const float value : values) {
    std::vector<std::uint8_t> want(out_bytes), got(out_bytes);
    if (e.ok()) e = twin(value, want.data());
    if (e.ok()) e = kernels::device::fill(y, 0xA5, out_bytes);
    if (e.ok())
      e = launch(value, static_cast<const std::uint8_t*>(codes), static_cast<const std::uint8_t*>(scales), y);
    if (e.ok()) e = kernels::device::synchronize();
    if (e.ok()) e = kernels::device::download(got.data(), y, out_bytes);
    if (!e.ok()) break;
    for (std::size_t i = 0; i < out_bytes; i += bytes) {
      if (std::memcmp(&got[i], &want[i], bytes) == 0) {
        tally.pass();
      } else {
        const auto element = static_cast<std::int64_t>(i / bytes);
        tally.fail(std::string(parameter) + " " + hex_code(kFP32, bits_of(value)) + " " +
                   where(t, element / s.cols, element % s.cols) + ": device differs from the twin");
      }
    }
  }
  for (void* p : {codes, scales, y}) kernels::device::release(p);
  if (!e.ok()) throw std::runtime_error(e.message());
  return tally.outcome(ctx);
}

Outcome device_equals_twin(const RunContext& ctx, const Recipe& r, DType d) {
  const CodeTensor t = every_code_tensor(r);
  return device_vs_twin(
      ctx, t, kernels::bytes_of(d), tensor_scales(r), "g",
      [&](float g, std::uint8_t* out) { return kernels::dequantize_cpu(t.shape, t.codes.data(), t.scales.data(), g, d, out); },
      [&](float g, const std::uint8_t* codes, const std::uint8_t* scales, void* y) {
        return kernels::device::dequantize(t.shape, codes, scales, g, d, y, nullptr);
      });
}

Outcome requant_twin_equals_element_code(const RunContext& ctx, const Recipe& r) {
  const CodeTensor t = every_code_tensor(r);
  const QuantizeShape& s = t.shape;
  Tally tally;
  RouteCounts routes;
  std::vector<std::uint8_t> out(s.rows * s.cols);
  for (const float factor : workspace_factors()) {
    const kvq::Status e = kernels::requantize_e4m3_cpu(s, t.codes.data(), t.scales.data(), factor, out.data());
    if (!e.ok()) throw std::runtime_error(e.message());
    for (std::int64_t row = 0; row < s.rows; ++row) {
      for (std::int64_t j = 0; j < s.cols; ++j) {
        const std::uint8_t code = kernels::code_at(s, t.codes.data() + row * s.code_bytes_per_row(), j);
        const std::uint8_t scale = s.scales_per_row() ? t.scales[row * s.scales_per_row() + j / s.block()] : 0;
        const std::uint8_t want = requantize_e4m3(r, scale, code, factor);
        routes.add(decode_route(t, true, row, j, factor));
        if (out[row * s.cols + j] == want) {
          tally.pass();
        } else {
          tally.fail("factor " + hex_code(kFP32, bits_of(factor)) + " " + where(t, row, j) +
                     ": twin " + hex_code(kE4M3FN, out[row * s.cols + j]) + ", element code " + hex_code(kE4M3FN, want));
        }
      }
    }
  }
  routes.require(t, true, &tally);
  return tally.outcome(ctx);
}

Outcome requant_device_equals_twin(const RunContext& ctx, const Recipe& r) {
  const CodeTensor t = every_code_tensor(r);
  return device_vs_twin(
      ctx, t, 1, workspace_factors(), "factor",
      [&](float factor, std::uint8_t* out) {
        return kernels::requantize_e4m3_cpu(t.shape, t.codes.data(), t.scales.data(), factor, out);
      },
      [&](float factor, const std::uint8_t* codes, const std::uint8_t* scales, void* y) {
        return kernels::device::requantize_e4m3(t.shape, codes, scales, factor, static_cast<std::uint8_t*>(y), nullptr);
      });
}

// The device's rounding to odd (round_to_odd_bits of the product toward zero and of its magnitude
// rounded up, both modelled here from the exact FP64 product) then E4M3, against the exact product
// rounded once, for the fast-path sweep's products x * 3 and x * -4/3 on a stratified sample.
Outcome round_to_odd_model(const RunContext& ctx) {
  const auto toward_zero = [](double d) {
    float f = static_cast<float>(d);
    return std::fabs(static_cast<double>(f)) > std::fabs(d) ? std::nextafter(f, 0.0f) : f;
  };
  const auto magnitude_up = [](double d) {
    float f = static_cast<float>(std::fabs(d));
    return static_cast<double>(f) < std::fabs(d) ? std::nextafter(f, INFINITY) : f;
  };
  Tally tally;
  for (std::uint32_t high = 0; high < 0x10000u; ++high) {
    for (const std::uint32_t low : {0x0000u, 0x0001u, 0x5555u, 0xaaabu, 0xffffu}) {
      const float x = float_from_bits(high << 16 | low);
      if (!(std::fabs(x) <= kFp32Max)) continue;
      for (const float b : {3.0f, -0x1.555556p0f}) {
        const double exact = static_cast<double>(x) * b;
        const float odd = float_from_bits(round_to_odd_bits(bits_of(toward_zero(exact)), bits_of(magnitude_up(exact))));
        if (e4m3_satfinite_fast(odd) == e4m3_satfinite_from_double_fast(exact)) {
          tally.pass();
        } else {
          tally.fail(hex_code(kFP32, bits_of(x)) + " * " + hex_code(kFP32, bits_of(b)) + ": rounded to odd " +
                     hex_code(kE4M3FN, e4m3_satfinite_fast(odd)) + ", exact " +
                     hex_code(kE4M3FN, e4m3_satfinite_from_double_fast(exact)));
        }
      }
    }
  }
  return tally.outcome(ctx);
}

void register_nibble_decode_properties() {
  add_property("formats", "fast-paths/e4m3x2-of-products-finite/round-to-odd-model-sample", Device::cpu,
               round_to_odd_model);
  for (const auto& [name, recipe] : nibble_recipes()) {
    const Recipe by_magnitude = recipe;
    if (name.find("-block") == std::string::npos)  // the rule does not read the block size
      add_property("formats", "nibble-decode/" + name + "/by-magnitude-equals-values-every-code-scale-g", Device::cpu,
                 [by_magnitude](const RunContext& ctx) { return entries_equal_values(ctx, by_magnitude); });
    for (const DType d : {DType::fp32, DType::bf16, DType::fp16}) {
      const Recipe r = recipe;
      const std::string base = "nibble-decode/" + name + "/" + kernels::name_of(d);
      add_property("kernels", base + "/twin-equals-element-code-every-code-scale-g", Device::cpu,
                   [r, d](const RunContext& ctx) { return twin_equals_element_code(ctx, r, d); });
      add_property("gpu", "kernels/" + base + "/device-equals-twin-every-code-scale-g", Device::cuda,
                   [r, d](const RunContext& ctx) { return device_equals_twin(ctx, r, d); });
    }
  }
  for (const auto& [name, recipe] : byte_recipes()) {  // dequantize_bytes: NaN-free spans and the element code
    for (const DType d : {DType::fp32, DType::bf16, DType::fp16}) {
      const Recipe r = recipe;
      const std::string base = "byte-decode/" + name + "/" + kernels::name_of(d);
      add_property("kernels", base + "/twin-equals-element-code-every-code-scale-g", Device::cpu,
                   [r, d](const RunContext& ctx) { return twin_equals_element_code(ctx, r, d); });
      add_property("gpu", "kernels/" + base + "/device-equals-twin-every-code-scale-g", Device::cuda,
                   [r, d](const RunContext& ctx) { return device_equals_twin(ctx, r, d); });
    }
  }
  const auto add_workspace = [](const char* kind, const std::string& name, const Recipe& r) {
    const std::string base = std::string(kind) + "/" + name + "/workspace-e4m3/";
    add_property("kernels", base + "twin-equals-element-code-every-code-scale-factor", Device::cpu,
                 [r](const RunContext& ctx) { return requant_twin_equals_element_code(ctx, r); });
    add_property("gpu", "kernels/" + base + "device-equals-twin-every-code-scale-factor", Device::cuda,
                 [r](const RunContext& ctx) { return requant_device_equals_twin(ctx, r); });
  };
  for (const auto& [name, recipe] : nibble_recipes()) add_workspace("nibble-decode", name, recipe);
  for (const auto& [name, recipe] : byte_recipes()) add_workspace("byte-workspace", name, recipe);
}
KVQ_REGISTER_PROPERTIES(register_nibble_decode_properties);

}  // namespace
}  // namespace kvq::props
