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


// A float32 parameter: {"bits": "0x..."} or a file of `max` float32 values at most (one, or one a
// head); the values in *out.
std::string read_floats(const std::string& dir, const std::string& role, const Json& spec, std::size_t max,
                        std::vector<float>* out) {
  out->clear();
  if (const std::string bits = text_of(spec.get("bits")); !bits.empty()) {
    const auto value = parse_hex(bits, 32);
    if (!value) return role + ": \"bits\" must be hex FP32 bits like 0x3f800000, got '" + bits + "'";
    out->push_back(float_from_bits(static_cast<std::uint32_t>(*value)));
    return {};
  }
  Tensor t;
  if (auto e = read_tensor(dir, role, spec, &t); !e.empty()) return e;
  if (t.array.descr != "<f4" || t.array.count() < 1 || static_cast<std::size_t>(t.array.count()) > max)
    return role + ": " + t.path + " must hold one float32, or one a head (" + std::to_string(max) + "), or give \"bits\"";
  out->resize(static_cast<std::size_t>(t.array.count()));
  std::memcpy(out->data(), t.array.bytes.data(), 4 * out->size());
  return {};
}

// A cache the port wrote (uint8 or FP8 bytes), its shape, and the bytes it held before the call:
// "poison" (the byte it was filled with) or "before" (a dump of it, read from the inputs).
std::string read_cache(const PortFiles& files, const std::string& role, const Json& spec, std::vector<std::int64_t>* shape,
                       std::vector<std::uint8_t>* after, std::vector<std::uint8_t>* before, bool* before_known) {
  Tensor t;
  if (auto e = read_tensor(files.outputs, role, spec, &t); !e.empty()) return e;
  if (t.array.descr != "|u1" && t.array.descr != "|i1") return role + ": " + t.path + " holds " + t.array.descr + "; give uint8 (or FP8) bytes";
  *shape = t.array.shape;
  *after = std::move(t.array.bytes);
  const std::string poison = text_of(spec.get("poison"));
  const Json* dump = spec.get("before");
  if (!poison.empty() && dump) return role + ": give \"poison\" or \"before\", not both";
  *before_known = true;
  if (!poison.empty()) {
    const auto byte = parse_hex(poison, 8);
    if (!byte) return role + ": \"poison\" must be one hex byte like 0xA5, got '" + poison + "'";
    before->assign(after->size(), static_cast<std::uint8_t>(*byte));
  } else if (dump) {
    if (auto e = read_tensor(files.inputs, role + ".before", *dump, &t); !e.empty()) return e;
    if (t.array.bytes.size() != after->size())
      return role + ".before: " + t.path + " holds " + std::to_string(t.array.bytes.size()) + " bytes, the cache " +
             std::to_string(after->size());
    *before = std::move(t.array.bytes);
  } else {
    *before = *after;  // the addressed bytes are still checked; the untouched ones cannot be
    *before_known = false;
  }
  return {};
}

// kind "paged-store" (docs/ports.md "Paged stores"): vLLM's argument names.
std::string load_paged(const PortFiles& files, const Json& m, const Json& tensors, const Recipe* recipe, LoadedPort* out) {
  using kernels::PagedFormat;
  for (const auto& [role, spec] : tensors.members)
    if (role != "key" && role != "value" && role != "slot_mapping" && role != "key_cache" && role != "value_cache" &&
        role != "kv_cache" && role != "k_scale" && role != "v_scale")
      return "manifest: unknown role '" + role + "' for kind paged-store (key, value, slot_mapping, key_cache, value_cache, "
             "kv_cache, k_scale, v_scale)";
  ports::PagedPort& p = out->paged;
  kernels::PagedStoreShape& s = p.shape;
  kernels::PagedKvLayout& L = s.layout;
  // NVFP4 pages are one kv_cache, FP8 caches a key_cache and a value_cache.
  const bool nvfp4 = tensors.get("kv_cache") != nullptr;
  L.format = nvfp4 ? PagedFormat::nvfp4 : PagedFormat::fp8;
  if (recipe) {
    if ((recipe->element == FormatId::e2m1) != nvfp4)
      return std::string("manifest: the roles are ") + (nvfp4 ? "an NVFP4 page (kv_cache)" : "FP8 caches (key_cache, value_cache)") +
             ", the recipe's element is not " + (nvfp4 ? "E2M1" : "E4M3");
    s.recipe = *recipe;
  }
  const Json* layout = m.get("layout");
  const std::string order = layout ? text_of(layout->get("kv_layout")) : std::string();
  if (!order.empty() && order != "NHD" && order != "HND") return "layout: \"kv_layout\" is NHD or HND, got '" + order + "'";
  L.order = order == "HND" ? kernels::KvOrder::hnd : kernels::KvOrder::nhd;
  const std::string swizzle = layout ? text_of(layout->get("scale_swizzle")) : std::string();
  if (!swizzle.empty() && swizzle != "none" && swizzle != "v_only" && swizzle != "k_and_v")
    return "layout: \"scale_swizzle\" is none, v_only or k_and_v, got '" + swizzle + "'";
  L.swizzle = swizzle == "v_only" ? kernels::ScaleSwizzle::v_only
              : swizzle == "k_and_v" ? kernels::ScaleSwizzle::k_and_v : kernels::ScaleSwizzle::none;
  const char* caches[2] = {nvfp4 ? "kv_cache" : "key_cache", "value_cache"};
  for (int b = 0; b < (nvfp4 ? 1 : 2); ++b) {
    const Json* spec = tensors.get(caches[b]);
    if (!spec) return std::string("manifest: kind paged-store with ") + (nvfp4 ? "an NVFP4" : "an FP8") + " recipe needs the role \"" + caches[b] + "\"";
    std::vector<std::int64_t> shape;
    if (auto e = read_cache(files, caches[b], *spec, &shape, &p.after[b], &p.before[b], &p.before_known[b]); !e.empty()) return e;
    const bool nhd = L.order == kernels::KvOrder::nhd;
    std::int64_t blocks, block_size, heads, dim;
    if (!nvfp4) {
      if (shape.size() != 4)
        return std::string(caches[b]) + ": shape must be [num_blocks, " + (nhd ? "block_size, heads" : "heads, block_size") + ", head_dim]";
      blocks = shape[0], block_size = shape[nhd ? 1 : 2], heads = shape[nhd ? 2 : 1], dim = shape[3];
    } else {
      if (shape.size() != 5 || shape[1] != 2 || shape[4] % 9 != 0)
        return std::string("kv_cache: shape must be [num_blocks, 2, ") + (nhd ? "block_size, heads" : "heads, block_size") +
               ", head_dim/2 + head_dim/16]";
      blocks = shape[0], block_size = shape[nhd ? 2 : 3], heads = shape[nhd ? 3 : 2], dim = shape[4] / 9 * 16;
    }
    if (b == 1 && (blocks != L.num_blocks || block_size != L.block_size || heads != L.heads || dim != L.head_dim))
      return "value_cache: shape differs from key_cache's";
    L.num_blocks = blocks, L.block_size = block_size, L.heads = heads, L.head_dim = dim;
  }
  if (const Json* bs = layout ? layout->get("block_size") : nullptr) {
    const auto v = bs->kind == Json::Kind::number ? integer_of(bs->number, 1, kMaxJsonInteger) : std::nullopt;
    if (!v || *v != L.block_size)
      return "layout: \"block_size\" must equal the caches' (" + std::to_string(L.block_size) + ")";
  }
  Tensor t;
  for (const char* role : {"key", "value"}) {
    const Json* spec = tensors.get(role);
    if (!spec) return std::string("manifest: kind paged-store needs the role \"") + role + "\"";
    if (auto e = read_tensor(files.inputs, role, *spec, &t); !e.empty()) return e;
    DType type;
    if (auto e = value_type(t, role, &type); !e.empty()) return e;
    const auto expected = t.array.shape.empty() ? std::nullopt : checked_product({t.array.shape[0], L.heads, L.head_dim});
    if (!expected || t.array.count() != *expected)
      return std::string(role) + ": " + t.path + " must be [tokens, " + std::to_string(L.heads) + ", " +
             std::to_string(L.head_dim) + "] (heads and head_dim of the cache)";
    if (role == std::string("value") && (type != s.input || t.array.shape[0] != s.tokens))
      return "value: " + t.path + " must have key's dtype and token count";
    s.input = type;
    s.tokens = t.array.shape[0];
    (role == std::string("key") ? p.key : p.value) = std::move(t.array.bytes);
  }
  const Json* slots = tensors.get("slot_mapping");
  if (!slots) return "manifest: kind paged-store needs the role \"slot_mapping\"";
  if (auto e = read_tensor(files.inputs, "slot_mapping", *slots, &t); !e.empty()) return e;
  if (!index_values(t.array, &p.slot_mapping)) return "slot_mapping: " + t.path + " holds " + t.array.descr + "; give int32 or int64";
  if (static_cast<std::int64_t>(p.slot_mapping.size()) != s.tokens)
    return "slot_mapping: " + t.path + " holds " + std::to_string(p.slot_mapping.size()) + " entries, key " +
           std::to_string(s.tokens) + " tokens";
  std::vector<float> k, v;
  for (const char* role : {"k_scale", "v_scale"}) {
    const Json* spec = tensors.get(role);
    if (!spec) return std::string("manifest: kind paged-store needs the role \"") + role + "\" (" +
                      (nvfp4 ? "the tensor scale g" : "the decode scale") + ")";
    if (auto e = read_floats(files.inputs, role, *spec, static_cast<std::size_t>(kernels::kMaxPagedHeads), role == std::string("k_scale") ? &k : &v); !e.empty())
      return e;
  }
  if (k.size() != v.size() || (k.size() != 1 && static_cast<std::int64_t>(k.size()) != L.heads))
    return "k_scale, v_scale: give one scale each, or one a head (" + std::to_string(L.heads) + ") each";
  s.per_head_scales = k.size() > 1;
  for (std::size_t h = 0; h < k.size(); ++h) p.scales.k[h] = k[h], p.scales.v[h] = v[h];
  return {};
}

}  // namespace

std::string load_port(const PortFiles& files, LoadedPort* out, const Recipe* recipe) {
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
  const std::string kind = text_of(m.get("kind"));
  if (kind == "paged-store") {
    out->kind = PortKind::paged_store;
    return load_paged(files, m, *tensors, recipe, out);
  }
  if (!kind.empty() && kind != "quantize")
    return "manifest: \"kind\" is quantize or paged-store, got '" + kind + "'";
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
