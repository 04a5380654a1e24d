#include "cli/port_files.hpp"

#include <cstring>
#include <filesystem>

#include "cli/json.hpp"
#include "cli/npy.hpp"
#include "cli/safetensors.hpp"
#include "cli/untrusted.hpp"

namespace kvq::cli {
namespace {

using ports::DType;

struct Tensor {
  NpyArray array;
  std::string dtype;  // the manifest's "dtype", or the safetensors dtype
  std::string path;
};

std::string text_of(const Json* j) { return j && j->kind == Json::Kind::string ? j->text : std::string(); }

std::string read_tensor(const std::string& dir, const std::string& role, const Json& spec, Tensor* t) {
  const std::string file = text_of(spec.get("file"));
  if (file.empty()) return role + ": the manifest gives no \"file\"";
  t->path = std::filesystem::path(file).is_absolute() ? file : dir + "/" + file;
  t->dtype = text_of(spec.get("dtype"));
  std::string error, stored;
  if (file.ends_with(".safetensors")) {
    error = read_safetensors(t->path, text_of(spec.get("key")), &t->array, &stored);
    if (t->dtype.empty()) t->dtype = stored == "BF16" ? "bfloat16" : (stored == "F16" ? "float16" : "");
  } else {
    error = read_npy(t->path, &t->array);
  }
  return error.empty() ? std::string() : role + ": " + error;
}

// FP32, FP16 or 16-bit patterns named bfloat16/float16 in the manifest.
std::string value_type(const Tensor& t, const std::string& role, DType* out) {
  const std::string& d = t.array.descr;
  if (d == "<f4") *out = DType::fp32;
  else if (d == "<f2") *out = DType::fp16;
  else if (d == "<u2" && (t.dtype == "bfloat16" || t.dtype == "bf16")) *out = DType::bf16;
  else if (d == "<u2" && (t.dtype == "float16" || t.dtype == "fp16")) *out = DType::fp16;
  else if (d == "<u2")
    return role + ": " + t.path + " holds uint16; name its \"dtype\" (bfloat16 or float16) in the manifest";
  else
    return role + ": " + t.path + " holds " + d + "; give float32, float16, or bfloat16 bits";
  return {};
}

std::string bytes_of(const Tensor& t, const std::string& role, std::vector<std::uint8_t>* out) {
  if (t.array.descr == "|u1" || t.array.descr == "|i1") {
    *out = t.array.bytes;
    return {};
  }
  if (t.array.descr == "<f4") {  // power-of-two FP32 scales (e.g. MLA tiles): their E8M0 byte
    out->clear();
    for (std::size_t i = 0; i < t.array.bytes.size(); i += 4) {
      std::uint32_t b;
      std::memcpy(&b, &t.array.bytes[i], 4);
      if ((b & 0x807fffffu) != 0 || (b >> 23) == 0 || (b >> 23) == 0xFF)
        return role + ": " + t.path + " element " + std::to_string(i / 4) + " is not a normal power of two; give uint8 codes";
      out->push_back(static_cast<std::uint8_t>(b >> 23));
    }
    return {};
  }
  return role + ": " + t.path + " holds " + t.array.descr + "; give uint8 codes";
}

}  // namespace

std::string load_port(const PortFiles& files, LoadedPort* out) {
  std::string path = files.manifest;
  if (path.empty()) {
    path = files.outputs + "/manifest.json";
    if (!std::filesystem::exists(path)) path = files.inputs + "/manifest.json";
  }
  out->manifest = path;
  if (!std::filesystem::exists(path))
    return "manifest: cannot open " + path + " (give --manifest FILE, or put manifest.json in --outputs)";
  std::string text;
  if (auto e = read_text_file(path, 16 << 20, &text); !e.empty()) return "manifest: " + e;
  Json m;
  if (auto e = parse_json(text, &m); !e.empty()) return "manifest: " + path + " is not JSON: " + e;
  if (m.kind != Json::Kind::object) return "manifest: " + path + " must be a JSON object";
  out->recipe = text_of(m.get("recipe"));
  const Json* tensors = m.get("tensors");
  if (!tensors || tensors->kind != Json::Kind::object) return "manifest: " + path + " has no \"tensors\" object";
  for (const auto& [role, spec] : tensors->members)
    if (role != "x" && role != "codes" && role != "block_scales" && role != "global_scale" && role != "dequantized")
      return "manifest: unknown role '" + role + "' (x, codes, block_scales, global_scale, dequantized)";
  ports::PortData& d = out->data;
  const Json* x = tensors->get("x");
  const Json* codes = tensors->get("codes");
  if (!x || !codes) return "manifest: " + path + " must name the roles \"x\" and \"codes\"";
  Tensor t;
  if (auto e = read_tensor(files.inputs, "x", *x, &t); !e.empty()) return e;
  if (auto e = value_type(t, "x", &d.input); !e.empty()) return e;
  if (t.array.shape.empty() || t.array.shape.back() == 0) return "x: " + t.path + " needs a last dimension (head_dim) > 0";
  d.cols = t.array.shape.back();
  d.rows = t.array.count() / d.cols;
  d.x = std::move(t.array.bytes);
  if (auto e = read_tensor(files.outputs, "codes", *codes, &t); !e.empty()) return e;
  if (t.array.descr != "|u1" && t.array.descr != "|i1") return "codes: " + t.path + " holds " + t.array.descr + "; give uint8";
  d.codes = std::move(t.array.bytes);
  if (const Json* s = tensors->get("block_scales")) {
    if (auto e = read_tensor(files.outputs, "block_scales", *s, &t); !e.empty()) return e;
    if (auto e = bytes_of(t, "block_scales", &d.scales); !e.empty()) return e;
    d.has_scales = true;
  }
  if (const Json* s = tensors->get("global_scale")) {
    ports::GlobalScale gs;
    const std::string convention = text_of(s->get("convention"));
    const std::string role = text_of(s->get("role"));
    if (!convention.empty() && convention != "decode" && convention != "encode" && convention != "amax")
      return "global_scale: \"convention\" is decode, encode or amax, got '" + convention + "'";
    if (!role.empty() && role != "input" && role != "output")
      return "global_scale: \"role\" is input or output, got '" + role + "'";
    gs.convention = convention == "encode" ? ports::ScaleConvention::encode
                    : convention == "amax" ? ports::ScaleConvention::amax
                                           : ports::ScaleConvention::decode;
    gs.is_output = role == "output";
    if (const std::string bits = text_of(s->get("bits")); !bits.empty()) {
      const auto value = parse_hex(bits, 32);
      if (!value) return "global_scale: \"bits\" must be hex FP32 bits like 0x3f800000, got '" + bits + "'";
      gs.value = float_from_bits(static_cast<std::uint32_t>(*value));
    } else {
      if (auto e = read_tensor(gs.is_output ? files.outputs : files.inputs, "global_scale", *s, &t); !e.empty()) return e;
      if (t.array.descr != "<f4" || t.array.count() != 1)
        return "global_scale: " + t.path + " must hold one float32 (or give \"bits\")";
      std::memcpy(&gs.value, t.array.bytes.data(), 4);
    }
    d.global_scale = gs;
  }
  if (const Json* s = tensors->get("dequantized")) {
    if (auto e = read_tensor(files.outputs, "dequantized", *s, &t); !e.empty()) return e;
    DType type;
    if (auto e = value_type(t, "dequantized", &type); !e.empty()) return e;
    std::vector<float> values(static_cast<std::size_t>(t.array.count()));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = kernels::load_value(type, t.array.bytes.data(), i);
    d.dequantized = std::move(values);
    d.dequantized_type = type;
  }
  if (const Json* layout = m.get("layout")) {
    const std::string order = text_of(layout->get("nibble_order"));
    if (!order.empty() && order != "low_first" && order != "high_first")
      return "layout: \"nibble_order\" is low_first or high_first, got '" + order + "'";
    d.nibbles = order == "high_first" ? ports::NibbleOrder::high_first : ports::NibbleOrder::low_first;
    const std::string scales = text_of(layout->get("scales"));
    if (!scales.empty() && scales != "row_major" && scales != "token_group4" && scales != "swizzle_128x4")
      return "layout: \"scales\" is row_major, token_group4 or swizzle_128x4, got '" + scales + "'";
    d.scale_layout = scales == "token_group4" ? ports::ScaleLayout::token_group4
                     : scales == "swizzle_128x4" ? ports::ScaleLayout::swizzle_128x4 : ports::ScaleLayout::row_major;
    if (const Json* b = layout->get("block")) {
      const auto block = b->kind == Json::Kind::number ? integer_of(b->number, 1, kMaxRecipeBlock) : std::nullopt;
      if (!block) return "layout: \"block\" must be an integer in 1.." + std::to_string(kMaxRecipeBlock);
      d.block = static_cast<int>(*block);
    }
  }
  return {};
}

}  // namespace kvq::cli
