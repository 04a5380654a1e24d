#include "proptests/ports/mutants.hpp"

#include "formats/recipe_names.hpp"
#include "kernels/device_copy.hpp"

namespace kvq::ports {
namespace {

Recipe named(std::string_view name) { return recipe_from_name(name)->recipe; }

template <typename Change>
Mutant mutant(std::string_view name, std::string_view bug_class, std::string_view base, Change change) {
  Mutant m{name, bug_class, base, named(base), named(base), {}};
  change(m);
  return m;
}

std::vector<Mutant> build() {
  std::vector<Mutant> all;
  all.push_back(mutant("nvfp4-ties-up", "ties rounded up instead of to even", "nvfp4",
                       [](Mutant& m) { m.quantize_recipe.element_rounding = Rounding::nearest_away; }));
  all.push_back(mutant("nvfp4-double-rounding-bf16", "double rounding through bf16", "nvfp4",
                       [](Mutant& m) { m.quantize_recipe.element_input_bf16 = true; }));
  all.push_back(mutant("nvfp4-workspace-through-fp32", "double rounding through float (from the exact product)", "nvfp4",
                       [](Mutant& m) { m.bugs.workspace.fp32_products = true; }));
  all.push_back(mutant("nvfp4-workspace-sglang-rounding",
                       "workspace rounded three times: FP32 products, BF16, a non-saturating cast (SGLang's)", "nvfp4",
                       [](Mutant& m) { m.bugs.workspace = {true, true, false}; }));
  all.push_back(mutant("nvfp4-reciprocal-for-divide", "reciprocal-multiply vs divide changing codes", "nvfp4",
                       [](Mutant& m) { m.quantize_recipe.apply = Apply::multiply_reciprocal; }));
  all.push_back(mutant("fp8-tensor-reciprocal-for-divide", "reciprocal-multiply vs divide changing codes",
                       "fp8-e4m3-tensor", [](Mutant& m) { m.quantize_recipe.apply = Apply::multiply_reciprocal; }));
  all.push_back(mutant("mxfp4-ceil-for-floor", "E8M0 scale off by one (floor vs ceil)", "mxfp4-floor",
                       [](Mutant& m) { m.quantize_recipe.pow2 = Pow2Rule::ceil; }));
  all.push_back(mutant("mxfp4-bias-125", "E8M0 scale off by one (bias 125 vs 127)", "mxfp4-floor",
                       [](Mutant& m) { m.quantize_recipe.e8m0_bias = 125; }));
  all.push_back(mutant("nvfp4-zero-block-unguarded", "all-zero block giving inf/NaN scales or codes", "nvfp4",
                       [](Mutant& m) { m.quantize_recipe.zero_guard = ZeroGuard::none; }));
  all.push_back(mutant("nvfp4-zero-tensor-nan-scale", "inf global scale / NaN scale 0x7F from an all-zero tensor",
                       "nvfp4", [](Mutant& m) { m.quantize_recipe.zero_guard = ZeroGuard::rounded_scale; }));
  all.push_back(mutant("nvfp4-factor-6", "factor-6 global-scale mismatch between kernels", "nvfp4",
                       [](Mutant& m) { m.bugs.dequantize_g_factor = 6.0f; }));
  all.push_back(mutant("nvfp4-nibble-swap", "nibble order swapped", "nvfp4", [](Mutant& m) { m.bugs.swap_nibbles = true; }));
  all.push_back(mutant("nvfp4-decode-ignores-block-scale", "decode path ignoring block scales", "nvfp4",
                       [](Mutant& m) { m.bugs.decode = DecodeBug::ignores_block_scale; }));
  all.push_back(mutant("nvfp4-nan-scale-decoded-as-480", "NaN decoded as +-480", "nvfp4",
                       [](Mutant& m) { m.bugs.decode = DecodeBug::nan_as_number; }));
  all.push_back(mutant("fp8-tensor-nan-decoded-as-480", "NaN decoded as +-480", "fp8-e4m3-tensor",
                       [](Mutant& m) { m.bugs.decode = DecodeBug::nan_as_number; }));
  // Engine arithmetic (docs/recipes.md "Engine arithmetic"): each dimension a port can get wrong.
  all.push_back(mutant("fp8-tensor-triton-division", "Triton's approximate `/` (div.full.f32) for an IEEE division",
                       "fp8-e4m3-tensor", [](Mutant& m) { m.quantize_recipe.division = Division::full_approx; }));
  all.push_back(mutant("nvfp4-triton-division", "Triton's approximate `/` (div.full.f32) for an IEEE division", "nvfp4",
                       [](Mutant& m) { m.quantize_recipe.division = Division::full_approx; }));
  all.push_back(mutant("fp8-tensor-nonsaturating-cast", "overflow to NaN (PyTorch eager cast) instead of saturating",
                       "fp8-e4m3-tensor", [](Mutant& m) { m.quantize_recipe.element_cast = ElementCast::nonsaturating; }));
  all.push_back(mutant("nvfp4-4over6-decode-form", "4-over-6 in the paper's decode form, not the package's arithmetic",
                       "nvfp4-4over6", [](Mutant& m) { m.quantize_recipe = named("nvfp4-4over6-paper"); }));
  all.push_back(mutant("nvfp4-torchao-ieee-division-by-6", "bmax / 6 divided in IEEE where PyTorch multiplies by RN(1/6)",
                       "nvfp4-torchao", [](Mutant& m) { m.quantize_recipe.division = Division::ieee; }));
  all.push_back(mutant("nvfp4-modelopt-ratio-then-tensor", "the scale as (bmax/6)/g where ModelOpt divides by 6*g",
                       "nvfp4-modelopt", [](Mutant& m) { m.quantize_recipe.scale_form = ScaleForm::ratio_then_tensor; }));
  all.push_back(mutant("nvfp4-modelopt-signed-zero", "-0 kept as 0x8 where the port writes +0", "nvfp4-modelopt",
                       [](Mutant& m) { m.quantize_recipe.element_cast = ElementCast::satfinite; }));
  all.push_back(mutant("nvfp4-compressed-tensors-zero-scale", "a zero block scale stored as 0 where the port stores 0.125",
                       "nvfp4-compressed-tensors", [](Mutant& m) { m.quantize_recipe.zero_scale = 0.0f; }));
  all.push_back(mutant("blockfp4-exponent-from-bits", "E8M0 exponent from the bits where the port takes ceil of the FP32 log2",
                       "blockfp4-e8m0-ceil", [](Mutant& m) { m.quantize_recipe.exponent_by_log2 = false; }));
  all.push_back(mutant("mla-model1-floor-on-ratio", "the 1e-4 floor on bmax/448 where the port floors bmax",
                       "mla-model1-tile64", [](Mutant& m) { m.quantize_recipe.ratio_floor_on_bmax = false; }));
  all.push_back(mutant("mxfp8-min-normal-divisor", "elements divided by max(2^e, 2^-126) (torchao) at scale byte 0",
                       "mxfp8-e4m3-floor", [](Mutant& m) { m.quantize_recipe.pow2_min_normal_divisor = true; }));
  all.push_back(mutant("nvfp4-4over6-saturating-elements", "signed zero kept and E2M1 saturated where the package writes +0 and 8",
                       "nvfp4-4over6", [](Mutant& m) { m.quantize_recipe.element_cast = ElementCast::satfinite; }));
  all.push_back(mutant("mxfp4-modelopt-ties-to-even", "E2M1 ties to even where the port rounds them toward zero",
                       "mxfp4-modelopt", [](Mutant& m) { m.quantize_recipe.element_rounding = Rounding::nearest_even; }));
  all.push_back(mutant("mxfp4-modelopt-signed-zero", "+0 written as 0x0 where the port writes every zero as 0x8",
                       "mxfp4-modelopt", [](Mutant& m) { m.quantize_recipe.element_cast = ElementCast::satfinite; }));
  all.push_back(mutant("mla-model1-nan-unclamped", "a NaN element written 0x7F where the port's tl.clamp gives +448 (0x7E)",
                       "mla-model1-tile64", [](Mutant& m) { m.quantize_recipe.element_cast = ElementCast::satfinite; }));
  all.push_back(mutant("mla-model1-inf-tile-as-mx", "an infinite tile's elements NaN where the port scales them by 2^-inf",
                       "mla-model1-tile64", [](Mutant& m) { m.quantize_recipe.float_exponent = false; }));
  all.push_back(mutant("fp8-tensor-rcp-triton-zero-scale-guarded", "an all-zero tile zeroed where the port computes 0 * (1/0)",
                       "fp8-e4m3-tensor-rcp-triton", [](Mutant& m) { m.quantize_recipe.zero_guard = ZeroGuard::block_and_scale; }));
  all.push_back(mutant("nvfp4-compressed-tensors-ratio-by-reciprocal",
                       "bmax / 6 as bmax * RN(1/6) where the port divides by a tensor (IEEE)", "nvfp4-compressed-tensors",
                       [](Mutant& m) { m.quantize_recipe.division = Division::constant_reciprocal; }));
  all.push_back(mutant("nvfp4-torchao-nan-as-six", "a NaN element written +6 (0x7) where torchao's bit cast gives 0x4",
                       "nvfp4-torchao", [](Mutant& m) { m.quantize_recipe.element_cast = ElementCast::satfinite; }));
  all.push_back(mutant("blockfp4-nan-as-six", "a NaN element written +6 (0x7) where counting bounds gives 0x0",
                       "blockfp4-e8m0-ceil", [](Mutant& m) { m.quantize_recipe.element_cast = ElementCast::satfinite_unsigned_zero; }));
  all.push_back(mutant("blockfp4-dequantize-signed-zero", "0x8 dequantized as -0 where the port writes +0",
                       "blockfp4-e8m0-ceil", [](Mutant& m) { m.dequantize_recipe.dequantize_unsigned_zero = false; }));
  all.push_back(mutant("mxfp8-rceil-zero-byte-unscaled", "scale byte 0 applied as 1 (torchao's RCEIL) where the port scales by 2^127",
                       "mxfp8-e4m3-rceil", [](Mutant& m) { m.quantize_recipe.pow2_zero_byte_unscaled = true; }));
  // The dimensions of real code still without a mutant above: E8M0 from bmax rounded to the element's
  // mantissa width, the scale expression in the input dtype, rcp.approx.ftz (-use_fast_math), a
  // clamp of the block scale. (A floor on a per-tensor scale, vLLM's 1e-6, acts where g is computed
  // from amax, before the kernel the port properties call: kvq verify's identify covers it.)
  all.push_back(mutant("mxfp4-even-as-floor", "E8M0 exponent from bmax itself where the port rounds bmax to the element's mantissa first",
                       "mxfp4-even", [](Mutant& m) { m.quantize_recipe.pow2 = Pow2Rule::floor; }));
  all.push_back(mutant("blockfp4-ratio-in-bf16", "the scale's ratio and log2 rounded to BF16 where the port computes them in FP32",
                       "blockfp4-e8m0-ceil", [](Mutant& m) { m.quantize_recipe.scale_dtype = FormatId::bf16; }));
  all.push_back(mutant("nvfp4-compressed-tensors-ratio-in-bf16",
                       "the global scale and block ratio in BF16 where the port computes them in FP32",
                       "nvfp4-compressed-tensors", [](Mutant& m) { m.quantize_recipe.scale_dtype = FormatId::bf16; }));
  all.push_back(mutant("nvfp4-flashinfer-kv-ieee-reciprocal", "IEEE reciprocals where the port uses rcp.approx.ftz (-use_fast_math)",
                       "nvfp4-flashinfer-kv", [](Mutant& m) { m.quantize_recipe.reciprocal = Reciprocal::ieee; }));
  all.push_back(mutant("nvfp4-torchao-scale-unclamped", "the block scale not clamped to [2^-6, 448] where torchao clamps it",
                       "nvfp4-torchao", [](Mutant& m) { m.quantize_recipe.clamp_block_scale = false; }));
  return all;
}

QuantizeShape with_recipe(QuantizeShape s, const Recipe& r) {
  s.recipe = r;
  return s;
}

}  // namespace

const std::vector<Mutant>& mutants() {
  static const std::vector<Mutant> all = build();
  return all;
}

PortKernel twin_kernel(std::string name, const Recipe& r) {
  PortKernel k{std::move(name), r, {}, {}, {}};
  k.quantize = [](const QuantizeShape& s, kernels::DType t, const void* x, float g, std::uint8_t* c, std::uint8_t* sc) {
    return kernels::quantize_cpu(s, t, x, g, c, sc);
  };
  k.dequantize = [](const QuantizeShape& s, const std::uint8_t* c, const std::uint8_t* sc, float g, kernels::DType t,
                    void* y) { return kernels::dequantize_cpu(s, c, sc, g, t, y); };
  k.requantize_e4m3 = [](const QuantizeShape& s, const std::uint8_t* c, const std::uint8_t* sc, float f, std::uint8_t* o) {
    return kernels::requantize_e4m3_cpu(s, c, sc, f, o);
  };
  return k;
}

PortKernel mutant_kernel(const Mutant& m) {
  PortKernel k = twin_kernel(std::string(m.name), named(m.base));
  const MutantBugs b = m.bugs;
  k.quantize = [m, b](const QuantizeShape& shape, kernels::DType t, const void* x, float g, std::uint8_t* codes,
                      std::uint8_t* scales) {
    const QuantizeShape s = with_recipe(shape, m.quantize_recipe);
    const kvq::Status e = kernels::quantize_cpu(s, t, x, g, codes, scales);
    if (e.ok() && b.swap_nibbles && s.packed())
      for (std::int64_t i = 0; i < s.code_bytes(); ++i) codes[i] = swapped_nibbles(codes[i]);
    return e;
  };
  k.dequantize = [m, b](const QuantizeShape& shape, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                        kernels::DType t, void* y) {
    const QuantizeShape s = with_recipe(shape, m.dequantize_recipe);
    g = g * b.dequantize_g_factor;
    if (b.decode == DecodeBug::none) return kernels::dequantize_cpu(s, codes, scales, g, t, y);
    if (auto e = kernels::validate(s); !e.ok()) return e;
    for (std::int64_t i = 0; i < s.rows * s.cols; ++i) {
      std::uint8_t code, scale;
      code_and_scale(s, codes, scales, i, &code, &scale);
      kernels::store_value(t, y, i, mutant_value(s.recipe, b, g, scale, code));
    }
    return Status();
  };
  if (!b.workspace.reference())
    k.requantize_e4m3 = [m, b](const QuantizeShape& shape, const std::uint8_t* codes, const std::uint8_t* scales, float factor,
                            std::uint8_t* out) {
      const QuantizeShape s = with_recipe(shape, m.dequantize_recipe);
      if (auto e = kernels::validate(s); !e.ok()) return e;
      for (std::int64_t i = 0; i < s.rows * s.cols; ++i) {
        std::uint8_t code, scale;
        code_and_scale(s, codes, scales, i, &code, &scale);
        out[i] = requantize_e4m3_rounded(s.recipe, scale, code, factor, b.workspace);
      }
      return Status();
    };
  return k;
}

PortKernel device_mutant_kernel(const Mutant& m) {
  PortKernel k{std::string(m.name) + " (device)", named(m.base), {}, {}, {}};
  const MutantBugs b = m.bugs;
  k.quantize = [m, b](const QuantizeShape& shape, kernels::DType t, const void* x, float g, std::uint8_t* codes,
                      std::uint8_t* scales) {
    const QuantizeShape s = with_recipe(shape, m.quantize_recipe);
    const kernels::DeviceCopy dx(x, static_cast<std::size_t>(s.rows * s.cols * kernels::bytes_of(t)), false);
    const kernels::DeviceCopy dc(nullptr, static_cast<std::size_t>(s.code_bytes()), true);
    const kernels::DeviceCopy ds(nullptr, static_cast<std::size_t>(s.scale_bytes()), true);
    Status e = first_error({dx.error, dc.error, ds.error});
    if (e.ok()) e = kernels::device::quantize(s, t, dx.p, g, dc.bytes_ptr(), ds.bytes_ptr(), nullptr);
    if (e.ok() && b.swap_nibbles && s.packed()) e = device::swap_nibbles(dc.bytes_ptr(), s.code_bytes(), nullptr);
    if (e.ok()) e = kernels::device::synchronize();
    if (e.ok()) e = dc.fetch(codes, "codes");
    if (e.ok()) e = ds.fetch(scales, "scales");
    return e;
  };
  k.dequantize = [m, b](const QuantizeShape& shape, const std::uint8_t* codes, const std::uint8_t* scales, float g,
                        kernels::DType t, void* y) {
    const QuantizeShape s = with_recipe(shape, m.dequantize_recipe);
    const kernels::DeviceCopy dc(codes, static_cast<std::size_t>(s.code_bytes()), false);
    const kernels::DeviceCopy ds(scales, static_cast<std::size_t>(s.scale_bytes()), false);
    const kernels::DeviceCopy dy(nullptr, static_cast<std::size_t>(s.rows * s.cols * kernels::bytes_of(t)), true);
    Status e = first_error({dc.error, ds.error, dy.error});
    g = g * b.dequantize_g_factor;
    if (e.ok())
      e = b.decode == DecodeBug::none ? kernels::device::dequantize(s, dc.bytes_ptr(), ds.bytes_ptr(), g, t, dy.p, nullptr)
                                      : device::dequantize(s, b, dc.bytes_ptr(), ds.bytes_ptr(), g, t, dy.p, nullptr);
    if (e.ok()) e = kernels::device::synchronize();
    if (e.ok()) e = dy.fetch(y, "dequantized output");
    return e;
  };
  k.requantize_e4m3 = [m, b](const QuantizeShape& shape, const std::uint8_t* codes, const std::uint8_t* scales,
                             float factor, std::uint8_t* out) {
    const QuantizeShape s = with_recipe(shape, m.dequantize_recipe);
    const kernels::DeviceCopy dc(codes, static_cast<std::size_t>(s.code_bytes()), false);
    const kernels::DeviceCopy ds(scales, static_cast<std::size_t>(s.scale_bytes()), false);
    const kernels::DeviceCopy dout(nullptr, static_cast<std::size_t>(s.rows * s.cols), true);
    Status e = first_error({dc.error, ds.error, dout.error});
    if (e.ok())
      e = !b.workspace.reference()
              ? device::requantize_e4m3(s, b.workspace, dc.bytes_ptr(), ds.bytes_ptr(), factor, dout.bytes_ptr(), nullptr)
              : kernels::device::requantize_e4m3(s, dc.bytes_ptr(), ds.bytes_ptr(), factor, dout.bytes_ptr(), nullptr);
    if (e.ok()) e = kernels::device::synchronize();
    if (e.ok()) e = dout.fetch(out, "workspace");
    return e;
  };
  return k;
}

}  // namespace kvq::ports
