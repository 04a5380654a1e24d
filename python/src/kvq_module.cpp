// kvq's Python extension (docs/python.md): the library's own formats, recipes, CPU kernels and port
// verification bound with nanobind; no rule is written twice. Tensors cross by DLPack or the buffer
// protocol (numpy arrays, torch CPU tensors, JAX arrays), read where they lie in whatever strides they
// have. Bad arguments raise TypeError / ValueError naming the argument.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include <sstream>

#include "cli/npy.hpp"
#include "cli/port_files.hpp"
#include "formats/conventions.hpp"
#include "formats/float_bits.hpp"
#include "formats/names.hpp"
#include "formats/packing.hpp"
#include "formats/recipe_names.hpp"
#include "kernels/port_compare.hpp"
#include "kernels/quantize.hpp"
#include "oracle/identify.hpp"
#include "oracle/verify.hpp"

namespace nb = nanobind;

namespace {

using kvq::kernels::DType;
using Array = nb::ndarray<nb::ro>;
using Bytes = std::vector<std::uint8_t>;

[[noreturn]] void type_error(const std::string& what) { throw nb::type_error(what.c_str()); }
[[noreturn]] void value_error(const std::string& what) { throw nb::value_error(what.c_str()); }

// ---- tensors in ----

struct Tensor {
  std::vector<std::int64_t> shape;
  nb::dlpack::dtype dtype{};
  kvq::ports::PortBytes bytes;  // C order: the array's own memory where it is a C-order CPU array
  std::int64_t count() const {
    std::int64_t n = 1;
    for (const auto d : shape) n *= d;
    return n;
  }
  int item() const { return dtype.bits / 8; }
};

std::string dtype_name(nb::dlpack::dtype t) {
  const char* kind = t.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float)    ? "float"
                     : t.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat) ? "bfloat"
                     : t.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt)   ? "uint"
                     : t.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Int)    ? "int"
                                                                                           : "dtype code " ;
  return std::string(kind) + std::to_string(t.bits);
}

bool on_cuda(const Array& a) { return a.device_type() == nb::device::cuda::value; }

void check_device(const Array& a, const char* role) {
  if (a.device_type() != nb::device::cpu::value && !on_cuda(a))
    type_error(std::string(role) + ": a tensor on device type " + std::to_string(a.device_type()) +
               "; kvq reads CPU and CUDA tensors");
}

// The span of memory, in elements from a.data(), that the array's elements occupy (any strides).
std::pair<std::int64_t, std::int64_t> element_span(const Array& a) {
  std::int64_t low = 0, high = 0;
  for (std::size_t d = 0; d < a.ndim(); ++d) {
    if (a.shape(d) == 0) return {0, 0};
    const std::int64_t reach = (static_cast<std::int64_t>(a.shape(d)) - 1) * a.stride(d);
    (reach < 0 ? low : high) += reach;
  }
  return {low, high + 1};
}

// Whether the array's elements lie in C order (row-major, no gaps) from a.data().
bool c_order(const Array& a) {
  std::int64_t expected_stride = 1;
  for (std::size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != expected_stride) return false;
    expected_stride *= static_cast<std::int64_t>(a.shape(d));
  }
  return true;
}

// Whether a CPU array's elements lie in C order at a.data(), aligned for their type: read in place.
bool c_order_in_place(const Array& a, int item) {
  return !on_cuda(a) && reinterpret_cast<std::uintptr_t>(a.data()) % static_cast<std::uintptr_t>(item) == 0 && c_order(a);
}

// The array's elements in C order: a C-order CPU array's own memory (no copy; the caller holds the
// array while the Tensor is used), else gathered, whatever its strides; a CUDA tensor is copied to
// the host first (what kvq.verify compares on the GPU never comes here: verify_on_device).
Tensor read(const Array& a, const char* role) {
  check_device(a, role);
  Tensor t;
  t.dtype = a.dtype();
  if (t.dtype.lanes != 1 || t.dtype.bits % 8 != 0 || t.dtype.bits == 0 || t.dtype.bits > 64)
    type_error(std::string(role) + ": element type " + dtype_name(t.dtype) + " is not a whole number of bytes");
  for (std::size_t i = 0; i < a.ndim(); ++i) t.shape.push_back(static_cast<std::int64_t>(a.shape(i)));
  const std::int64_t n = t.count();
  const int w = t.item();
  if (c_order_in_place(a, w)) {
    t.bytes = kvq::ports::PortBytes::view(static_cast<const std::uint8_t*>(a.data()), static_cast<std::size_t>(n * w));
    return t;
  }
  Bytes gathered(static_cast<std::size_t>(n * w));
  const auto* base = static_cast<const std::uint8_t*>(a.data());
  Bytes host;  // a CUDA tensor's span of memory, on the host
  std::int64_t origin = 0;  // the element of a.data() that base points at
  if (on_cuda(a) && n > 0) {
    const auto [low, high] = element_span(a);
    origin = low;
    host.resize(static_cast<std::size_t>((high - low) * w));
    if (auto e = kvq::kernels::device::select(a.device_id()); !e.ok()) value_error(std::string(role) + ": " + e.message());
    if (auto e = kvq::kernels::device::download(host.data(), base + low * w, host.size()); !e.ok())
      value_error(std::string(role) + ": copying it to the host: " + e.message());
    base = host.data();
  }
  std::vector<std::int64_t> index(a.ndim(), 0);
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t offset = 0;  // in elements
    for (std::size_t d = 0; d < a.ndim(); ++d) offset += index[d] * a.stride(d);
    std::memcpy(gathered.data() + k * w, base + (offset - origin) * w, static_cast<std::size_t>(w));
    for (std::size_t d = a.ndim(); d-- > 0;) {
      if (++index[d] < t.shape[d]) break;
      index[d] = 0;
    }
  }
  t.bytes = std::move(gathered);
  return t;
}

bool is(nb::dlpack::dtype t, nb::dlpack::dtype_code code, int bits) {
  return t.code == static_cast<std::uint8_t>(code) && t.bits == bits;
}

// A value tensor's kvq dtype: float32, float16, bfloat16, or uint16 bits named by `bits_as`.
DType value_type(const Tensor& t, const char* role, const std::optional<std::string>& bits_as) {
  using C = nb::dlpack::dtype_code;
  if (bits_as) {
    if (!is(t.dtype, C::UInt, 16) && !is(t.dtype, C::Int, 16))
      type_error(std::string(role) + "_dtype names the type of 16-bit bits; " + role + " holds " + dtype_name(t.dtype));
    if (*bits_as == "bfloat16") return DType::bf16;
    if (*bits_as == "float16") return DType::fp16;
    value_error(std::string(role) + "_dtype: 'bfloat16' or 'float16', got '" + *bits_as + "'");
  }
  if (is(t.dtype, C::Float, 32)) return DType::fp32;
  if (is(t.dtype, C::Float, 16)) return DType::fp16;
  if (is(t.dtype, C::Bfloat, 16)) return DType::bf16;
  type_error(std::string(role) + ": " + dtype_name(t.dtype) +
             " is not a value type kvq reads (float32, float16, bfloat16; BF16 bits as uint16 with " + role +
             "_dtype='bfloat16')");
}

kvq::ports::PortBytes byte_codes(const Tensor& t, const char* role) {
  if (t.item() != 1) type_error(std::string(role) + ": " + dtype_name(t.dtype) + "; give one byte an element (uint8, int8, float8)");
  return t.bytes;
}

float scalar(const nb::handle& h, const char* role) {
  if (nb::isinstance<nb::float_>(h) || nb::isinstance<nb::int_>(h)) return static_cast<float>(nb::cast<double>(h));
  Array a;
  if (!nb::try_cast(h, a)) type_error(std::string(role) + ": a float or a one-element tensor, got " + nb::type_name(h.type()).c_str());
  const Tensor t = read(a, role);
  if (t.count() != 1) value_error(std::string(role) + ": one value, got " + std::to_string(t.count()));
  using C = nb::dlpack::dtype_code;
  if (is(t.dtype, C::Float, 32)) return kvq::kernels::load_value(DType::fp32, t.bytes.data(), 0);
  if (is(t.dtype, C::Float, 64)) {
    double v;
    std::memcpy(&v, t.bytes.data(), 8);
    return static_cast<float>(v);
  }
  type_error(std::string(role) + ": float32 (or a Python float), got " + dtype_name(t.dtype));
}

// ---- outputs ----

nb::object numpy_array(const Bytes& bytes, const std::vector<std::int64_t>& shape, const char* dtype) {
  nb::module_ np = nb::module_::import_("numpy");
  nb::object flat = np.attr("frombuffer")(nb::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                                         np.attr(dtype));
  nb::list dims;
  for (const auto d : shape) dims.append(d);
  return flat.attr("reshape")(nb::tuple(dims)).attr("copy")();
}

// ---- names ----

kvq::FormatId format_arg(const std::string& name, const char* role) {
  const auto id = kvq::format_from_name(name);
  if (!id) {
    std::string known;
    for (const auto n : kvq::kFormatNames) known += (known.empty() ? "" : ", ") + std::string(n);
    value_error(std::string(role) + ": unknown format '" + name + "' (known: " + known + ")");
  }
  return *id;
}

kvq::NamedRecipe recipe_arg(const std::string& name) {
  const auto r = kvq::recipe_from_name(name);
  if (!r) value_error("recipe: unknown recipe '" + name + "' (kvq.recipes() lists them)");
  return *r;
}

// ---- formats ----

nb::object encode(const Array& x, const std::string& format, const std::string& convention, std::optional<std::string> rounding) {
  const kvq::FormatId id = format_arg(format, "format");
  const auto conv = kvq::convention_from_name(convention);
  if (!conv) value_error("convention: unknown convention '" + convention + "'");
  const kvq::ConventionRule rule = kvq::convention_rule(*conv, id);
  if (!rule.allowed) value_error("convention: " + convention + " has no " + format + " cast");
  kvq::Rounding r = rule.conversion.rounding;
  if (rounding) {
    const auto named = kvq::rounding_from_name(*rounding);
    if (!named) value_error("rounding: unknown rounding '" + *rounding + "'");
    if (!(rule.allowed & kvq::rounding_bit(*named)))
      value_error("rounding: convention " + convention + " does not convert " + format + " with " + *rounding);
    if (*named == kvq::Rounding::stochastic) value_error("rounding: 'rs' needs random bits per input; not offered here");
    r = *named;
  }
  const Tensor t = read(x, "x");
  const kvq::Format f = kvq::format_of(id);
  const kvq::Conversion c = kvq::convention_conversion(*conv, id, r);
  using C = nb::dlpack::dtype_code;
  const bool f64 = is(t.dtype, C::Float, 64);
  const DType input = f64 ? DType::fp32 : value_type(t, "x", std::nullopt);
  const int out = f.bits() <= 8 ? 1 : f.bits() <= 16 ? 2 : f.bits() <= 32 ? 4 : 8;
  Bytes codes(static_cast<std::size_t>(t.count() * out));
  for (std::int64_t i = 0; i < t.count(); ++i) {
    std::uint64_t code;
    if (f64) {
      double v;
      std::memcpy(&v, t.bytes.data() + 8 * i, 8);
      code = kvq::encode_double(f, c, v);
    } else {
      code = kvq::encode_float(f, c, kvq::kernels::load_value(input, t.bytes.data(), i));
    }
    std::memcpy(codes.data() + i * out, &code, static_cast<std::size_t>(out));  // little-endian hosts
  }
  return numpy_array(codes, t.shape, out == 1 ? "uint8" : out == 2 ? "uint16" : out == 4 ? "uint32" : "uint64");
}

nb::object decode(const Array& codes, const std::string& format) {
  const kvq::FormatId id = format_arg(format, "format");
  const kvq::Format f = kvq::format_of(id);
  const Tensor t = read(codes, "codes");
  using C = nb::dlpack::dtype_code;
  if (t.dtype.code != static_cast<std::uint8_t>(C::UInt) && t.dtype.code != static_cast<std::uint8_t>(C::Int))
    type_error("codes: integer codes, got " + dtype_name(t.dtype));
  Bytes values(static_cast<std::size_t>(t.count() * 8));
  const std::uint64_t limit = f.bits() >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << f.bits()) - 1;
  for (std::int64_t i = 0; i < t.count(); ++i) {
    std::uint64_t code = 0;
    std::memcpy(&code, t.bytes.data() + i * t.item(), static_cast<std::size_t>(t.item()));
    if (t.item() < 8 && t.dtype.code == static_cast<std::uint8_t>(C::Int) && (code >> (8 * t.item() - 1)) & 1)
      code |= ~std::uint64_t{0} << (8 * t.item());  // sign-extend, then refuse below
    if (code > limit)
      value_error("codes: element " + std::to_string(i) + " is not a " + format + " code (" + std::to_string(f.bits()) +
                  " bits)");
    const double v = kvq::decode_double(f, code);
    std::memcpy(values.data() + 8 * i, &v, 8);
  }
  return numpy_array(values, t.shape, "float64");
}

// E2M1 codes, one a byte [..., n], packed two a byte (element 2i in the low nibble: kvq's order) and back.
nb::object pack_e2m1(const Array& codes) {
  const Tensor t = read(codes, "codes");
  const kvq::ports::PortBytes c = byte_codes(t, "codes");
  if (t.shape.empty() || t.shape.back() % 2) value_error("codes: the last dimension must be even");
  Bytes packed(c.size() / 2);
  for (std::size_t i = 0; i < packed.size(); ++i) {
    if (c[2 * i] > 0xF || c[2 * i + 1] > 0xF) value_error("codes: element " + std::to_string(c[2 * i] > 0xF ? 2 * i : 2 * i + 1) + " is not a 4-bit code");
    packed[i] = kvq::pack_e2m1_pair(c[2 * i], c[2 * i + 1]);
  }
  std::vector<std::int64_t> shape = t.shape;
  shape.back() /= 2;
  return numpy_array(packed, shape, "uint8");
}
nb::object unpack_e2m1(const Array& packed) {
  const Tensor t = read(packed, "packed");
  const kvq::ports::PortBytes p = byte_codes(t, "packed");
  if (t.shape.empty()) value_error("packed: needs at least one dimension");
  Bytes codes(p.size() * 2);
  for (std::size_t i = 0; i < p.size(); ++i) codes[2 * i] = kvq::e2m1_even(p[i]), codes[2 * i + 1] = kvq::e2m1_odd(p[i]);
  std::vector<std::int64_t> shape = t.shape;
  shape.back() *= 2;
  return numpy_array(codes, shape, "uint8");
}

// ---- recipes ----

struct Quantized {
  std::string recipe;
  nb::object codes, scales;  // scales None for per-tensor recipes
  float global_scale = 0;    // the tensor decode scale g
  std::vector<std::int64_t> shape;
};

kvq::kernels::QuantizeShape quantize_shape(const kvq::Recipe& recipe, const std::vector<std::int64_t>& shape, std::optional<int> block,
                                           const char* role) {
  if (shape.empty() || shape.back() <= 0) value_error(std::string(role) + ": needs a last dimension (head_dim) > 0");
  kvq::kernels::QuantizeShape s;
  s.recipe = recipe;
  if (block) s.recipe.block = *block;
  s.cols = shape.back();
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  s.rows = n / s.cols;
  if (auto e = kvq::kernels::validate(s); !e.ok()) value_error(std::string(role) + ": " + e.message());
  return s;
}

Quantized quantize(const Array& x, const std::string& recipe, std::optional<float> global_scale, std::optional<int> block,
                   std::optional<std::string> x_dtype) {
  const kvq::NamedRecipe named = recipe_arg(recipe);
  const Tensor t = read(x, "x");
  const DType input = value_type(t, "x", x_dtype);
  const auto s = quantize_shape(named.recipe, t.shape, block, "x");
  float g = 1.0f;
  if (global_scale) {
    if (!(*global_scale > 0.0f) || *global_scale != *global_scale || *global_scale - *global_scale != 0.0f)
      value_error("global_scale: a finite decode scale > 0, got " + std::to_string(*global_scale));
    g = *global_scale;
  } else {
    g = kvq::tensor_scale(s.recipe, kvq::kernels::amax_cpu(input, t.bytes.data(), t.count()));
  }
  Bytes codes(static_cast<std::size_t>(s.code_bytes())), scales(static_cast<std::size_t>(s.scale_bytes()));
  if (auto e = kvq::kernels::quantize_cpu(s, input, t.bytes.data(), g, codes.data(), scales.data()); !e.ok())
    value_error(e.message());
  Quantized q;
  q.recipe = recipe;
  q.shape = t.shape;
  std::vector<std::int64_t> code_shape = t.shape, scale_shape = t.shape;
  code_shape.back() = s.code_bytes_per_row();
  scale_shape.back() = s.scales_per_row();
  q.codes = numpy_array(codes, code_shape, "uint8");
  q.scales = s.scales_per_row() ? numpy_array(scales, scale_shape, "uint8") : nb::none();
  q.global_scale = g;
  return q;
}

nb::object dequantize(const std::string& recipe, const Array& codes, std::optional<Array> scales, float global_scale,
                      const std::vector<std::int64_t>& shape, const std::string& dtype, std::optional<int> block) {
  const kvq::NamedRecipe named = recipe_arg(recipe);
  const auto s = quantize_shape(named.recipe, shape, block, "shape");
  const Tensor c = read(codes, "codes");
  const kvq::ports::PortBytes code_bytes = byte_codes(c, "codes");
  if (static_cast<std::int64_t>(code_bytes.size()) != s.code_bytes())
    value_error("codes: " + std::to_string(code_bytes.size()) + " bytes, the recipe stores " + std::to_string(s.code_bytes()) +
                " for shape [" + std::to_string(s.rows) + ", " + std::to_string(s.cols) + "]");
  kvq::ports::PortBytes scale_bytes;
  if (s.scales_per_row()) {
    if (!scales) value_error("scales: the recipe has a scale per " + std::to_string(s.block()) + " elements; give them");
    scale_bytes = byte_codes(read(*scales, "scales"), "scales");
    if (static_cast<std::int64_t>(scale_bytes.size()) != s.scale_bytes())
      value_error("scales: " + std::to_string(scale_bytes.size()) + " bytes, expected " + std::to_string(s.scale_bytes()));
  }
  DType out;
  if (dtype == "float32") out = DType::fp32;
  else if (dtype == "bfloat16") out = DType::bf16;
  else if (dtype == "float16") out = DType::fp16;
  else value_error("dtype: 'float32', 'bfloat16' or 'float16', got '" + dtype + "'");
  Bytes y(static_cast<std::size_t>(s.rows * s.cols * kvq::kernels::bytes_of(out)));
  if (auto e = kvq::kernels::dequantize_cpu(s, code_bytes.data(), scale_bytes.data(), global_scale, out, y.data()); !e.ok())
    value_error(e.message());
  if (out == DType::fp32) return numpy_array(y, shape, "float32");
  if (out == DType::fp16) return numpy_array(y, shape, "float16");
  Bytes widened(static_cast<std::size_t>(s.rows * s.cols * 4));  // BF16 values as float32, exactly
  for (std::int64_t i = 0; i < s.rows * s.cols; ++i) {
    const float v = kvq::kernels::load_value(DType::bf16, y.data(), i);
    std::memcpy(widened.data() + 4 * i, &v, 4);
  }
  return numpy_array(widened, shape, "float32");
}

// ---- verification ----

struct PortArgs {
  kvq::ports::PortData data;
  kvq::ports::Interpretation how;
};

// The options of a verify / identify call, into d (its tensors are read by the caller).
void port_options(kvq::ports::PortData& d, nb::object global_scale, const std::string& role, const std::string& convention,
                  const std::string& nibble_order, const std::string& scale_layout, std::optional<int> block) {
  using namespace kvq::ports;
  if (!global_scale.is_none()) {
    GlobalScale gs;
    gs.value = scalar(global_scale, "global_scale");
    if (role != "input" && role != "output") value_error("global_scale_role: 'input' or 'output', got '" + role + "'");
    gs.is_output = role == "output";
    if (convention == "decode") gs.convention = ScaleConvention::decode;
    else if (convention == "encode") gs.convention = ScaleConvention::encode;
    else if (convention == "amax") gs.convention = ScaleConvention::amax;
    else value_error("global_scale_convention: 'decode', 'encode' or 'amax', got '" + convention + "'");
    d.global_scale = gs;
  }
  if (nibble_order == "low_first") d.nibbles = NibbleOrder::low_first;
  else if (nibble_order == "high_first") d.nibbles = NibbleOrder::high_first;
  else value_error("nibble_order: 'low_first' or 'high_first', got '" + nibble_order + "'");
  bool layout_found = false;
  for (const ScaleLayout l : {ScaleLayout::row_major, ScaleLayout::token_group4, ScaleLayout::swizzle_128x4})
    if (scale_layout == name_of(l)) d.scale_layout = l, layout_found = true;
  if (!layout_found) value_error("scale_layout: 'row_major', 'token_group4' or 'swizzle_128x4', got '" + scale_layout + "'");
  if (block) {
    if (*block <= 0) value_error("block: must be > 0");
    d.block = *block;
  }
}

// The recipe as the port's options read it (its block possibly changed), checked against the
// port's tensor sizes.
kvq::ports::Interpretation interpretation(const std::string& recipe, const kvq::ports::PortData& d,
                                          const kvq::ports::PortSummary& sizes) {
  const kvq::NamedRecipe named = recipe_arg(recipe);
  kvq::ports::Interpretation how{named.recipe, d.nibbles, d.scale_layout};
  if (d.block && how.recipe.scale != kvq::BlockScale::tensor_only) how.recipe.block = d.block;
  if (auto e = check_layout(sizes, how); !e.ok()) value_error(e.message());
  return how;
}

PortArgs port_args(const std::optional<std::string>& recipe, const Array& x, const Array& codes, std::optional<Array> scales,
                   nb::object global_scale, const std::string& role, const std::string& convention,
                   std::optional<Array> dequantized, const std::string& nibble_order, const std::string& scale_layout,
                   std::optional<int> block, std::optional<std::string> x_dtype) {
  using namespace kvq::ports;
  PortArgs p;
  PortData& d = p.data;
  const Tensor tx = read(x, "x");
  d.input = value_type(tx, "x", x_dtype);
  if (tx.shape.empty() || tx.shape.back() <= 0) value_error("x: needs a last dimension (head_dim) > 0");
  d.cols = tx.shape.back();
  d.rows = tx.count() / d.cols;
  d.x = tx.bytes;
  d.codes = byte_codes(read(codes, "codes"), "codes");
  if (scales) {
    d.scales = byte_codes(read(*scales, "scales"), "scales");
    d.has_scales = true;
  }
  if (dequantized) {
    const Tensor ty = read(*dequantized, "dequantized");
    d.dequantized_type = value_type(ty, "dequantized", std::nullopt);
    d.dequantized = ty.bytes;
  }
  port_options(d, global_scale, role, convention, nibble_order, scale_layout, block);
  if (recipe) p.how = interpretation(*recipe, d, summary_of(d));
  return p;
}

struct Report {
  bool exact = false;
  std::string recipe;
  std::int64_t codes = 0, code_mismatches = 0, scales = 0, scale_mismatches = 0, dequantized_mismatches = 0;
  bool global_scale_matches = true;
  nb::list differences;
  // The report's text, written when asked for (str()): kvq verify's report of the comparison, and
  // where it ran.
  kvq::ports::PortSummary summary;
  kvq::ports::Interpretation how;
  kvq::ports::Comparison comparison;
  std::string where;
  std::string text() const { return kvq::ports::describe(summary, how, recipe, comparison) + where; }
};

Report report_of(const std::string& recipe, const kvq::ports::PortSummary& summary, const kvq::ports::Interpretation& how,
                 kvq::ports::Comparison c, std::string where = {}) {
  Report r;
  r.exact = c.exact();
  r.recipe = recipe;
  r.summary = summary, r.how = how, r.where = std::move(where);
  r.codes = c.codes, r.code_mismatches = c.code_mismatches, r.scales = c.scales, r.scale_mismatches = c.scale_mismatches;
  r.dequantized_mismatches = c.dequantized_mismatches;
  r.global_scale_matches = c.global_scale_matches;
  for (const auto& d : c.first_codes) {
    nb::dict e;
    e["kind"] = "code", e["row"] = d.row, e["col"] = d.col, e["x_bits"] = d.x_bits, e["expected"] = d.expected,
    e["actual"] = d.actual, e["expected_value"] = d.expected_value, e["actual_value"] = d.actual_value;
    r.differences.append(e);
  }
  for (const auto& d : c.first_scales) {
    nb::dict e;
    e["kind"] = "scale", e["row"] = d.row, e["block"] = d.block, e["block_max"] = d.block_max, e["expected"] = d.expected,
    e["actual"] = d.actual;
    r.differences.append(e);
  }
  for (const auto& d : c.first_dequantized) {
    nb::dict e;
    e["kind"] = "dequantized", e["row"] = d.row, e["col"] = d.col, e["expected"] = d.expected, e["actual"] = d.actual;
    r.differences.append(e);
  }
  r.comparison = std::move(c);
  return r;
}

// ---- CUDA tensors: compared on their GPU (docs/python.md "CUDA tensors") ----

// A CUDA tensor read in place: its shape and type (no bytes) and its device pointer.
struct DeviceTensor {
  Tensor meta;
  const std::uint8_t* data = nullptr;
};

DeviceTensor device_tensor(const Array& a, const char* role, int device) {
  if (!on_cuda(a))
    type_error(std::string(role) + ": a CPU tensor while x is on cuda:" + std::to_string(device) +
               "; give every tensor on the same device");
  if (a.device_id() != device)
    type_error(std::string(role) + ": on cuda:" + std::to_string(a.device_id()) + ", x on cuda:" + std::to_string(device));
  DeviceTensor t;
  t.meta.dtype = a.dtype();
  if (t.meta.dtype.lanes != 1 || t.meta.dtype.bits % 8 != 0 || t.meta.dtype.bits == 0 || t.meta.dtype.bits > 64)
    type_error(std::string(role) + ": element type " + dtype_name(t.meta.dtype) + " is not a whole number of bytes");
  if (!c_order(a))
    type_error(std::string(role) + ": a CUDA tensor is compared in place and must be contiguous (C order); pass " + role +
               ".contiguous()");
  for (std::size_t d = 0; d < a.ndim(); ++d) t.meta.shape.push_back(static_cast<std::int64_t>(a.shape(d)));
  t.data = static_cast<const std::uint8_t*>(a.data());
  return t;
}

// Device memory of one call, released on its stream.
struct DeviceBuffer {
  void* p = nullptr;
  void* stream = nullptr;
  DeviceBuffer(std::size_t bytes, void* s) : stream(s) {
    if (auto e = kvq::kernels::device::allocate_on(&p, bytes, s); !e.ok()) value_error("kvq.verify: device memory: " + e.message());
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { kvq::kernels::device::release_on(p, stream); }
  template <typename T>
  T* as() const { return static_cast<T*>(p); }
};

// The comparison's counters on each device (kernels/port_compare.hpp CompareCounters), kept between
// calls and known to hold zeros after a call that found no difference (calls hold the GIL and each
// waits for its stream before it returns): a call then launches the comparing kernel alone, no
// memset, no allocation, and no copy back (the totals arrive in mapped host memory).
struct DeviceCounters {
  void* p = nullptr;
  std::int64_t count = 0;
  bool zero = false;
  unsigned long long* totals = nullptr;  // the host's view of the mapped totals
  void* totals_on_device = nullptr;
};
DeviceCounters& device_counters(int device, std::int64_t count) {
  namespace dev = kvq::kernels::device;
  static std::map<int, DeviceCounters> by_device;
  DeviceCounters& c = by_device[device];
  if (!c.totals) {
    void* host = nullptr;
    if (auto e = dev::allocate_mapped(&host, &c.totals_on_device, sizeof(unsigned long long) * kvq::kernels::kCompareCounts);
        !e.ok())
      value_error("kvq.verify: mapped host memory: " + e.message());
    c.totals = static_cast<unsigned long long*>(host);
  }
  if (c.count < count) {
    dev::release(c.p);
    c.p = nullptr, c.count = 0, c.zero = false;
    const std::int64_t want = std::max<std::int64_t>(count, 4096);
    if (auto e = dev::allocate(&c.p, sizeof(unsigned long long) * static_cast<std::size_t>(want)); !e.ok())
      value_error("kvq.verify: device memory: " + e.message());
    c.count = want;
  }
  return c;
}

void device_ok(const kvq::Status& e, const char* what) {
  if (!e.ok()) value_error(std::string("kvq.verify on the GPU: ") + what + ": " + e.message());
}

// The host copy of `bytes` bytes at device address `src` (the stream reaches it first).
Bytes fetch(const void* src, std::int64_t bytes, void* stream) {
  Bytes out(static_cast<std::size_t>(bytes));
  if (bytes > 0) device_ok(kvq::kernels::device::download_on(out.data(), src, out.size(), stream), "copying back");
  return out;
}

// kvq.verify of CUDA tensors: kvq's kernel quantizes x on the tensors' device and stream, the
// device comparator counts the differences per chunk of rows, and only the counts and the rows of
// the first differing chunks come back, where the host comparison (oracle/verify.cpp) writes the
// records. The error against the bound is not computed on this path.
Report verify_on_device(const std::string& recipe, const Array& x, const Array& codes, std::optional<Array> scales,
                        nb::object global_scale, const std::string& role, const std::string& convention,
                        std::optional<Array> dequantized, const std::string& nibble_order, const std::string& scale_layout,
                        std::optional<int> block, std::optional<std::string> x_dtype, int show, std::uintptr_t stream_handle) {
  using namespace kvq::ports;
  namespace dev = kvq::kernels::device;
  if (!on_cuda(x)) type_error("x: a CPU tensor while the outputs are CUDA tensors; give every tensor on the same device");
  if (std::string why; !kvq::kernels::device::available(&why))
    type_error("x: a CUDA tensor, and this kvq cannot compare on the GPU (" + why + "); pass CPU tensors");
  const int device = x.device_id();
  const DeviceTensor tx = device_tensor(x, "x", device), tc = device_tensor(codes, "codes", device);
  std::optional<DeviceTensor> ts, ty;
  if (scales) ts = device_tensor(*scales, "scales", device);
  if (dequantized) ty = device_tensor(*dequantized, "dequantized", device);
  PortData d;  // options and sizes only: the tensors stay on the device
  d.input = value_type(tx.meta, "x", x_dtype);
  if (tx.meta.shape.empty() || tx.meta.shape.back() <= 0) value_error("x: needs a last dimension (head_dim) > 0");
  d.cols = tx.meta.shape.back();
  d.rows = tx.meta.count() / d.cols;
  if (tc.meta.item() != 1) type_error("codes: " + dtype_name(tc.meta.dtype) + "; give one byte an element (uint8, int8, float8)");
  if (ts && ts->meta.item() != 1) type_error("scales: " + dtype_name(ts->meta.dtype) + "; give one byte an element (uint8, float8)");
  d.has_scales = ts.has_value();
  if (ty) d.dequantized_type = value_type(ty->meta, "dequantized", std::nullopt);
  port_options(d, global_scale, role, convention, nibble_order, scale_layout, block);
  PortSummary sizes = summary_of(d);
  sizes.code_bytes = tc.meta.count();
  sizes.scale_bytes = ts ? ts->meta.count() : 0;
  if (ty) sizes.dequantized = ty->meta.count();
  const Interpretation how = interpretation(recipe, d, sizes);

  void* stream = reinterpret_cast<void*>(stream_handle);
  device_ok(dev::select(device), "selecting the device");
  kvq::kernels::QuantizeShape s{how.recipe, d.rows, d.cols};
  if (auto e = kvq::kernels::validate(s); !e.ok()) value_error("x: " + e.message());
  Comparison c;
  float tensor_amax = 0;  // computed only where the comparison needs it
  compare_global_scale(d.global_scale, how, [&] {
    DeviceBuffer amax(sizeof(float), stream);
    device_ok(dev::amax(d.input, tx.data, d.rows * d.cols, amax.as<float>(), stream), "amax");
    device_ok(dev::download_on(&tensor_amax, amax.p, sizeof tensor_amax, stream), "copying amax back");
    return tensor_amax;
  }, &c);

  const bool four_bit = s.packed();
  kvq::kernels::DevicePort port;
  port.codes = tc.data;
  port.codes_packed = four_bit && sizes.code_bytes * 2 == d.rows * d.cols;
  port.nibbles = how.nibbles;
  port.scales = ts ? ts->data : nullptr;
  port.scale_layout = how.scale_layout;
  port.dequantized = ty ? ty->data : nullptr;
  port.dequantized_type = d.dequantized_type;
  using kvq::kernels::kCompareCounts;
  const std::int64_t S = s.scales_per_row();
  const std::int64_t chunks = kvq::kernels::compare_chunks(d.rows);
  DeviceCounters& counters = device_counters(device, kvq::kernels::compare_counters(d.rows));
  auto* counts = static_cast<unsigned long long*>(counters.p);
  const kvq::kernels::CompareCounters counting{counts, counters.zero,
                                               static_cast<unsigned long long*>(counters.totals_on_device)};
  counters.zero = false;  // until this call has read zeros back
  for (int k = 0; k < kCompareCounts; ++k) counters.totals[k] = 0;  // what a launch of nothing leaves
  // The port keeps kvq's layout: kvq's quantize kernel compares as it goes (one read of x and of the
  // port's outputs); else, or for a kernel that has no comparing form, it writes the expected codes
  // and scales and the comparator reads both.
  const bool kvq_layout = (!four_bit || port.codes_packed) && how.nibbles == kvq::kernels::NibbleOrder::low_first &&
                          (S == 0 || how.scale_layout == kvq::kernels::ScaleLayout::row_major) && !ty;
  bool fused = false;
  if (kvq_layout)
    device_ok(dev::quantize_compare(s, d.input, tx.data, c.g, tc.data, ts ? ts->data : nullptr, counting, &fused, stream),
              "kvq's quantize kernel, comparing");
  if (!fused) {
    DeviceBuffer expected_codes(static_cast<std::size_t>(s.code_bytes()), stream),
        expected_scales(static_cast<std::size_t>(s.scale_bytes()), stream);
    device_ok(dev::quantize(s, d.input, tx.data, c.g, expected_codes.as<std::uint8_t>(), expected_scales.as<std::uint8_t>(),
                            stream),
              "kvq's quantize kernel");
    device_ok(dev::compare_port(s, c.g, expected_codes.as<std::uint8_t>(), expected_scales.as<std::uint8_t>(), port,
                                counting, stream),
              "the comparator");
  }
  device_ok(dev::wait_for(stream), "waiting for the comparison");
  const volatile unsigned long long* totals = counters.totals;
  c.codes = d.rows * d.cols;
  c.scales = d.rows * S;
  c.dequantized_checked = ty ? d.rows * d.cols : 0;
  c.code_mismatches = static_cast<std::int64_t>(totals[kvq::kernels::kCodeMismatches]);
  c.scale_mismatches = static_cast<std::int64_t>(totals[kvq::kernels::kScaleMismatches]);
  c.dequantized_mismatches = static_cast<std::int64_t>(totals[kvq::kernels::kDequantizedMismatches]);
  // No difference: no counter was touched, all still hold zeros for the next call.
  counters.zero = !c.code_mismatches && !c.scale_mismatches && !c.dequantized_mismatches;
  std::vector<unsigned long long> per_chunk;  // only where there are records to find
  if (show > 0 && (c.code_mismatches || c.scale_mismatches || c.dequantized_mismatches)) {
    per_chunk.resize(static_cast<std::size_t>(kCompareCounts * chunks));
    device_ok(dev::download_on(per_chunk.data(), counts + kvq::kernels::chunk_counter(0, 0, chunks),
                               per_chunk.size() * sizeof(unsigned long long), stream),
              "copying the counts back");
  }
  auto count = [&](int kind, std::int64_t chunk) { return static_cast<std::int64_t>(per_chunk[kind * chunks + chunk]); };

  // The records: the host comparison of the first differing chunks, until `show` of each kind.
  const auto keep = static_cast<std::size_t>(show);
  auto wanted = [&] {
    return (c.first_codes.size() < keep && static_cast<std::int64_t>(c.first_codes.size()) < c.code_mismatches) ||
           (c.first_scales.size() < keep && static_cast<std::int64_t>(c.first_scales.size()) < c.scale_mismatches) ||
           (c.first_dequantized.size() < keep &&
            static_cast<std::int64_t>(c.first_dequantized.size()) < c.dequantized_mismatches);
  };
  const std::int64_t code_row = d.rows ? sizes.code_bytes / d.rows : 0, x_row = d.cols * kvq::kernels::bytes_of(d.input);
  for (std::int64_t k = 0; k < chunks && wanted(); ++k) {
    if (!count(kvq::kernels::kCodeMismatches, k) && !count(kvq::kernels::kScaleMismatches, k) &&
        !count(kvq::kernels::kDequantizedMismatches, k))
      continue;
    const std::int64_t r0 = k * kvq::kernels::kCompareChunkRows, rows = std::min(kvq::kernels::kCompareChunkRows, d.rows - r0);
    PortData part = d;
    part.rows = rows;
    part.x = fetch(tx.data + r0 * x_row, rows * x_row, stream);
    part.codes = fetch(tc.data + r0 * code_row, rows * code_row, stream);
    if (ts) {
      const std::int64_t first = scale_layout_bytes(how.scale_layout, r0, S);
      part.scales = fetch(ts->data + first, scale_layout_bytes(how.scale_layout, rows, S), stream);
    }
    if (ty) {
      const int w = kvq::kernels::bytes_of(d.dequantized_type);
      part.dequantized = fetch(ty->data + r0 * d.cols * w, rows * d.cols * w, stream);
    }
    // The chunk is compared under the whole tensor's decode scale c.g: the port's global scale read
    // as given, or the whole tensor's amax.
    part.global_scale = d.global_scale ? GlobalScale{d.global_scale->value, d.global_scale->convention, false}
                                       : GlobalScale{tensor_amax, ScaleConvention::amax, false};
    const Comparison pc = compare(part, how, keep, false);
    for (auto e : pc.first_codes)
      if (c.first_codes.size() < keep) e.row += r0, c.first_codes.push_back(e);
    for (auto e : pc.first_scales)
      if (c.first_scales.size() < keep) e.row += r0, c.first_scales.push_back(e);
    for (auto e : pc.first_dequantized)
      if (c.first_dequantized.size() < keep) e.row += r0, c.first_dequantized.push_back(e);
  }
  return report_of(recipe, sizes, how, std::move(c),
                   "  compared on cuda:" + std::to_string(device) +
                       " (kvq's kernels; the error against the bound is reported for CPU tensors)\n");
}

// kvq's quantize kernel from a CUDA tensor into the caller's CUDA tensors (codes, scales: kvq's
// layout, kernels/quantize_layout.hpp) on `stream`: the benchmark's yardstick (python/benchmarks).
void quantize_on_device(const std::string& recipe, const Array& x, const Array& codes, std::optional<Array> scales,
                        float global_scale, std::uintptr_t stream) {
  check_device(x, "x");
  if (!on_cuda(x)) type_error("x: a CUDA tensor");
  const DeviceTensor tx = device_tensor(x, "x", x.device_id()), tc = device_tensor(codes, "codes", x.device_id());
  std::optional<DeviceTensor> ts;
  if (scales) ts = device_tensor(*scales, "scales", x.device_id());
  const DType input = value_type(tx.meta, "x", std::nullopt);
  const auto s = quantize_shape(recipe_arg(recipe).recipe, tx.meta.shape, std::nullopt, "x");
  if (tc.meta.item() != 1 || tc.meta.count() != s.code_bytes()) value_error("codes: " + std::to_string(s.code_bytes()) + " bytes");
  if (s.scale_bytes() && (!ts || ts->meta.item() != 1 || ts->meta.count() != s.scale_bytes()))
    value_error("scales: " + std::to_string(s.scale_bytes()) + " bytes");
  namespace dev = kvq::kernels::device;
  device_ok(dev::select(x.device_id()), "selecting the device");
  device_ok(dev::quantize(s, input, tx.data, global_scale, const_cast<std::uint8_t*>(tc.data),
                          ts ? const_cast<std::uint8_t*>(ts->data) : nullptr, reinterpret_cast<void*>(stream)),
            "kvq's quantize kernel");
}

Report verify(const std::string& recipe, const Array& x, const Array& codes, std::optional<Array> scales, nb::object global_scale,
              const std::string& role, const std::string& convention, std::optional<Array> dequantized,
              const std::string& nibble_order, const std::string& scale_layout, std::optional<int> block,
              std::optional<std::string> x_dtype, int show, std::uintptr_t stream) {
  if (show < 0) value_error("show: must be >= 0");
  check_device(x, "x");
  check_device(codes, "codes");
  if (scales) check_device(*scales, "scales");
  if (dequantized) check_device(*dequantized, "dequantized");
  if (on_cuda(x) || on_cuda(codes) || (scales && on_cuda(*scales)) || (dequantized && on_cuda(*dequantized)))
    return verify_on_device(recipe, x, codes, scales, global_scale, role, convention, dequantized, nibble_order, scale_layout,
                            block, x_dtype, show, stream);
  const PortArgs p = port_args(recipe, x, codes, scales, global_scale, role, convention, dequantized, nibble_order,
                               scale_layout, block, x_dtype);
  const kvq::ports::Comparison c = kvq::ports::compare(p.data, p.how, static_cast<std::size_t>(show), true);
  return report_of(recipe, kvq::ports::summary_of(p.data), p.how, c);
}

struct Identification {
  std::size_t tried = 0;
  std::vector<std::string> exact;
  std::vector<std::pair<std::string, std::int64_t>> nearest;
};

Identification identify(const Array& x, const Array& codes, std::optional<Array> scales, nb::object global_scale,
                        const std::string& role, const std::string& convention, std::optional<Array> dequantized,
                        const std::string& nibble_order, const std::string& scale_layout, std::optional<int> block,
                        std::optional<std::string> x_dtype, int changes, int show) {
  if (changes < 0 || changes > 2) value_error("changes: 0, 1 or 2");
  if (show < 0) value_error("show: must be >= 0");
  const PortArgs p = port_args(std::nullopt, x, codes, scales, global_scale, role, convention, dequantized, nibble_order,
                               scale_layout, block, x_dtype);
  const kvq::ports::Identification id = kvq::ports::identify(p.data, changes, static_cast<std::size_t>(show));
  Identification out;
  out.tried = id.tried;
  for (const auto& c : id.exact) out.exact.push_back(c.variant.phrase());
  for (const auto& c : id.nearest) out.nearest.emplace_back(c.variant.phrase(), c.comparison.mismatches());
  return out;
}

std::string identification_text(const Identification& id) {
  std::string s = "kvq identify: " + std::to_string(id.tried) + " variants tried; " + std::to_string(id.exact.size()) +
                  " reproduce every output\n";
  for (const auto& e : id.exact) s += "  exact: this port follows " + e + "\n";
  if (!id.nearest.empty()) s += id.exact.empty() ? "  nearest (mismatches):\n" : "  next nearest (mismatches):\n";
  for (const auto& [phrase, n] : id.nearest) s += "    " + phrase + ": " + std::to_string(n) + "\n";
  return s;
}

// ---- the layout-aware kinds: the command line's readers and verdicts on tensors in memory ----

// The .npy type string of a tensor, and the manifest "dtype" its bits need ("bfloat16"), or "".
std::pair<std::string, std::string> npy_descr(nb::dlpack::dtype t, const std::string& role) {
  using C = nb::dlpack::dtype_code;
  if (is(t, C::Bfloat, 16)) return {"<u2", "bfloat16"};
  if (is(t, C::Float, 32)) return {"<f4", ""};
  if (is(t, C::Float, 16)) return {"<f2", ""};
  if (is(t, C::UInt, 16)) return {"<u2", ""};
  if (is(t, C::Int, 32)) return {"<i4", ""};
  if (is(t, C::Int, 64)) return {"<i8", ""};
  if (is(t, C::Int, 8)) return {"|i1", ""};
  if (t.bits == 8 && t.lanes == 1) return {"|u1", ""};  // uint8, float8, packed float4: bytes
  type_error(role + ": " + dtype_name(t) + " is not a type kvq's port readers take");
}

std::pair<std::string, std::string> tensor_type(const Array& a, const std::string& role) { return npy_descr(a.dtype(), role); }

// kvq verify (or identify) on a manifest's text and its tensors by name: (exit status, report, error,
// verify's first differences as records).
std::tuple<int, std::string, std::string, std::vector<kvq::cli::DifferenceRecord>> port_call(bool verify, const std::string& what, const std::string& manifest,
                                                    const nb::dict& arrays, int show, int changes) {
  std::map<std::string, kvq::cli::NpyArray> memory;
  for (const auto& [key, value] : arrays) {
    const std::string role = nb::cast<std::string>(key);
    const Tensor t = read(nb::cast<Array>(value), role.c_str());
    kvq::cli::NpyArray a;
    a.descr = npy_descr(t.dtype, role).first;
    a.shape = t.shape;
    a.bytes.assign(t.bytes.data(), t.bytes.data() + t.bytes.size());  // the command line readers own their bytes
    memory[role] = std::move(a);
  }
  kvq::cli::PortRequest request;
  request.recipe = what;
  request.files.memory = &memory;
  request.files.manifest_text = manifest;
  request.show = show;
  request.changes = changes;
  std::vector<kvq::cli::DifferenceRecord> records;
  request.records = &records;
  std::ostringstream out, err;
  const int status = verify ? kvq::cli::verify_port(request, out, err) : kvq::cli::identify_port(request, out, err);
  return {status, out.str(), err.str(), std::move(records)};
}

std::vector<std::string> names(const auto& list) {
  std::vector<std::string> out;
  for (const auto& n : list) out.emplace_back(n);
  return out;
}

}  // namespace

NB_MODULE(_kvq, m) {
  m.doc() = "kvq: bit-exact low-precision formats, KV-cache recipes and port verification (docs/python.md)";
  m.def("formats", [] { return names(kvq::kFormatNames); }, "The format names kvq models.");
  m.def("conventions", [] { return names(kvq::kConventionNames); }, "The libraries' conversion conventions.");
  m.def("recipes", [] {
    std::vector<std::string> out;
    for (const auto& r : kvq::kRecipes) out.emplace_back(r.name);
    return out;
  }, "The named scale recipes.");
  m.def("_read_in_place", [](const Array& a) { return a.device_type() == nb::device::cpu::value && c_order_in_place(a, static_cast<int>(a.itemsize())); },
        nb::arg("array"), "Whether kvq reads this CPU array where it lies (C order, aligned) rather than a gathered copy.");
  m.def("cuda_available", [] {
    std::string why;
    return kvq::kernels::device::available(&why);
  }, "Whether kvq.verify can compare CUDA tensors here: a build with kvq's CUDA kernels and a CUDA device.");
  m.def("encode", &encode, nb::arg("x"), nb::arg("format"), nb::arg("convention") = "ieee", nb::arg("rounding") = nb::none(),
        "Codes of x (float32/16, bfloat16 or float64 values) in `format` under a library's convention.");
  m.def("decode", &decode, nb::arg("codes"), nb::arg("format"), "Exact values (float64) of integer codes.");
  m.def("pack_e2m1", &pack_e2m1, nb::arg("codes"), "E2M1 codes one a byte -> two a byte (element 2i low).");
  m.def("unpack_e2m1", &unpack_e2m1, nb::arg("packed"), "Packed E2M1 bytes -> one code a byte.");

  nb::class_<Quantized>(m, "Quantized", "What kvq.quantize returns: codes, block scales (or None), the decode scale g.")
      .def_ro("recipe", &Quantized::recipe)
      .def_ro("codes", &Quantized::codes)
      .def_ro("scales", &Quantized::scales)
      .def_ro("global_scale", &Quantized::global_scale)
      .def_prop_ro("shape", [](const Quantized& q) { return q.shape; })
      .def("__repr__", [](const Quantized& q) {
        return "Quantized(recipe='" + q.recipe + "', global_scale=" + std::to_string(q.global_scale) + ")";
      });
  m.def("quantize", &quantize, nb::arg("x"), nb::arg("recipe"), nb::arg("global_scale") = nb::none(),
        nb::arg("block") = nb::none(), nb::arg("x_dtype") = nb::none(),
        "Quantize x (last dimension: head_dim) with kvq's CPU kernel for the recipe.");
  m.def("_dequantize", &dequantize, nb::arg("recipe"), nb::arg("codes"), nb::arg("scales").none(), nb::arg("global_scale"),
        nb::arg("shape"), nb::arg("dtype"), nb::arg("block").none());

  nb::class_<Report>(m, "Report", "kvq.verify's verdict: counts, the first differences, str() is the CLI's report.")
      .def_ro("exact", &Report::exact)
      .def_ro("recipe", &Report::recipe)
      .def_ro("codes", &Report::codes)
      .def_ro("code_mismatches", &Report::code_mismatches)
      .def_ro("scales", &Report::scales)
      .def_ro("scale_mismatches", &Report::scale_mismatches)
      .def_ro("dequantized_mismatches", &Report::dequantized_mismatches)
      .def_ro("global_scale_matches", &Report::global_scale_matches)
      .def_ro("differences", &Report::differences)
      .def("__bool__", [](const Report& r) { return r.exact; })
      .def("__str__", [](const Report& r) { return r.text(); })
      .def("__repr__", [](const Report& r) {
        return std::string("<kvq.Report ") + r.recipe + (r.exact ? " BIT-EXACT>" : " MISMATCH>");
      });
  m.def("verify", &verify, nb::arg("recipe"), nb::arg("x"), nb::arg("codes"), nb::arg("scales") = nb::none(), nb::kw_only(),
        nb::arg("global_scale") = nb::none(), nb::arg("global_scale_role") = "input",
        nb::arg("global_scale_convention") = "decode", nb::arg("dequantized") = nb::none(),
        nb::arg("nibble_order") = "low_first", nb::arg("scale_layout") = "row_major", nb::arg("block") = nb::none(),
        nb::arg("x_dtype") = nb::none(), nb::arg("show") = 8, nb::arg("stream") = 0,
        "A port's outputs against the recipe's model, bit for bit (kvq verify); CUDA tensors on their GPU.");

  m.def("_quantize_on_device", &quantize_on_device, nb::arg("recipe"), nb::arg("x"), nb::arg("codes"), nb::arg("scales").none(),
        nb::arg("global_scale"), nb::arg("stream"));
  m.def("_tensor_type", &tensor_type, nb::arg("tensor"), nb::arg("role"));
  m.def("_port_call", &port_call, nb::arg("verify"), nb::arg("what"), nb::arg("manifest"), nb::arg("arrays"),
        nb::arg("show"), nb::arg("changes"));

  nb::class_<Identification>(m, "Identification", "kvq.identify's answer: the variants that reproduce every output.")
      .def_ro("tried", &Identification::tried)
      .def_ro("exact", &Identification::exact)
      .def_ro("nearest", &Identification::nearest)
      .def("__str__", &identification_text);
  m.def("identify", &identify, nb::arg("x"), nb::arg("codes"), nb::arg("scales") = nb::none(), nb::kw_only(),
        nb::arg("global_scale") = nb::none(), nb::arg("global_scale_role") = "input",
        nb::arg("global_scale_convention") = "decode", nb::arg("dequantized") = nb::none(),
        nb::arg("nibble_order") = "low_first", nb::arg("scale_layout") = "row_major", nb::arg("block") = nb::none(),
        nb::arg("x_dtype") = nb::none(), nb::arg("changes") = 1, nb::arg("show") = 5,
        "The recipes and variants that reproduce a port's outputs (kvq identify).");
}
