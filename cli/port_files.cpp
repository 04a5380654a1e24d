#include "cli/port_files.hpp"

#include <algorithm>
#include <cstdint>
#include <cmath>
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

// "" when every role the manifest names is one of `roles`, else the message naming the first other
// and listing the kind's roles.
std::string check_roles(const Json& tensors, const std::string& kind, const std::vector<std::string>& roles) {
  for (const auto& [role, spec] : tensors.members)
    if (std::find(roles.begin(), roles.end(), role) == roles.end()) {
      std::string all;
      for (const auto& r : roles) all += (all.empty() ? "" : ", ") + r;
      return "manifest: unknown role '" + role + "'" + (kind.empty() ? "" : " for kind " + kind) + " (" + all + ")";
    }
  return {};
}

std::string read_tensor(const PortFiles& files, const std::string& dir, const std::string& role, const Json& spec, Tensor* t) {
  const std::string file = text_of(spec.get("file"));
  if (file.empty()) return role + ": the manifest gives no \"file\"";
  t->dtype = text_of(spec.get("dtype"));
  if (files.memory) {  // the Python package: tensors passed in memory, named by "file"
    const auto it = files.memory->find(file);
    if (it == files.memory->end()) return role + ": no tensor '" + file + "' was passed";
    t->path = "argument " + file;
    t->array = it->second;
    return {};
  }
  t->path = std::filesystem::path(file).is_absolute() ? file : dir + "/" + file;
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
std::string read_floats(const PortFiles& files, const std::string& dir, const std::string& role, const Json& spec,
                        std::size_t max, std::vector<float>* out) {
  out->clear();
  if (const std::string bits = text_of(spec.get("bits")); !bits.empty()) {
    const auto value = parse_hex(bits, 32);
    if (!value) return role + ": \"bits\" must be hex FP32 bits like 0x3f800000, got '" + bits + "'";
    out->push_back(float_from_bits(static_cast<std::uint32_t>(*value)));
    return {};
  }
  Tensor t;
  if (auto e = read_tensor(files, dir, role, spec, &t); !e.empty()) return e;
  if (t.array.descr != "<f4" || t.array.count() < 1 || static_cast<std::size_t>(t.array.count()) > max)
    return role + ": " + t.path + " must hold one float32, or one a head (" + std::to_string(max) + "), or give \"bits\"";
  out->resize(static_cast<std::size_t>(t.array.count()));
  std::memcpy(out->data(), t.array.bytes.data(), 4 * out->size());
  return {};
}

// A cache the port wrote (uint8 or FP8 bytes), its shape, and the bytes it held before the call:
// "poison" (the byte it was filled with) or "before" (a dump of it, read from the inputs).
// float32_ok: a cache of float32 values is read as its bytes too (the shape gains a last dimension of 4).
std::string read_cache(const PortFiles& files, const std::string& role, const Json& spec, std::vector<std::int64_t>* shape,
                       std::vector<std::uint8_t>* after, std::vector<std::uint8_t>* before, bool* before_known,
                       bool float32_ok = false) {
  Tensor t;
  if (auto e = read_tensor(files, files.outputs, role, spec, &t); !e.empty()) return e;
  const bool f32 = float32_ok && t.array.descr == "<f4";
  if (t.array.descr != "|u1" && t.array.descr != "|i1" && !f32)
    return role + ": " + t.path + " holds " + t.array.descr + "; give uint8 (or FP8" + (float32_ok ? ", or float32" : "") + ") bytes";
  if (f32) t.array.shape.push_back(4);
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
    if (auto e = read_tensor(files, files.inputs, role + ".before", *dump, &t); !e.empty()) return e;
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

// The geometry of an NVFP4 page of `shape` [num_blocks, 2, block_size, heads, head_dim/2 +
// head_dim/16] (NHD; HND swaps block_size and heads; docs/paged.md), every dimension >= 1, so that
// each is bounded by the file's bytes and no product of them overflows.
struct PageShape {
  std::int64_t num_blocks = 0, block_size = 0, heads = 0, head_dim = 0;
};
std::string nvfp4_page_shape(const std::string& role, const std::vector<std::int64_t>& shape, bool nhd, PageShape* out) {
  const bool dims_ok = shape.size() == 5 && std::all_of(shape.begin(), shape.end(), [](std::int64_t d) { return d >= 1; });
  if (!dims_ok || shape[1] != 2 || shape[4] % 9 != 0)
    return role + ": shape must be [num_blocks, 2, " + (nhd ? "block_size, heads" : "heads, block_size") +
           ", head_dim/2 + head_dim/16], every dimension >= 1 (an NVFP4 page)";
  *out = {shape[0], shape[nhd ? 2 : 3], shape[nhd ? 3 : 2], shape[4] / 9 * 16};
  return {};
}

// kind "paged-store" (docs/ports.md "Paged stores"): vLLM's argument names.
std::string load_paged(const PortFiles& files, const Json& m, const Json& tensors, const Recipe* recipe, LoadedPort* out) {
  using kernels::PagedFormat;
  static const char* const kPool[] = {"k_buffer", "k_scale_buffer", "v_buffer", "v_scale_buffer"};  // SGLang's NVFP4 pool
  if (auto e = check_roles(tensors, "paged-store",
                           {"key", "value", "slot_mapping", "key_cache", "value_cache", "kv_cache", kPool[0], kPool[1],
                            kPool[2], kPool[3], "k_scale", "v_scale", "k_scale_cache", "v_scale_cache"});
      !e.empty())
    return e;
  ports::PagedPort& p = out->paged;
  kernels::PagedStoreShape& s = p.shape;
  kernels::PagedKvLayout& L = s.layout;
  // NVFP4 pages are one kv_cache (or SGLang's four pool buffers), FP8 caches a key_cache and a value_cache.
  const bool pool = std::any_of(std::begin(kPool), std::end(kPool), [&](const char* r) { return tensors.get(r) != nullptr; });
  const bool nvfp4 = tensors.get("kv_cache") != nullptr || pool;
  L.format = nvfp4 ? PagedFormat::nvfp4 : PagedFormat::fp8;
  // vLLM's per-token-head FP8 store: its scales in two more caches, no k_scale / v_scale.
  p.token_head_scales = tensors.get("k_scale_cache") != nullptr || tensors.get("v_scale_cache") != nullptr;
  if (p.token_head_scales && nvfp4) return "manifest: k_scale_cache and v_scale_cache go with FP8 caches (key_cache, value_cache)";
  if (recipe) {
    if ((recipe->element == FormatId::e2m1) != nvfp4)
      return std::string("manifest: the roles are ") + (nvfp4 ? "an NVFP4 page (kv_cache)" : "FP8 caches (key_cache, value_cache)") +
             ", the recipe's element is not " + (nvfp4 ? "E2M1" : "E4M3");
    s.recipe = *recipe;
  }
  const Json* layout = m.get("layout");
  const std::string order = layout ? text_of(layout->get("kv_layout")) : std::string();
  bool found = order.empty();
  for (const kernels::KvOrder o : {kernels::KvOrder::nhd, kernels::KvOrder::hnd})
    if (order == kernels::name_of(o)) L.order = o, found = true;
  if (!found) return "layout: \"kv_layout\" is NHD or HND, got '" + order + "'";
  const std::string swizzle = layout ? text_of(layout->get("scale_swizzle")) : std::string();
  found = swizzle.empty();
  for (const kernels::ScaleSwizzle w : {kernels::ScaleSwizzle::none, kernels::ScaleSwizzle::v_only, kernels::ScaleSwizzle::k_and_v})
    if (swizzle == kernels::name_of(w)) L.swizzle = w, found = true;
  if (!found) return "layout: \"scale_swizzle\" is none, v_only or k_and_v, got '" + swizzle + "'";
  if (pool) {  // [slots, heads, D/2] and [slots, heads, D/16] each: one page of block_size = slots, NHD
    if (tensors.get("kv_cache")) return "manifest: give kv_cache or SGLang's pool buffers (k_buffer, ...), not both";
    if (L.order != kernels::KvOrder::nhd) return "layout: SGLang's pool buffers are NHD ([slots, heads, dim])";
    std::vector<std::int64_t> shapes[4];
    for (int i = 0; i < 4; ++i) {
      const Json* spec = tensors.get(kPool[i]);
      if (!spec) return std::string("manifest: SGLang's NVFP4 pool needs the role \"") + kPool[i] + "\"";
      std::vector<std::uint8_t> after, before;
      bool known = true;
      if (auto e = read_cache(files, kPool[i], *spec, &shapes[i], &after, &before, &known); !e.empty()) return e;
      // Every dimension >= 1 (so each is bounded by its file), the same slots and heads throughout.
      if (shapes[i].size() != 3 || std::any_of(shapes[i].begin(), shapes[i].end(), [](std::int64_t d) { return d < 1; }) ||
          shapes[i] != std::vector<std::int64_t>{shapes[0][0], shapes[0][1], shapes[i][2]} ||
          (i % 2 == 1 && shapes[i][2] * 8 != shapes[i - 1][2]) || (i >= 2 && shapes[i] != shapes[i - 2]))
        return std::string(kPool[i]) + ": shapes must be [slots, heads, head_dim/2] (data) and [slots, heads, head_dim/16] (scales), K and V alike";
      p.after[0].insert(p.after[0].end(), after.begin(), after.end());
      p.before[0].insert(p.before[0].end(), before.begin(), before.end());
      p.before_known[0] = p.before_known[0] && known;
      p.pieces.emplace_back(kPool[i], static_cast<std::int64_t>(after.size()));
    }
    if (!p.before_known[0]) p.before[0] = p.after[0];  // only the addressed bytes are checked where one piece lacks its before
    L.num_blocks = 1, L.block_size = shapes[0][0], L.heads = shapes[0][1], L.head_dim = shapes[0][2] * 2;
  }
  const char* caches[2] = {nvfp4 ? "kv_cache" : "key_cache", "value_cache"};
  for (int b = 0; b < (pool ? 0 : nvfp4 ? 1 : 2); ++b) {
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
      PageShape page;
      if (auto e = nvfp4_page_shape("kv_cache", shape, nhd, &page); !e.empty()) return e;
      blocks = page.num_blocks, block_size = page.block_size, heads = page.heads, dim = page.head_dim;
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
    if (auto e = read_tensor(files, files.inputs, role, *spec, &t); !e.empty()) return e;
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
  if (auto e = read_tensor(files, files.inputs, "slot_mapping", *slots, &t); !e.empty()) return e;
  if (!index_values(t.array, &p.slot_mapping)) return "slot_mapping: " + t.path + " holds " + t.array.descr + "; give int32 or int64";
  if (static_cast<std::int64_t>(p.slot_mapping.size()) != s.tokens)
    return "slot_mapping: " + t.path + " holds " + std::to_string(p.slot_mapping.size()) + " entries, key " +
           std::to_string(s.tokens) + " tokens";
  if (p.token_head_scales) {  // [num_blocks, block_size, heads] FP32 each (or its bytes)
    for (int b = 2; b < 4; ++b) {
      const char* role = b == 2 ? "k_scale_cache" : "v_scale_cache";
      const Json* spec = tensors.get(role);
      if (!spec) return std::string("manifest: a per-token-head store needs the role \"") + role + "\" (k_scale_cache and v_scale_cache)";
      std::vector<std::int64_t> shape;
      if (auto e = read_cache(files, role, *spec, &shape, &p.after[b], &p.before[b], &p.before_known[b], true); !e.empty()) return e;
      if (shape != std::vector<std::int64_t>{L.num_blocks, L.block_size, L.heads, 4})
        return std::string(role) + ": shape must be [num_blocks, block_size, heads] float32 (" + std::to_string(L.num_blocks) + ", " +
               std::to_string(L.block_size) + ", " + std::to_string(L.heads) + " as the caches), or those bytes as uint8 [..., 4]";
    }
    if (tensors.get("k_scale") || tensors.get("v_scale"))
      return "manifest: a per-token-head store has no k_scale / v_scale (its scales are written to k_scale_cache, v_scale_cache)";
    return {};
  }
  std::vector<float> k, v;
  for (const char* role : {"k_scale", "v_scale"}) {
    const Json* spec = tensors.get(role);
    if (!spec) return std::string("manifest: kind paged-store needs the role \"") + role + "\" (" +
                      (nvfp4 ? "the tensor scale g" : "the decode scale") + ")";
    if (auto e = read_floats(files, files.inputs, role, *spec, static_cast<std::size_t>(kernels::kMaxPagedHeads), role == std::string("k_scale") ? &k : &v); !e.empty())
      return e;
  }
  if (k.size() != v.size() || (k.size() != 1 && static_cast<std::int64_t>(k.size()) != L.heads))
    return "k_scale, v_scale: give one scale each, or one a head (" + std::to_string(L.heads) + ") each";
  s.per_head_scales = k.size() > 1;
  for (std::size_t h = 0; h < k.size(); ++h) p.scales.k[h] = k[h], p.scales.v[h] = v[h];
  return {};
}


// An index array (int32 or int64) as int32, every entry within int32.
std::string read_indices(const PortFiles& files, const std::string& dir, const std::string& role, const Json& spec,
                         std::vector<std::int32_t>* out) {
  Tensor t;
  if (auto e = read_tensor(files, dir, role, spec, &t); !e.empty()) return e;
  std::vector<std::int64_t> wide;
  if (!index_values(t.array, &wide)) return role + ": " + t.path + " holds " + t.array.descr + "; give int32 or int64";
  out->clear();
  for (std::size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] < INT32_MIN || wide[i] > INT32_MAX) return role + ": entry " + std::to_string(i) + " is outside int32";
    out->push_back(static_cast<std::int32_t>(wide[i]));
  }
  return {};
}

// A float32 parameter: "0x3f800000" (bits) or a JSON number that is exactly a float32.
std::string float_parameter(const Json* v, const std::string& name, float* out) {
  if (!v) return "parameters: \"" + name + "\" is missing";
  if (v->kind == Json::Kind::string) {
    const auto bits = parse_hex(v->text, 32);
    if (!bits) return "parameters: \"" + name + "\" must be FP32 bits like 0x3f800000 or a number, got '" + v->text + "'";
    *out = float_from_bits(static_cast<std::uint32_t>(*bits));
    return {};
  }
  if (v->kind != Json::Kind::number || static_cast<double>(static_cast<float>(v->number)) != v->number)
    return "parameters: \"" + name + "\" must be a number that is exactly a float32, or its bits as \"0x...\"";
  *out = static_cast<float>(v->number);
  return {};
}

// kinds "rope-quantize" and "rope-append" (docs/ports.md "RoPE"): FlashInfer's argument names.
// A port that computes cos/sin: each distinct (position, frequency) is a 100-digit cos and sin, a few
// hundred microseconds for the two roundings; this many take seconds.
constexpr std::int64_t kMaxComputedCosSin = std::int64_t{1} << 16;
std::string load_rope(const PortFiles& files, const Json& m, const Json& tensors, bool append, LoadedPort* out) {
  const std::vector<std::string> roles =
      append ? std::vector<std::string>{"q_rope", "k_rope", "q_nope", "k_nope", "v", "cos_sin_cache", "pos_ids", "kv_indptr",
                                        "kv_indices", "batch_indices", "positions", "q_rope_out", "q_nope_out", "k_cache",
                                        "v_cache", "ckv_cache", "kpe_cache"}
             : std::vector<std::string>{"q_rope", "k_rope", "q_nope", "k_nope", "cos_sin_cache", "pos_ids", "q_rope_out",
                                        "q_nope_out", "k_rope_out", "k_nope_out"};
  if (auto e = check_roles(tensors, append ? "rope-append" : "rope-quantize", roles); !e.empty()) return e;
  ports::RopePort& p = out->rope;
  kernels::RopeShape& s = p.shape;
  p.kind = append ? ports::RopeKind::append : ports::RopeKind::quantize;
  const Json* params = m.get("parameters");
  if (!params || params->kind != Json::Kind::object) return "manifest: kind rope-* needs a \"parameters\" object (is_neox, quant_scale_q, quant_scale_kv)";
  const Json* neox = params->get("is_neox");
  if (!neox || neox->kind != Json::Kind::boolean) return "parameters: \"is_neox\" must be true or false";
  s.style = neox->boolean ? kernels::RopeStyle::neox : kernels::RopeStyle::gptj;
  if (auto e = float_parameter(params->get("quant_scale_q"), "quant_scale_q", &p.quant_scale_q); !e.empty()) return e;
  if (auto e = float_parameter(params->get("quant_scale_kv"), "quant_scale_kv", &p.quant_scale_kv); !e.empty()) return e;
  // Inputs: q_rope [T, qh, R]; k_rope [T, kvh, R] (MLA: [T, R]); nopes likewise, or absent (nope_dim 0).
  Tensor t;
  const auto values = [&](const std::string& role, bool required, std::vector<std::int64_t>* shape, std::vector<std::uint8_t>* bytes) -> std::string {
    const Json* spec = tensors.get(role);
    if (!spec) return required ? "manifest: kind rope-* needs the role \"" + role + "\"" : std::string();
    if (auto e = read_tensor(files, files.inputs, role, *spec, &t); !e.empty()) return e;
    DType type;
    if (auto e = value_type(t, role, &type); !e.empty()) return e;
    if (role != "q_rope" && type != s.input) return role + ": " + t.path + " must have q_rope's dtype";
    s.input = type;
    *shape = t.array.shape;
    *bytes = std::move(t.array.bytes);
    return {};
  };
  std::vector<std::int64_t> qr, kr, qn, kn, vs;
  if (auto e = values("q_rope", true, &qr, &p.q_rope); !e.empty()) return e;
  if (auto e = values("k_rope", true, &kr, &p.k_rope); !e.empty()) return e;
  if (auto e = values("q_nope", false, &qn, &p.q_nope); !e.empty()) return e;
  if (auto e = values("k_nope", false, &kn, &p.k_nope); !e.empty()) return e;
  if (qr.size() != 3) return "q_rope: must be [tokens, q_heads, rope_dim]";
  const bool mla = kr.size() == 2;
  if (!mla && kr.size() != 3) return "k_rope: must be [tokens, kv_heads, rope_dim] (MLA: [tokens, rope_dim])";
  s.attention = mla ? kernels::Attention::mla : kernels::Attention::mha;
  s.tokens = qr[0], s.q_heads = static_cast<int>(qr[1]), s.rope_dim = static_cast<int>(qr[2]);
  s.kv_heads = mla ? 1 : static_cast<int>(kr[1]);
  if (kr[0] != s.tokens || kr.back() != s.rope_dim) return "k_rope: must have q_rope's tokens and rope_dim";
  const std::int64_t nope = qn.empty() ? 0 : qn.back();
  if (!qn.empty() && (qn.size() != 3 || qn[0] != s.tokens || qn[1] != s.q_heads)) return "q_nope: must be [tokens, q_heads, nope_dim]";
  if (!kn.empty() && (kn.size() != kr.size() || kn[0] != s.tokens || kn.back() != nope || (!mla && kn[1] != s.kv_heads)))
    return "k_nope: must be k_rope's shape with q_nope's nope_dim";
  if (qn.empty() != kn.empty()) return "q_nope, k_nope: give both or neither";
  if (s.q_heads <= 0 || s.kv_heads <= 0 || s.rope_dim <= 0 || nope > (1 << 20) || s.rope_dim > (1 << 20) || s.q_heads > (1 << 16) || s.kv_heads > (1 << 16))
    return "q_rope, k_rope: heads and dims must be > 0 and reasonable";
  s.head_dim = s.rope_dim + static_cast<int>(nope);
  // cos/sin: the cos_sin_cache the port reads, or (a port that computes them) rope_theta and the
  // computed rows the port claims (docs/ports.md "RoPE").
  if (const Json* theta = params->get("rope_theta")) {
    if (theta->kind != Json::Kind::number || !(theta->number > 0.0) || !std::isfinite(theta->number))
      return "parameters: \"rope_theta\" (the base of a port that computes cos/sin) must be a number > 0";
    p.rope_theta = theta->number;
  }
  const Json* csc = tensors.get("cos_sin_cache");
  const Json* claimed = params->get("cos_sin");
  const std::string cos_sin = claimed ? text_of(claimed) : std::string(csc ? "cache" : "computed-exact-angle");
  bool known = false;
  for (const ports::RopeCosSin c : {ports::RopeCosSin::cache, ports::RopeCosSin::exact_angle, ports::RopeCosSin::fp32_angle})
    if (cos_sin == ports::name_of(c)) p.cos_sin = c, known = true;
  if (!known) return "parameters: \"cos_sin\" is cache, computed-exact-angle or computed-fp32-angle, got '" + cos_sin + "'";
  if (!csc && p.rope_theta == 0) return "manifest: kind rope-* needs the role \"cos_sin_cache\" (or parameters.rope_theta: a port that computes cos/sin)";
  if (p.cos_sin == ports::RopeCosSin::cache && !csc) return "parameters: \"cos_sin\" is cache, but the manifest names no \"cos_sin_cache\"";
  if (p.cos_sin != ports::RopeCosSin::cache && p.rope_theta == 0) return "parameters: \"cos_sin\" " + cos_sin + " needs \"rope_theta\"";
  const Json* pos = tensors.get("pos_ids");
  if (!pos) return "manifest: kind rope-* needs the role \"pos_ids\"";
  if (auto e = read_indices(files, files.inputs, "pos_ids", *pos, &p.pos_ids); !e.empty()) return e;
  if (p.rope_theta > 0) {  // each (position, frequency) is a 100-digit cos and sin (oracle/rope_oracle.hpp)
    std::vector<std::int32_t> positions = p.pos_ids;
    std::sort(positions.begin(), positions.end());
    const std::int64_t pairs = (std::unique(positions.begin(), positions.end()) - positions.begin()) * std::int64_t{s.rope_dim / 2};
    if (pairs > kMaxComputedCosSin)
      return "parameters: \"rope_theta\": computing cos/sin for " + std::to_string(pairs) +
             " (position, frequency) pairs is too many (at most " + std::to_string(kMaxComputedCosSin) + "; give fewer tokens)";
  }
  if (csc) {
    if (auto e = read_tensor(files, files.inputs, "cos_sin_cache", *csc, &t); !e.empty()) return e;
    if (t.array.descr != "<f4" || t.array.shape.size() != 2 || t.array.shape[1] != s.rope_dim)
      return "cos_sin_cache: " + t.path + " must be float32 [max_pos, rope_dim]";
    s.max_pos = t.array.shape[0];
    p.cos_sin_cache.resize(static_cast<std::size_t>(t.array.count()));
    std::memcpy(p.cos_sin_cache.data(), t.array.bytes.data(), t.array.bytes.size());
  } else {  // the positions the port computes: every pos_id, each < 2^24 (an FP32 position is exact)
    s.max_pos = 1;
    for (std::size_t i = 0; i < p.pos_ids.size(); ++i) {
      if (p.pos_ids[i] < 0 || p.pos_ids[i] >= (1 << 24))
        return "pos_ids: entry " + std::to_string(i) + " is " + std::to_string(p.pos_ids[i]) + "; a port that computes cos/sin takes 0..2^24-1";
      s.max_pos = std::max<std::int64_t>(s.max_pos, std::int64_t{p.pos_ids[i]} + 1);  // the shape's bound (no table is built)
    }
  }
  s.page_size = 1;
  s.batch = 0;
  std::vector<std::string> outputs = {"q_rope_out", "q_nope_out", "k_rope_out", "k_nope_out"};
  if (append) {
    if (!mla && (!tensors.get("v") || !tensors.get("k_cache") || !tensors.get("v_cache")))
      return "manifest: kind rope-append (MHA) needs the roles \"v\", \"k_cache\" and \"v_cache\"";
    if (mla && (!tensors.get("ckv_cache") || !tensors.get("kpe_cache")))
      return "manifest: kind rope-append (MLA: k_rope [tokens, rope_dim]) needs the roles \"ckv_cache\" and \"kpe_cache\"";
    if (!mla) {
      if (auto e = values("v", true, &vs, &p.v); !e.empty()) return e;
      if (vs.size() != 3 || vs[0] != s.tokens || vs[1] != s.kv_heads || vs[2] != s.head_dim)
        return "v: must be [tokens, kv_heads, rope_dim + nope_dim]";
    }
    for (const char* role : {"kv_indptr", "kv_indices", "batch_indices", "positions"}) {
      const Json* spec = tensors.get(role);
      if (!spec) return std::string("manifest: kind rope-append needs the role \"") + role + "\"";
      auto* dst = role == std::string("kv_indptr") ? &p.kv_indptr : role == std::string("kv_indices") ? &p.kv_indices
                  : role == std::string("batch_indices") ? &p.batch_indices : &p.positions;
      if (auto e = read_indices(files, files.inputs, role, *spec, dst); !e.empty()) return e;
    }
    if (p.kv_indptr.empty()) return "kv_indptr: must hold batch + 1 entries";
    s.batch = static_cast<std::int64_t>(p.kv_indptr.size()) - 1;
    s.num_page_indices = static_cast<std::int64_t>(p.kv_indices.size());
    if (static_cast<std::int64_t>(p.batch_indices.size()) != s.tokens || static_cast<std::int64_t>(p.positions.size()) != s.tokens)
      return "batch_indices, positions: must hold one entry a token";
    const Json* ps = params->get("page_size");
    const auto page = ps && ps->kind == Json::Kind::number ? integer_of(ps->number, 1, 1 << 20) : std::nullopt;
    if (!page) return "parameters: \"page_size\" must be an integer in 1..2^20";
    s.page_size = static_cast<int>(*page);
    const Json* kl = params->get("kv_layout");
    const std::string layout = kl && kl->kind == Json::Kind::string ? kl->text : std::string("NHD");
    if (layout != "NHD" && layout != "HND") return "parameters: \"kv_layout\" is NHD or HND, got '" + layout + "'";
    s.layout = layout == "HND" ? kernels::KvLayout::hnd : kernels::KvLayout::nhd;
    outputs = {"q_rope_out", "q_nope_out", mla ? "ckv_cache" : "k_cache", mla ? "kpe_cache" : "v_cache"};
  }
  for (int b = 0; b < ports::kRopeBuffers; ++b) {
    const Json* spec = tensors.get(outputs[b]);
    if (!spec) {
      if (b == 1 && nope == 0) continue;  // no nope part: q_nope_out is empty
      if (b == 3 && nope == 0 && !append) continue;
      return "manifest: kind rope-* needs the role \"" + outputs[b] + "\"";
    }
    std::vector<std::int64_t> shape;
    if (auto e = read_cache(files, outputs[b], *spec, &shape, &p.after[b], &p.before[b], &p.before_known[b]); !e.empty()) return e;
    if (append && b == 2 && !shape.empty()) s.num_pages = shape[0];
  }
  if (append && p.after[2].empty()) return "manifest: the cache has no pages";
  return {};
}


// The MLA kinds' "parameters": "layout" (kvq layouts) and "block_size" (tokens a block).
std::string mla_cache_parameters(const Json* params, kernels::MlaCacheShape* shape) {
  const Json* name = params ? params->get("layout") : nullptr;
  const std::string layout = name && name->kind == Json::Kind::string ? name->text : std::string();
  bool found = false;
  std::string names;
  for (const kernels::MlaLayoutId id : kernels::kMlaLayoutIds) {
    names += (names.empty() ? "" : ", ") + std::string(kernels::mla_layout(id).name);
    if (layout == kernels::mla_layout(id).name) shape->layout = id, found = true;
  }
  if (!found) return "parameters: \"layout\" names the cache layout (" + names + "; kvq layouts), got '" + layout + "'";
  const Json* bs = params->get("block_size");
  const auto block = bs && bs->kind == Json::Kind::number ? integer_of(bs->number, 1, 1 << 20) : std::nullopt;
  if (!block) return "parameters: \"block_size\" (tokens a block) must be an integer in 1..2^20";
  shape->block_size = *block;
  return {};
}

// An input cache of whole blocks of layout l (uint8 or FP8 bytes, any shape) and its block count.
std::string read_mla_blocks(const PortFiles& files, const std::string& role, const Json& spec, const kernels::MlaLayout& l,
                            std::int64_t block_size, std::vector<std::uint8_t>* bytes, std::int64_t* num_blocks) {
  Tensor t;
  if (auto e = read_tensor(files, files.inputs, role, spec, &t); !e.empty()) return e;
  if (t.array.descr != "|u1" && t.array.descr != "|i1") return role + ": " + t.path + " holds " + t.array.descr + "; give uint8 (or FP8) bytes";
  *bytes = std::move(t.array.bytes);
  const std::int64_t block_bytes = l.block_bytes(block_size);
  if (bytes->empty() || static_cast<std::int64_t>(bytes->size()) % block_bytes != 0)
    return role + ": " + std::to_string(bytes->size()) + " bytes is not a whole number of " + std::to_string(block_bytes) +
           "-byte blocks (" + l.name + ", block_size " + std::to_string(block_size) + ")";
  *num_blocks = static_cast<std::int64_t>(bytes->size()) / block_bytes;
  return {};
}

// kind "mla-cache" (docs/ports.md "MLA caches"): vLLM's names (k, slot_mapping, k_cache).
std::string load_mla(const PortFiles& files, const Json& m, const Json& tensors, LoadedPort* out) {
  if (auto e = check_roles(tensors, "mla-cache", {"k", "slot_mapping", "k_cache"}); !e.empty()) return e;
  ports::MlaPort& p = out->mla;
  const Json* params = m.get("parameters");
  if (auto e = mla_cache_parameters(params, &p.shape); !e.empty()) return e;
  const kernels::MlaLayout l = p.shape.desc();
  if (l.tile == 0)
    return std::string("parameters: \"layout\" must be a layout the writers quantize (") + kernels::kMlaFp8NopeBlockScaleBf16Rope.name +
           ", " + kernels::kMlaModel1Fp8Sparse.name + "), got " + l.name;
  const Json* rule = params->get("tile_recipe");
  if (rule && rule->kind != Json::Kind::string) return "parameters: \"tile_recipe\" must be a recipe name (kvq recipes)";
  if (auto e = ports::mla_tile_rule(l, rule ? rule->text : std::string(), &p.tile, &p.tile_name); !e.ok())
    return "parameters: \"tile_recipe\": " + e.message();
  if (auto e = kernels::mla_tile_recipe_error(p.shape, p.tile); !e.ok()) return "parameters: \"tile_recipe\": " + e.message();
  Tensor t;
  const Json* k = tensors.get("k");
  if (!k) return "manifest: kind mla-cache needs the role \"k\"";
  if (auto e = read_tensor(files, files.inputs, "k", *k, &t); !e.empty()) return e;
  DType type;
  if (auto e = value_type(t, "k", &type); !e.empty()) return e;
  if (type != DType::bf16) return "k: " + t.path + " must be bfloat16 (the MLA writers take BF16 tokens)";
  if (t.array.shape.empty() || t.array.shape.back() != l.dims())
    return "k: " + t.path + " must be [tokens, " + std::to_string(l.dims()) + "] (the layout's dims)";
  const std::int64_t tokens = t.array.count() / l.dims();
  p.k.resize(static_cast<std::size_t>(t.array.count()));
  std::memcpy(p.k.data(), t.array.bytes.data(), t.array.bytes.size());
  if (const Json* slots = tensors.get("slot_mapping")) {
    if (auto e = read_tensor(files, files.inputs, "slot_mapping", *slots, &t); !e.empty()) return e;
    if (!index_values(t.array, &p.slot_mapping)) return "slot_mapping: " + t.path + " holds " + t.array.descr + "; give int32 or int64";
    if (static_cast<std::int64_t>(p.slot_mapping.size()) != tokens)
      return "slot_mapping: " + std::to_string(p.slot_mapping.size()) + " entries, k " + std::to_string(tokens) + " tokens";
  } else {
    for (std::int64_t i = 0; i < tokens; ++i) p.slot_mapping.push_back(i);  // token i at slot i (records in order)
  }
  const Json* cache = tensors.get("k_cache");
  if (!cache) return "manifest: kind mla-cache needs the role \"k_cache\"";
  std::vector<std::int64_t> shape;
  if (auto e = read_cache(files, "k_cache", *cache, &shape, &p.after, &p.before, &p.before_known); !e.empty()) return e;
  const std::int64_t block_bytes = l.block_bytes(p.shape.block_size);
  if (p.after.empty() || static_cast<std::int64_t>(p.after.size()) % block_bytes != 0)
    return "k_cache: " + std::to_string(p.after.size()) + " bytes is not a whole number of " + std::to_string(block_bytes) +
           "-byte blocks (" + l.name + ", block_size " + std::to_string(p.shape.block_size) + ")";
  p.shape.num_blocks = static_cast<std::int64_t>(p.after.size()) / block_bytes;
  return {};
}

// kind "mla-requant" (docs/ports.md "MLA requantize"): a whole cache converted between kvq's layouts
// (fp8_nope_fp8_rope -> fp8_nope_with_block_scale_bf16_rope): src_cache, dst_cache, k_scale.
std::string load_mla_requant(const PortFiles& files, const Json& m, const Json& tensors, LoadedPort* out) {
  if (auto e = check_roles(tensors, "mla-requant", {"src_cache", "dst_cache", "k_scale"}); !e.empty()) return e;
  ports::MlaPort& p = out->mla;
  p.call = ports::MlaCall::requantize;
  p.shape.layout = kernels::MlaLayoutId::fp8_nope_block_scale_bf16_rope;
  const Json* params = m.get("parameters");
  if (!params || params->kind != Json::Kind::object) return "manifest: kind mla-requant needs \"parameters\"";
  const std::string from = text_of(params->get("from")), to = text_of(params->get("to"));
  if (from != kernels::kMlaFp8NopeFp8Rope.name || to != kernels::kMlaFp8NopeBlockScaleBf16Rope.name)
    return std::string("parameters: \"from\" and \"to\" name the layouts (kvq layouts); kvq converts \"") +
           kernels::kMlaFp8NopeFp8Rope.name + "\" to \"" + kernels::kMlaFp8NopeBlockScaleBf16Rope.name + "\", got '" + from +
           "' to '" + to + "'";
  const Json* bs = params->get("block_size");
  const auto block = bs && bs->kind == Json::Kind::number ? integer_of(bs->number, 1, 1 << 20) : std::nullopt;
  if (!block) return "parameters: \"block_size\" (tokens a block) must be an integer in 1..2^20";
  p.shape.block_size = *block;
  const Json* use_param = params->get("k_scale_use");
  const std::string use = text_of(use_param);
  if (use_param && use.empty())
    return std::string("parameters: \"k_scale_use\" is ") + kernels::name_of(kernels::KScale::fold) + " or " +
           kernels::name_of(kernels::KScale::drop);
  if (use == kernels::name_of(kernels::KScale::drop)) {
    p.k_scale_use = kernels::KScale::drop;
  } else if (!use.empty() && use != kernels::name_of(kernels::KScale::fold)) {
    return std::string("parameters: \"k_scale_use\" is ") + kernels::name_of(kernels::KScale::fold) + " or " +
           kernels::name_of(kernels::KScale::drop) + ", got '" + use + "'";
  }
  const Json* k_scale = tensors.get("k_scale");
  std::vector<float> k;
  if (!k_scale) return "manifest: kind mla-requant needs the role \"k_scale\" (the source cache's decode scale)";
  if (auto e = read_floats(files, files.inputs, "k_scale", *k_scale, 1, &k); !e.empty()) return e;
  p.k_scale = k[0];
  if (auto e = kernels::validate_requantize(1, p.shape.block_size, p.k_scale); !e.ok()) return "k_scale: " + e.message();
  const Json* src = tensors.get("src_cache");
  if (!src) return "manifest: kind mla-requant needs the role \"src_cache\"";
  if (auto e = read_mla_blocks(files, "src_cache", *src, kernels::kMlaFp8NopeFp8Rope, p.shape.block_size, &p.src, &p.shape.num_blocks);
      !e.empty())
    return e;
  const Json* dst = tensors.get("dst_cache");
  if (!dst) return "manifest: kind mla-requant needs the role \"dst_cache\"";
  std::vector<std::int64_t> shape;
  if (auto e = read_cache(files, "dst_cache", *dst, &shape, &p.after, &p.before, &p.before_known); !e.empty()) return e;
  if (static_cast<std::int64_t>(p.after.size()) != p.shape.bytes())
    return "dst_cache: " + std::to_string(p.after.size()) + " bytes; src_cache's " + std::to_string(p.shape.num_blocks) +
           " blocks are " + std::to_string(p.shape.bytes()) + " bytes as " + kernels::kMlaFp8NopeBlockScaleBf16Rope.name;
  return {};
}

// kind "mla-dequant" (docs/ports.md "MLA dequantize"): slots of an MLA cache read back as values:
// k_cache (and k_scale for the layout without tile scales), indices (the slot each output row reads;
// absent: every slot in order) in; output [rows, dims] (BF16, FP16 or FP32) out.
std::string load_mla_dequant(const PortFiles& files, const Json& m, const Json& tensors, LoadedPort* out) {
  if (auto e = check_roles(tensors, "mla-dequant", {"k_cache", "indices", "k_scale", "output"}); !e.empty()) return e;
  ports::MlaPort& p = out->mla;
  p.call = ports::MlaCall::dequantize;
  if (auto e = mla_cache_parameters(m.get("parameters"), &p.shape); !e.empty()) return e;
  const kernels::MlaLayout l = p.shape.desc();
  const Json* cache = tensors.get("k_cache");
  if (!cache) return "manifest: kind mla-dequant needs the role \"k_cache\"";
  if (auto e = read_mla_blocks(files, "k_cache", *cache, l, p.shape.block_size, &p.src, &p.shape.num_blocks); !e.empty()) return e;
  Tensor t;
  if (const Json* k_scale = tensors.get("k_scale")) {
    std::vector<float> k;
    if (auto e = read_floats(files, files.inputs, "k_scale", *k_scale, 1, &k); !e.empty()) return e;
    p.k_scale = k[0];
  } else if (l.tile == 0 && l.segment(kernels::MlaPart::nope).format == FormatId::e4m3fn) {
    return std::string("manifest: kind mla-dequant needs the role \"k_scale\" for ") + l.name + " (its FP8 codes' decode scale)";
  }
  if (auto e = kernels::validate_dequantize(p.shape, p.k_scale); !e.ok()) return "k_scale: " + e.message();
  if (const Json* indices = tensors.get("indices")) {
    if (auto e = read_tensor(files, files.inputs, "indices", *indices, &t); !e.empty()) return e;
    if (!index_values(t.array, &p.slot_mapping)) return "indices: " + t.path + " holds " + t.array.descr + "; give int32 or int64";
    for (std::size_t i = 0; i < p.slot_mapping.size(); ++i)
      if (p.slot_mapping[i] < 0 || p.slot_mapping[i] >= p.shape.slots())
        return "indices: entry " + std::to_string(i) + " is " + std::to_string(p.slot_mapping[i]) + ", not a slot of the cache (0.." +
               std::to_string(p.shape.slots() - 1) + ")";
  } else {
    for (std::int64_t s = 0; s < p.shape.slots(); ++s) p.slot_mapping.push_back(s);
  }
  const Json* output = tensors.get("output");
  if (!output) return "manifest: kind mla-dequant needs the role \"output\"";
  if (auto e = read_tensor(files, files.outputs, "output", *output, &t); !e.empty()) return e;
  if (auto e = value_type(t, "output", &p.output); !e.empty()) return e;
  if (t.array.shape.empty() || t.array.shape.back() != l.dims() || t.array.count() != p.tokens() * l.dims())
    return "output: " + t.path + " must be [" + std::to_string(p.tokens()) + ", " + std::to_string(l.dims()) +
           "] (a row per index, the layout's dims)";
  p.after = std::move(t.array.bytes);
  p.before_known = false;
  return {};
}

// kind "workspace" (docs/ports.md "Workspaces"): kvq's argument names (kernels/mla_kernels.hpp
// nvfp4_paged_to_workspace): kv_cache (the vLLM NVFP4 page, NHD), block_tables, cu_seq_lens,
// k_scale, v_scale (the tensor decode scales g) in; k_workspace, v_workspace out.
constexpr std::int64_t kMaxWorkspaceVisits = std::int64_t{1} << 32;
std::string load_workspace(const PortFiles& files, const Json& m, const Json& tensors, LoadedPort* out) {
  static const std::vector<std::string> kRoles = {"kv_cache", "block_tables", "cu_seq_lens", "k_scale", "v_scale",
                                                   "k_workspace", "v_workspace"};
  if (auto e = check_roles(tensors, "workspace", kRoles); !e.empty()) return e;
  for (const auto& role : kRoles)
    if (!tensors.get(role)) return "manifest: kind workspace needs the role \"" + role + "\"";
  ports::WorkspacePort& p = out->workspace;
  kernels::WorkspaceBatch& w = p.batch;
  w.recipe = recipe_from_name("nvfp4")->recipe;  // the page's decode: E2M1 x E4M3 scale, any NVFP4 recipe alike
  Tensor t;
  if (auto e = read_tensor(files, files.inputs, "kv_cache", *tensors.get("kv_cache"), &t); !e.empty()) return e;
  if (t.array.descr != "|u1" && t.array.descr != "|i1") return "kv_cache: " + t.path + " holds " + t.array.descr + "; give uint8 bytes";
  PageShape page;
  if (auto e = nvfp4_page_shape("kv_cache", t.array.shape, true, &page); !e.empty()) return e;
  kernels::Nvfp4PageGeometry& g = w.pages;
  g = {page.num_blocks, page.block_size, page.heads, page.head_dim};
  p.cache = std::move(t.array.bytes);
  if (auto e = read_tensor(files, files.inputs, "block_tables", *tensors.get("block_tables"), &t); !e.empty()) return e;
  if (t.array.shape.size() != 2 || t.array.shape[1] < 1)
    return "block_tables: " + t.path + " must be [batch, max_blocks_per_seq], max_blocks_per_seq >= 1";
  w.batch = t.array.shape[0];
  w.max_blocks_per_seq = t.array.shape[1];
  if (auto e = read_indices(files, files.inputs, "block_tables", *tensors.get("block_tables"), &p.block_tables); !e.empty()) return e;
  if (auto e = read_indices(files, files.inputs, "cu_seq_lens", *tensors.get("cu_seq_lens"), &p.cu_seq_lens); !e.empty()) return e;
  if (static_cast<std::int64_t>(p.cu_seq_lens.size()) != w.batch + 1)
    return "cu_seq_lens: " + std::to_string(p.cu_seq_lens.size()) + " entries; block_tables' batch " + std::to_string(w.batch) +
           " needs batch + 1";
  w.workspace_tokens = p.cu_seq_lens.back();
  const Json* params = m.get("parameters");
  for (int side = 0; side < 2; ++side) {
    const std::string role = side ? "v_scale" : "k_scale";
    std::vector<float> g_value;
    if (auto e = read_floats(files, files.inputs, role, *tensors.get(role), 1, &g_value); !e.empty()) return e;
    p.factor[side] = g_value[0];
    const std::string ws = side ? "v_workspace_scale" : "k_workspace_scale";
    if (const Json* v = params ? params->get(ws) : nullptr) {
      float scale = 0.0f;
      if (auto e = float_parameter(v, ws, &scale); !e.empty()) return e;
      p.factor[side] = g_value[0] / scale;  // IEEE FP32 (docs/ports.md)
    }
  }
  if (const Json* r = params ? params->get("rounding") : nullptr) {
    if (r->kind != Json::Kind::string || r->text.empty())
      return "parameters: \"rounding\" must be a string: once, or fp32-products, via-bf16, nonsaturating joined by '+'";
    if (auto e = ports::parse_rounding(r->text, &w.rounding); !e.ok()) return "parameters: \"rounding\": " + e.message();
  }
  if (auto e = kernels::validate(w, p.factor[0], p.factor[1]); !e.ok()) return "workspace: " + e.message();
  // The twin visits every 16-element block of every table entry's page side; bounded so that no
  // table and page, each within its file, make a call that runs for hours.
  const auto visits = checked_product({w.batch, w.max_blocks_per_seq, 2, w.page_items()});
  if (!visits || *visits > kMaxWorkspaceVisits)
    return "block_tables: " + std::to_string(w.batch) + " x " + std::to_string(w.max_blocks_per_seq) +
           " entries of pages of " + std::to_string(w.page_items()) + " blocks a side are more than kvq verify visits (2^32)";
  const std::int64_t row = g.heads * g.head_dim;
  for (int side = 0; side < 2; ++side) {
    const std::string role = side ? "v_workspace" : "k_workspace";
    std::vector<std::int64_t> out_shape;
    if (auto e = read_cache(files, role, *tensors.get(role), &out_shape, &p.after[side], &p.before[side], &p.before_known[side]);
        !e.empty())
      return e;
    if (static_cast<std::int64_t>(p.after[side].size()) % row != 0)
      return role + ": " + std::to_string(p.after[side].size()) + " bytes is not whole rows of heads x head_dim = " +
             std::to_string(row) + " bytes";
  }
  return {};
}

}  // namespace

std::string load_port(const PortFiles& files, LoadedPort* out, const Recipe* recipe) {
  std::string path = files.manifest, text;
  if (files.memory) {  // the Python package: the manifest is its arguments, the tensors in memory
    path = "the call's arguments";
    text = files.manifest_text;
  } else {
    if (path.empty()) {
      path = files.outputs + "/manifest.json";
      if (!std::filesystem::exists(path)) path = files.inputs + "/manifest.json";
    }
    if (!std::filesystem::exists(path))
      return "manifest: cannot open " + path + " (give --manifest FILE, or put manifest.json in --outputs)";
    if (auto e = read_text_file(path, 16 << 20, &text); !e.empty()) return "manifest: " + e;
  }
  out->manifest = path;
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
  if (kind == "mla-cache") {
    out->kind = PortKind::mla;
    return load_mla(files, m, *tensors, out);
  }
  if (kind == "mla-requant") {
    out->kind = PortKind::mla;
    return load_mla_requant(files, m, *tensors, out);
  }
  if (kind == "mla-dequant") {
    out->kind = PortKind::mla;
    return load_mla_dequant(files, m, *tensors, out);
  }
  if (kind == "workspace") {
    out->kind = PortKind::workspace;
    return load_workspace(files, m, *tensors, out);
  }
  if (kind == "rope-quantize" || kind == "rope-append") {
    out->kind = PortKind::rope;
    return load_rope(files, m, *tensors, kind == "rope-append", out);
  }
  if (!kind.empty() && kind != "quantize")
    return "manifest: \"kind\" is quantize, paged-store, rope-quantize, rope-append, mla-cache, mla-requant, mla-dequant or workspace, got '" +
           kind + "'";
  if (auto e = check_roles(*tensors, "", {"x", "codes", "block_scales", "global_scale", "dequantized"}); !e.empty()) return e;
  ports::PortData& d = out->data;
  const Json* x = tensors->get("x");
  const Json* codes = tensors->get("codes");
  if (!x || !codes) return "manifest: " + path + " must name the roles \"x\" and \"codes\"";
  Tensor t;
  if (auto e = read_tensor(files, files.inputs, "x", *x, &t); !e.empty()) return e;
  if (auto e = value_type(t, "x", &d.input); !e.empty()) return e;
  if (t.array.shape.empty() || t.array.shape.back() == 0) return "x: " + t.path + " needs a last dimension (head_dim) > 0";
  d.cols = t.array.shape.back();
  d.rows = t.array.count() / d.cols;
  d.x = std::move(t.array.bytes);
  if (auto e = read_tensor(files, files.outputs, "codes", *codes, &t); !e.empty()) return e;
  if (t.array.descr != "|u1" && t.array.descr != "|i1") return "codes: " + t.path + " holds " + t.array.descr + "; give uint8";
  d.codes = std::move(t.array.bytes);
  if (const Json* s = tensors->get("block_scales")) {
    if (auto e = read_tensor(files, files.outputs, "block_scales", *s, &t); !e.empty()) return e;
    std::vector<std::uint8_t> scales;
    if (auto e = bytes_of(t, "block_scales", &scales); !e.empty()) return e;
    d.scales = std::move(scales);
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
      if (auto e = read_tensor(files, gs.is_output ? files.outputs : files.inputs, "global_scale", *s, &t); !e.empty()) return e;
      if (t.array.descr != "<f4" || t.array.count() != 1)
        return "global_scale: " + t.path + " must hold one float32 (or give \"bits\")";
      std::memcpy(&gs.value, t.array.bytes.data(), 4);
    }
    d.global_scale = gs;
  }
  if (const Json* s = tensors->get("dequantized")) {
    if (auto e = read_tensor(files, files.outputs, "dequantized", *s, &t); !e.empty()) return e;
    DType type;
    if (auto e = value_type(t, "dequantized", &type); !e.empty()) return e;
    d.dequantized = std::move(t.array.bytes);  // little-endian values of `type` (value_type read the descr)
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
