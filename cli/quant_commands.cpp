// kvq quant / kvq dequant: tensors in and out as NumPy .npy files, on the CPU twin or the GPU.
#include <cstdio>
#include <optional>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/npy.hpp"
#include "cli/output_files.hpp"
#include "cli/quant_json.hpp"
#include "cli/untrusted.hpp"
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
      if (auto e = integer_option("--block", args[++i], 1, kMaxRecipeBlock, &o->block); !e.empty()) return e;
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
  explicit DeviceBuffer(std::size_t bytes) { error = kernels::device::allocate(&p, bytes).message(); }
  ~DeviceBuffer() { kernels::device::release(p); }
};

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
    if (o.dtype != "" && o.dtype != "bf16" && o.dtype != "fp16") {
      err << "kvq quant: --dtype of uint16 bits is bf16 or fp16, got '" << o.dtype << "'\n";
      return 2;
    }
    input = o.dtype == "fp16" ? DType::fp16 : DType::bf16;
  } else if (x.descr == "<f4") {
    if (o.dtype != "" && o.dtype != "fp32") {
      err << "kvq quant: --in " << o.in << " holds float32; --dtype names the type of uint16 bits, got '" << o.dtype
          << "'\n";
      return 2;
    }
  } else {
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
  if (auto e = kernels::validate(s); !e.ok()) {
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
    error = kernels::quantize_cpu(s, input, x.bytes.data(), g, codes.bytes.data(), scales.bytes.data()).message();
  } else {
    DeviceBuffer dx(x.bytes.size()), dc(codes.bytes.size()), ds(scales.bytes.size()), dm(sizeof(float));
    error = dx.error + dc.error + ds.error + dm.error;
    if (error.empty()) error = kernels::device::upload(dx.p, x.bytes.data(), x.bytes.size()).message();
    if (error.empty()) error = kernels::device::amax(input, dx.p, x.count(), static_cast<float*>(dm.p), nullptr).message();
    if (error.empty()) error = kernels::device::download(&amax, dm.p, sizeof amax).message();
    g = tensor_scale(s.recipe, amax);
    if (error.empty())
      error = kernels::device::quantize(s, input, dx.p, g, static_cast<std::uint8_t*>(dc.p),
                                        static_cast<std::uint8_t*>(ds.p), nullptr).message();
    if (error.empty()) error = kernels::device::download(codes.bytes.data(), dc.p, codes.bytes.size()).message();
    if (error.empty()) error = kernels::device::download(scales.bytes.data(), ds.p, scales.bytes.size()).message();
  }
  if (!error.empty()) {
    err << "kvq quant: " << error << "\n";
    return 1;
  }
  OutputFiles files;  // codes.npy, scales.npy and quant.json all, or none
  error = files.folder(o.out);
  if (error.empty()) error = write_npy(files.stage(o.out + "/codes.npy"), codes);
  if (error.empty() && s.scales_per_row()) error = write_npy(files.stage(o.out + "/scales.npy"), scales);
  char g_bits[16], g_text[64];
  std::snprintf(g_bits, sizeof g_bits, "0x%08x", bits_of(g));
  std::snprintf(g_text, sizeof g_text, "%.9g", static_cast<double>(g));
  std::ostringstream meta;
  meta << "{\n  \"recipe\": \"" << named->name << "\",\n  \"element\": \"" << name_of(s.recipe.element)
       << "\",\n  \"block\": " << s.block() << ",\n  \"rows\": " << s.rows << ",\n  \"cols\": " << s.cols
       << ",\n  \"input_dtype\": \"" << kernels::name_of(input) << "\",\n  \"tensor_scale_bits\": \"" << g_bits
       << "\",\n  \"tensor_scale\": " << json_float(g) << ",\n  \"scales\": \"" << named->scales
       << "\",\n  \"packing\": \"" << (s.packed() ? "two E2M1 per byte, element 2i in the low nibble" : "one byte each")
       << "\",\n  \"device\": \"" << (gpu ? "cuda" : "cpu") << "\"\n}\n";
  if (error.empty()) error = write_file(files.stage(o.out + "/quant.json"), meta.str());
  if (error.empty()) error = files.commit();
  if (!error.empty()) {
    err << "kvq quant: --out: " << error << "\n";
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
  const std::string meta_path = o.in + "/quant.json";
  if (!std::filesystem::exists(meta_path)) {
    err << "kvq dequant: --in: no " << meta_path << " (write it with kvq quant)\n";
    return 2;
  }
  std::string meta;
  if (auto e = read_text_file(meta_path, 1 << 20, &meta); !e.empty()) {
    err << "kvq dequant: --in: " << e << "\n";
    return 2;
  }
  QuantJson q;
  if (auto e = read_quant_json(meta, meta_path, &q); !e.empty()) {
    err << "kvq dequant: " << e << "\n";
    return 2;
  }
  if (q.recipe != named->name) {
    err << "kvq dequant: --in " << o.in << " holds recipe '" << q.recipe << "', not '" << named->name << "'\n";
    return 2;
  }
  kernels::QuantizeShape s;
  s.recipe = named->recipe;
  s.rows = q.rows;
  s.cols = q.cols;
  if (named->recipe.scale != BlockScale::tensor_only) s.recipe.block = q.block;
  const float g = float_from_bits(q.tensor_scale_bits);
  if (auto e = kernels::validate(s); !e.ok()) {
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
    error = kernels::dequantize_cpu(s, codes.bytes.data(), scales.bytes.data(), g, *output, y.bytes.data()).message();
  } else {
    DeviceBuffer dc(codes.bytes.size()), ds(scales.bytes.size()), dy(y.bytes.size());
    error = dc.error + ds.error + dy.error;
    if (error.empty()) error = kernels::device::upload(dc.p, codes.bytes.data(), codes.bytes.size()).message();
    if (error.empty()) error = kernels::device::upload(ds.p, scales.bytes.data(), scales.bytes.size()).message();
    if (error.empty())
      error = kernels::device::dequantize(s, static_cast<std::uint8_t*>(dc.p), static_cast<std::uint8_t*>(ds.p), g,
                                          *output, dy.p, nullptr).message();
    if (error.empty()) error = kernels::device::download(y.bytes.data(), dy.p, y.bytes.size()).message();
  }
  if (!error.empty()) {
    err << "kvq dequant: " << error << "\n";
    return 1;
  }
  OutputFiles files;
  error = write_npy(files.stage(o.out), y);
  if (error.empty()) error = files.commit();
  if (!error.empty()) {
    err << "kvq dequant: --out: " << error << "\n";
    return 2;
  }
  out << named->name << ": " << o.in << " -> " << o.out << " (" << s.rows << "x" << s.cols << " "
      << kernels::name_of(*output) << "), on " << (gpu ? "cuda" : "cpu") << "\n";
  return 0;
}

}  // namespace kvq::cli
