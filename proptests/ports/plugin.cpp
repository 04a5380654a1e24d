#include "proptests/ports/plugin.hpp"

#include <dlfcn.h>

#include <vector>

#include "formats/recipe_names.hpp"
#include "kernels/device_copy.hpp"
#include "proptests/ports/kvq_port.h"

namespace kvq::ports {
namespace {

using Version = int (*)();
using Name = const char* (*)();
using Quantize = int (*)(const void*, int, std::int64_t, std::int64_t, int, float, std::uint8_t*, std::uint8_t*, void*);
using Dequantize = int (*)(const std::uint8_t*, const std::uint8_t*, std::int64_t, std::int64_t, int, float, int, void*, void*);
using Requantize = int (*)(const std::uint8_t*, const std::uint8_t*, std::int64_t, std::int64_t, int, float, std::uint8_t*, void*);

int dtype_code(kernels::DType t) {
  return t == kernels::DType::fp32 ? KVQ_PORT_FP32 : (t == kernels::DType::bf16 ? KVQ_PORT_BF16 : KVQ_PORT_FP16);
}

std::string call_error(const char* entry, int status, Name last_error) {
  if (status == 0) return {};
  const char* why = last_error ? last_error() : nullptr;
  return std::string(entry) + " returned " + std::to_string(status) + (why && *why ? std::string(": ") + why : "");
}

}  // namespace

std::string load_plugin(const std::string& path, Plugin* out) {
  void* raw = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!raw) return std::string("--plugin: cannot load ") + path + ": " + dlerror();
  out->handle = std::shared_ptr<void>(raw, [](void* h) { dlclose(h); });
  auto symbol = [&](const char* name) { return dlsym(raw, name); };
  const auto version = reinterpret_cast<Version>(symbol("kvq_port_abi_version"));
  const auto recipe = reinterpret_cast<Name>(symbol("kvq_port_recipe"));
  const auto memory = reinterpret_cast<Version>(symbol("kvq_port_memory"));
  const auto quantize = reinterpret_cast<Quantize>(symbol("kvq_port_quantize"));
  const auto dequantize = reinterpret_cast<Dequantize>(symbol("kvq_port_dequantize"));
  const auto requantize = reinterpret_cast<Requantize>(symbol("kvq_port_requantize_e4m3"));
  const auto last_error = reinterpret_cast<Name>(symbol("kvq_port_last_error"));
  for (const auto& [name, present] : {std::pair<const char*, bool>{"kvq_port_abi_version", version != nullptr},
                                      {"kvq_port_recipe", recipe != nullptr},
                                      {"kvq_port_memory", memory != nullptr},
                                      {"kvq_port_quantize", quantize != nullptr}})
    if (!present) return path + ": does not export " + name + " (proptests/ports/kvq_port.h)";
  if (version() != KVQ_PORT_ABI_VERSION)
    return path + ": kvq_port_abi_version() = " + std::to_string(version()) + ", this kvq speaks " +
           std::to_string(KVQ_PORT_ABI_VERSION);
  const char* recipe_name = recipe();
  const auto named = recipe_from_name(recipe_name ? recipe_name : "");
  if (!named) return path + ": kvq_port_recipe() = '" + std::string(recipe_name ? recipe_name : "(null)") + "' is no kvq recipe";
  const int kind = memory();
  if (kind != KVQ_PORT_HOST && kind != KVQ_PORT_DEVICE)
    return path + ": kvq_port_memory() = " + std::to_string(kind) + ", expected KVQ_PORT_HOST (0) or KVQ_PORT_DEVICE (1)";
  out->device = kind == KVQ_PORT_DEVICE;
  PortKernel& k = out->kernel;
  k = PortKernel{path + " (" + std::string(named->name) + ")", named->recipe, {}, {}, {}};
  const bool device = out->device;
  const auto handle = out->handle;  // the wrappers keep the library loaded
  k.quantize = [=](const QuantizeShape& s, kernels::DType t, const void* x, float g, std::uint8_t* codes,
                   std::uint8_t* scales) -> Status {
    (void)handle;
    if (!device)
      return call_error("kvq_port_quantize", quantize(x, dtype_code(t), s.rows, s.cols, s.block(), g, codes, scales, nullptr), last_error);
    const kernels::DeviceCopy dx(x, static_cast<std::size_t>(s.rows * s.cols * kernels::bytes_of(t)), false);
    const kernels::DeviceCopy dc(nullptr, static_cast<std::size_t>(s.code_bytes()), true);
    const kernels::DeviceCopy ds(nullptr, static_cast<std::size_t>(s.scale_bytes()), true);
    Status e = first_error({dx.error, dc.error, ds.error});
    if (e.ok())
      e = call_error("kvq_port_quantize",
                     quantize(dx.p, dtype_code(t), s.rows, s.cols, s.block(), g, dc.bytes_ptr(), ds.bytes_ptr(), nullptr), last_error);
    if (e.ok()) e = kernels::device::synchronize();
    if (e.ok()) e = dc.fetch(codes, "codes");
    if (e.ok()) e = ds.fetch(scales, "scales");
    return e;
  };
  if (dequantize)
    k.dequantize = [=](const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                       kernels::DType t, void* y) -> Status {
      (void)handle;
      if (!device)
        return call_error("kvq_port_dequantize", dequantize(codes, scales, s.rows, s.cols, s.block(), g, dtype_code(t), y, nullptr), last_error);
      const kernels::DeviceCopy dc(codes, static_cast<std::size_t>(s.code_bytes()), false);
      const kernels::DeviceCopy ds(scales, static_cast<std::size_t>(s.scale_bytes()), false);
      const kernels::DeviceCopy dy(nullptr, static_cast<std::size_t>(s.rows * s.cols * kernels::bytes_of(t)), true);
      Status e = first_error({dc.error, ds.error, dy.error});
      if (e.ok())
        e = call_error("kvq_port_dequantize",
                       dequantize(dc.bytes_ptr(), ds.bytes_ptr(), s.rows, s.cols, s.block(), g, dtype_code(t), dy.p, nullptr), last_error);
      if (e.ok()) e = kernels::device::synchronize();
      if (e.ok()) e = dy.fetch(y, "dequantized output");
      return e;
    };
  if (requantize)
    k.requantize_e4m3 = [=](const QuantizeShape& s, const std::uint8_t* codes, const std::uint8_t* scales, float factor,
                            std::uint8_t* o) -> Status {
      (void)handle;
      if (!device)
        return call_error("kvq_port_requantize_e4m3", requantize(codes, scales, s.rows, s.cols, s.block(), factor, o, nullptr), last_error);
      const kernels::DeviceCopy dc(codes, static_cast<std::size_t>(s.code_bytes()), false);
      const kernels::DeviceCopy ds(scales, static_cast<std::size_t>(s.scale_bytes()), false);
      const kernels::DeviceCopy dout(nullptr, static_cast<std::size_t>(s.rows * s.cols), true);
      Status e = first_error({dc.error, ds.error, dout.error});
      if (e.ok())
        e = call_error("kvq_port_requantize_e4m3",
                       requantize(dc.bytes_ptr(), ds.bytes_ptr(), s.rows, s.cols, s.block(), factor, dout.bytes_ptr(), nullptr), last_error);
      if (e.ok()) e = kernels::device::synchronize();
      if (e.ok()) e = dout.fetch(o, "workspace");
      return e;
    };
  return {};
}

}  // namespace kvq::ports
