// The cuda-* conventions against the CUDA 13 headers' own host implementation of the
// conversion intrinsics (the software path that sm_90 also runs for nosat, E2M1 and E8M0),
// and kvq's decode against the headers' decode. The device side is in the gpu suite.
#include <string>
#include <vector>

#include "formats/float_bits.hpp"
#include "formats/names.hpp"
#include "proptests/conversion_space.hpp"
#include "proptests/harness/generators.hpp"
#include "proptests/harness/property.hpp"

#if defined(KVQ_HAVE_CUDA_HEADERS)
#include "proptests/cuda_intrinsics.hpp"
#endif

namespace kvq::props {
namespace {

#if defined(KVQ_HAVE_CUDA_HEADERS)

constexpr std::uint64_t kRandomInputs = 1u << 22;

Outcome intrinsic_vs_codec(const RunContext& ctx, CudaIntrinsic which) {
  const IntrinsicModel m = model_of(which);
  const ConversionCase k{m.format, m.convention, m.rounding};
  const Format f = k.target();
  const Conversion c = k.conversion();
  std::vector<std::uint32_t> inputs = edge_inputs_fp32(f);
  const auto wide = bf16_and_fp16_inputs();
  inputs.insert(inputs.end(), wide.begin(), wide.end());
  for (std::uint64_t i = 0; i < kRandomInputs; ++i) inputs.push_back(mix32(ctx.seed + i));
  Tally tally;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::uint32_t b = inputs[i];
    const std::uint64_t expected = call_intrinsic(which, float_from_bits(b));
    const std::uint64_t actual = encode(f, c, unpack(kFP32, b));
    if (expected == actual) {
      tally.pass();
    } else {
      tally.fail(hex_code(kFP32, b) + " -> " + m.name + " " + hex_code(f, expected) + ", kvq " + hex_code(f, actual) +
                 "   replay: " + k.encode_replay(b));
    }
    if (i % 65536 == 0) ctx.progress(static_cast<double>(i) / inputs.size());
  }
  return tally.outcome(ctx);
}

// Decode every code with the header and with kvq; bits must match except NaN, where
// CUDA returns its canonical NaN (only NaN-ness is compared).
template <typename HeaderDecode>
Outcome decode_vs_header(const RunContext& ctx, Format f, Format wide, HeaderDecode header) {
  Tally tally;
  for (std::uint64_t code = 0; code < f.code_count(); ++code) {
    const std::uint64_t theirs = header(code);
    const std::uint64_t ours = widen(f, code, wide);
    const bool ok = f.is_nan(code) ? wide.is_nan(theirs) && wide.is_nan(ours) : theirs == ours;
    if (ok) {
      tally.pass();
    } else {
      tally.fail(hex_code(f, code) + " -> header " + hex_code(wide, theirs) + ", kvq " + hex_code(wide, ours));
    }
  }
  return tally.outcome(ctx);
}

void register_cuda_header_properties() {
  for (int i = 0; i < kCudaIntrinsicCount; ++i) {
    const auto which = static_cast<CudaIntrinsic>(i);
    add_property("cuda-headers", std::string(model_of(which).name) + "/host-intrinsic-vs-codec", Device::cpu,
                 [which](const RunContext& ctx) { return intrinsic_vs_codec(ctx, which); });
  }
  add_property("cuda-headers", "e4m3fn/decode-to-fp16", Device::cpu, [](const RunContext& ctx) {
    return decode_vs_header(ctx, kE4M3FN, kFP16, [](std::uint64_t c) {
      return static_cast<__half_raw>(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E4M3)).x;
    });
  });
  add_property("cuda-headers", "e5m2/decode-to-fp16", Device::cpu, [](const RunContext& ctx) {
    return decode_vs_header(ctx, kE5M2, kFP16, [](std::uint64_t c) {
      return static_cast<__half_raw>(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E5M2)).x;
    });
  });
  add_property("cuda-headers", "e2m1/decode-to-fp16", Device::cpu, [](const RunContext& ctx) {
    return decode_vs_header(ctx, kE2M1, kFP16, [](std::uint64_t c) {
      return static_cast<__half_raw>(__nv_cvt_fp4_to_halfraw(static_cast<__nv_fp4_storage_t>(c), __NV_E2M1)).x;
    });
  });
  add_property("cuda-headers", "e8m0fnu/decode-to-bf16", Device::cpu, [](const RunContext& ctx) {
    return decode_vs_header(ctx, kE8M0FNU, kBF16, [](std::uint64_t c) {
      return static_cast<__nv_bfloat16_raw>(__nv_cvt_e8m0_to_bf16raw(static_cast<__nv_fp8_storage_t>(c))).x;
    });
  });
}

#else

void register_cuda_header_properties() {
  add_property("cuda-headers", "all", Device::cpu,
               [](const RunContext&) { return skipped("cuda_fp8.h/cuda_fp4.h not found when kvq was built"); });
}

#endif

KVQ_REGISTER_PROPERTIES(register_cuda_header_properties);

}  // namespace
}  // namespace kvq::props
