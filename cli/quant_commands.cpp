// kvq quant / kvq dequant: tensors in and out as NumPy .npy files, on the CPU twin or the GPU.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/npy.hpp"
#include "formats/names.hpp"
#include "formats/recipe_names.hpp"
#include "kernels/quantize.hpp"

namespace kvq::cli {
namespace {

using kernels::DType;

struct Options {
  std::string recipe, in, out, dtype, device = "auto";
  int block = 0;
};

std::string parse_options(const Args& args, Options* o) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool value = i + 1 < args.size();
    if (a == "--in" && value) {
      o->in = args[++i];
    } else if (a == "--out" && value) {
      o->out = args[++i];
    } else if (a == "--dtype" && value) {
      o->dtype = args[++i];
    } else if (a == "--device" && value) {
      o->device = args[++i];
    } else if (a == "--block" && value) {
      o->block = std::atoi(args[++i].c_str());
      if (o->block <= 0) return "--block must be a positive number, got '" + args[i] + "'";
    } else if (o->recipe.empty() && !a.starts_with("--")) {
      o->recipe = a;
    } else {
      return std::string("unexpected argument '") + a + "'";
    }
  }
  if (o->recipe.empty() || o->in.empty() || o->out.empty()) return std::string("needs RECIPE --in and --out");
  if (o->device != "auto" && o->device != "cpu" && o->device != "cuda")
    return "--device is auto, cpu or cuda, got '" + o->device + "'";
  return {};
}

std::optional<DType> dtype_from(const std::string& name) {
  if (name == "fp32") return DType::fp32;
  if (name == "bf16") return DType::bf16;
  if (name == "fp16") return DType::fp16;
  return std::nullopt;
}

bool use_gpu(const std::string& device, std::string* error) {
  std::string why;
  const bool available = kernels::device::available(&why);
  if (device == "cuda" && !available) *error = "--device cuda: " + why;
  return device != "cpu" && available;
}

// Runs fn(device pointers...) on the GPU: uploads inputs, downloads outputs.
struct DeviceBuffer {
  void* p = nullptr;
  std::string error;
  explicit DeviceBuffer(std::size_t bytes) { error = kernels::device::allocate(&p, bytes); }
  ~DeviceBuffer() { kernels::device::release(p); }
};

std::string meta_value(const std::string& json, const std::string& key) {
  const auto k = json.find("\"" + key + "\":");
  if (k == std::string::npos) return {};
  auto p = k + key.size() + 3;
  while (p < json.size() && json[p] == ' ') ++p;
  std::string v;
  if (json[p] == '"') {
    for (++p; p < json.size() && json[p] != '"'; ++p) v += json[p];
  } else {
    for (; p < json.size() && json[p] != ',' && json[p] != '\n' && json[p] != '}'; ++p) v += json[p];
  }
  return v;
}

}  // namespace

int quant_command(const Args& args, std::ostream& out, std::ostream& err) {
  Options o;
  if (auto e = parse_options(args, &o); !e.empty()) {
    err << "kvq quant: " << e << "\nusage: kvq quant RECIPE --in X.npy --out DIR [--dtype bf16|fp16] [--block N]"
        << " [--device auto|cpu|cuda]\n";
    return 2;
  }
  const auto named = recipe_from_name(o.recipe);
  if (!named) {
    err << "kvq quant: unknown recipe '" << o.recipe << "' (kvq recipes lists them)\n";
    return 2;
  }
  NpyArray x;
  if (auto e = read_npy(o.in, &x); !e.empty()) {
    err << "kvq quant: --in: " << e << "\n";
    return 2;
  }
  DType input = DType::fp32;
  if (x.descr == "<u2") {
    input = o.dtype == "fp16" ? DType::fp16 : DType::bf16;
  } else if (x.descr != "<f4") {
    err << "kvq quant: --in " << o.in << " holds " << x.descr << "; give float32, or uint16 BF16/FP16 bits\n";
    return 2;
  }
  if (x.shape.empty()) {
    err << "kvq quant: --in " << o.in << " is a scalar; give at least one dimension (head_dim last)\n";
    return 2;
  }
  kernels::QuantizeShape s;
  s.recipe = named->recipe;
  if (o.block) s.recipe.block = o.block;
  s.cols = x.shape.back();
  s.rows = x.shape.back() ? x.count() / s.cols : 0;
  if (auto e = kernels::validate(s); !e.empty()) {
    err << "kvq quant: --in " << o.in << ": " << e << "\n";
    return 2;
  }
  std::string error;
  const bool gpu = use_gpu(o.device, &error);
  if (!error.empty()) {
    err << "kvq quant: " << error << "\n";
    return 2;
  }
  NpyArray codes{"|u1", {s.rows, s.code_bytes_per_row()}, std::vector<std::uint8_t>(s.code_bytes())};
  NpyArray scales{"|u1", {s.rows, s.scales_per_row()}, std::vector<std::uint8_t>(s.scale_bytes())};
  float amax = 0, g = 0;
  if (!gpu) {
    amax = kernels::amax_cpu(input, x.bytes.data(), x.count());
    g = tensor_scale(s.recipe, amax);
    error = kernels::quantize_cpu(s, input, x.bytes.data(), g, codes.bytes.data(), scales.bytes.data());
  } else {
    DeviceBuffer dx(x.bytes.size()), dc(codes.bytes.size()), ds(scales.bytes.size()), dm(sizeof(float));
    error = dx.error + dc.error + ds.error + dm.error;
    if (error.empty()) error = kernels::device::upload(dx.p, x.bytes.data(), x.bytes.size());
    if (error.empty()) error = kernels::device::amax(input, dx.p, x.count(), static_cast<float*>(dm.p), nullptr);
    if (error.empty()) error = kernels::device::download(&amax, dm.p, sizeof amax);
    g = tensor_scale(s.recipe, amax);
    if (error.empty())
      error = kernels::device::quantize(s, input, dx.p, g, static_cast<std::uint8_t*>(dc.p),
                                        static_cast<std::uint8_t*>(ds.p), nullptr);
    if (error.empty()) error = kernels::device::download(codes.bytes.data(), dc.p, codes.bytes.size());
    if (error.empty()) error = kernels::device::download(scales.bytes.data(), ds.p, scales.bytes.size());
  }
  if (!error.empty()) {
    err << "kvq quant: " << error << "\n";
    return 1;
  }
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) {
    err << "kvq quant: --out: cannot create " << o.out << ": " << ec.message() << "\n";
    return 2;
  }
  error = write_npy(o.out + "/codes.npy", codes);
  if (error.empty() && s.scales_per_row()) error = write_npy(o.out + "/scales.npy", scales);
  char g_bits[16], g_text[64];
  std::snprintf(g_bits, sizeof g_bits, "0x%08x", bits_of(g));
  std::snprintf(g_text, sizeof g_text, "%.9g", static_cast<double>(g));
  std::ofstream meta(o.out + "/quant.json");
  meta << "{\n  \"recipe\": \"" << named->name << "\",\n  \"element\": \"" << name_of(s.recipe.element)
       << "\",\n  \"block\": " << s.block() << ",\n  \"rows\": " << s.rows << ",\n  \"cols\": " << s.cols
       << ",\n  \"input_dtype\": \"" << kernels::name_of(input) << "\",\n  \"tensor_scale_bits\": \"" << g_bits
       << "\",\n  \"tensor_scale\": " << g_text << ",\n  \"scales\": \"" << named->scales
       << "\",\n  \"packing\": \"" << (s.packed() ? "two E2M1 per byte, element 2i in the low nibble" : "one byte each")
       << "\",\n  \"device\": \"" << (gpu ? "cuda" : "cpu") << "\"\n}\n";
  if (!error.empty() || !meta) {
    err << "kvq quant: " << (error.empty() ? "cannot write " + o.out + "/quant.json" : error) << "\n";
    return 2;
  }
  out << named->name << ": " << s.rows << "x" << s.cols << " " << kernels::name_of(input) << " -> " << o.out
      << "/codes.npy (" << s.rows << "x" << s.code_bytes_per_row() << ")"
      << (s.scales_per_row() ? ", scales.npy (" + std::to_string(s.rows) + "x" + std::to_string(s.scales_per_row()) + ")" : "")
      << (s.recipe.scale == BlockScale::e8m0_pow2 ? std::string()
                                                  : std::string(", tensor scale ") + g_text + " (" + g_bits + ")")
      << ", on " << (gpu ? "cuda" : "cpu") << "\n";
  return 0;
}

int dequant_command(const Args& args, std::ostream& out, std::ostream& err) {
  Options o;
  if (auto e = parse_options(args, &o); !e.empty()) {
    err << "kvq dequant: " << e << "\nusage: kvq dequant RECIPE --in DIR --out Y.npy [--dtype fp32|bf16|fp16]"
        << " [--device auto|cpu|cuda]\n";
    return 2;
  }
  const auto named = recipe_from_name(o.recipe);
  if (!named) {
    err << "kvq dequant: unknown recipe '" << o.recipe << "' (kvq recipes lists them)\n";
    return 2;
  }
  const auto output = dtype_from(o.dtype.empty() ? "fp32" : o.dtype);
  if (!output) {
    err << "kvq dequant: --dtype is fp32, bf16 or fp16, got '" << o.dtype << "'\n";
    return 2;
  }
  std::ifstream meta_file(o.in + "/quant.json");
  std::stringstream meta;
  meta << meta_file.rdbuf();
  if (!meta_file) {
    err << "kvq dequant: --in: no " << o.in << "/quant.json (write it with kvq quant)\n";
    return 2;
  }
  const std::string json = meta.str();
  if (meta_value(json, "recipe") != named->name) {
    err << "kvq dequant: --in " << o.in << " holds recipe '" << meta_value(json, "recipe") << "', not '" << named->name
        << "'\n";
    return 2;
  }
  kernels::QuantizeShape s;
  s.recipe = named->recipe;
  if (named->recipe.scale != BlockScale::tensor_only) s.recipe.block = std::atoi(meta_value(json, "block").c_str());
  s.rows = std::atoll(meta_value(json, "rows").c_str());
  s.cols = std::atoll(meta_value(json, "cols").c_str());
  const float g = float_from_bits(static_cast<std::uint32_t>(std::strtoul(meta_value(json, "tensor_scale_bits").c_str(), nullptr, 16)));
  if (auto e = kernels::validate(s); !e.empty()) {
    err << "kvq dequant: " << o.in << "/quant.json: " << e << "\n";
    return 2;
  }
  NpyArray codes, scales;
  if (auto e = read_npy(o.in + "/codes.npy", &codes); !e.empty()) {
    err << "kvq dequant: " << e << "\n";
    return 2;
  }
  if (codes.descr != "|u1" || codes.count() != s.code_bytes()) {
    err << "kvq dequant: " << o.in << "/codes.npy: expected " << s.code_bytes() << " uint8 codes\n";
    return 2;
  }
  if (s.scales_per_row()) {
    if (auto e = read_npy(o.in + "/scales.npy", &scales); !e.empty()) {
      err << "kvq dequant: " << e << "\n";
      return 2;
    }
    if (scales.descr != "|u1" || scales.count() != s.scale_bytes()) {
      err << "kvq dequant: " << o.in << "/scales.npy: expected " << s.scale_bytes() << " uint8 scales\n";
      return 2;
    }
  }
  std::string error;
  const bool gpu = use_gpu(o.device, &error);
  if (!error.empty()) {
    err << "kvq dequant: " << error << "\n";
    return 2;
  }
  NpyArray y{*output == DType::fp32 ? "<f4" : "<u2", {s.rows, s.cols},
             std::vector<std::uint8_t>(static_cast<std::size_t>(s.rows * s.cols * kernels::bytes_of(*output)))};
  if (!gpu) {
    error = kernels::dequantize_cpu(s, codes.bytes.data(), scales.bytes.data(), g, *output, y.bytes.data());
  } else {
    DeviceBuffer dc(codes.bytes.size()), ds(scales.bytes.size()), dy(y.bytes.size());
    error = dc.error + ds.error + dy.error;
    if (error.empty()) error = kernels::device::upload(dc.p, codes.bytes.data(), codes.bytes.size());
    if (error.empty()) error = kernels::device::upload(ds.p, scales.bytes.data(), scales.bytes.size());
    if (error.empty())
      error = kernels::device::dequantize(s, static_cast<std::uint8_t*>(dc.p), static_cast<std::uint8_t*>(ds.p), g,
                                          *output, dy.p, nullptr);
    if (error.empty()) error = kernels::device::download(y.bytes.data(), dy.p, y.bytes.size());
  }
  if (error.empty()) error = write_npy(o.out, y);
  if (!error.empty()) {
    err << "kvq dequant: " << error << "\n";
    return 1;
  }
  out << named->name << ": " << o.in << " -> " << o.out << " (" << s.rows << "x" << s.cols << " "
      << kernels::name_of(*output) << "), on " << (gpu ? "cuda" : "cpu") << "\n";
  return 0;
}

}  // namespace kvq::cli
