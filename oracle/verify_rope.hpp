// Fused RoPE + FP8 ports checked from their tensors (docs/ports.md "RoPE"): FlashInfer's
// rope_quantize_fp8 (kind rope-quantize: Q and K rotated and quantized into contiguous outputs) and
// rope_quantize_fp8_append_paged_kv_cache (kind rope-append: K and V written into a paged cache
// through kv_indptr / kv_indices / batch_indices / positions), under FlashInfer's argument names.
// The model is kvq's element rule (kernels/rope_append.hpp rope_rotate, quantize_e4m3; docs/rope.md)
// placed element by element, with the arithmetic variants a port's compiler produces (an FMA, flush
// to zero, ...); every output buffer is compared byte for byte, the bytes no element addresses
// included, so a port that writes outside its slots, or writes a padding token, fails.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rope_append.hpp"
#include "kernels/status.hpp"
#include "oracle/layout_identification.hpp"

namespace kvq::ports {

// How a port computes an element (kvq identify's RoPE dimensions; docs/rope.md "Arithmetic
// variants"). The default is kvq's model: RN(RN(x*c) -/+ RN(partner*s)), then E4M3 satfinite of
// RN(value * scale).
enum class RopeFma : std::uint8_t {
  none,
  x_cos,        // fma(x, c, -/+RN(partner*s)): the element's own product fused
  partner_sin,  // fma(-/+partner, s, RN(x*c)): the partner's product fused
};
enum class RopeScaleOp : std::uint8_t {
  multiply,    // value * quant_scale
  divide,      // value / quant_scale (the scale read as a decode scale)
  reciprocal,  // value * RN(1 / quant_scale)
};
// Where cos and sin come from: the cos_sin_cache the port was given, or computed by the port from
// pos and the manifest's rope_theta (kvq's rounding of each: the FP32 nearest to the cos and sin of
// the exact angle pos * theta^(-2f/rot), or of the FP32 angle RN(pos * RN(theta^(-2f/rot))); CUDA's
// sincosf and __sincosf, not correctly rounded, are neither: docs/rope.md "cos and sin").
enum class RopeCosSin : std::uint8_t { cache, exact_angle, fp32_angle };
const char* name_of(RopeCosSin c);  // "cache", "computed-exact-angle", "computed-fp32-angle"

struct RopeArithmetic {
  kernels::RopeStyle style = kernels::RopeStyle::neox;  // NeoX (rotate half) or GPT-J (interleaved) pairs
  RopeFma fma = RopeFma::none;
  bool ftz = false;  // subnormal inputs and results of every FP32 operation flushed to +-0 (-use_fast_math)
  RopeScaleOp scale = RopeScaleOp::multiply;
  bool saturate = true;         // false: an overflow gives the E4M3 NaN (cvt.rn without .satfinite)
  bool round_to_input = false;  // the rotated value rounded to the input dtype (BF16/FP16) before it is scaled
  RopeCosSin cos_sin = RopeCosSin::cache;
  int changes(const RopeArithmetic& port_default) const;  // dimensions that differ from port_default
  std::string phrase() const;                              // "NeoX, an FMA of x*cos, flush to zero"
};

// One output element's E4M3 code under `a` (cos/sin given: a.cos_sin is not read): a rotated
// element with its partner, cos and sin (first: the subtracting one of its pair), or a plain one
// (nope, V) scaled alone. What the comparisons expect, and what the RoPE mutants compute.
std::uint8_t rope_element_code(const RopeArithmetic& a, kernels::DType input, float x, float partner, float c, float s,
                               bool first, bool rotated, float scale);

enum class RopeKind : std::uint8_t { quantize, append };
// Output buffers by kind: quantize q_rope_out, q_nope_out, k_rope_out, k_nope_out; append
// q_rope_out, q_nope_out, then k_cache, v_cache (MHA) or ckv_cache, kpe_cache (MLA).
inline constexpr int kRopeBuffers = 4;

struct RopePort {
  RopeKind kind = RopeKind::quantize;
  kernels::RopeShape shape;  // attention, input dtype, style (is_neox), layout, geometry
  float quant_scale_q = 1.0f, quant_scale_kv = 1.0f;
  std::vector<std::uint8_t> q_rope, q_nope, k_rope, k_nope, v;  // raw values of shape.input
  std::vector<float> cos_sin_cache;                             // [max_pos, rope_dim]; empty: not given
  double rope_theta = 0;  // the base of a port that computes cos/sin (parameters.rope_theta); 0: not given
  RopeCosSin cos_sin = RopeCosSin::cache;  // verify's model: the port's cache or the computed rows it claims
  std::vector<std::int32_t> pos_ids;                            // [tokens]
  std::vector<std::int32_t> kv_indptr, kv_indices, batch_indices, positions;  // rope-append
  std::vector<std::uint8_t> after[kRopeBuffers], before[kRopeBuffers];
  bool before_known[kRopeBuffers] = {true, true, true, true};
};
const char* rope_buffer_name(const RopePort& p, int buffer);
// The bytes each output buffer must have (0 where the call has no such part: q_nope_out and
// k_nope_out without a nope part).
std::int64_t rope_buffer_bytes(const RopePort& p, int buffer);

struct RopeDifference {
  int buffer = 0;
  std::int64_t offset = 0;
  std::uint8_t before = 0, expected = 0, actual = 0;
  bool addressed = false;  // an element some token writes
  std::int64_t token = -1, head = 0, dim = 0, page = -1, entry = -1;
  bool rotated = false;
  float x = 0, partner = 0, c = 0, s = 0, scale = 0;
  bool within_bound = false;  // rotated: the actual code lies within the FP32 model's derived bound (docs/rope.md)
};

struct RopeComparison {
  Status error;  // the model's validation of the port's shapes and indices
  std::int64_t bytes[kRopeBuffers] = {}, addressed_mismatches[kRopeBuffers] = {}, untouched_changed[kRopeBuffers] = {};
  std::int64_t rotated_mismatches = 0, rotated_within_bound = 0;
  std::vector<RopeDifference> first;
  bool exact() const;
  std::int64_t differing() const;
};

// Success, or a message naming the argument whose shape or indices the model cannot take.
Status validate_rope(const RopePort& p);
// What a comparison covers: everything, by default; the comparator's mutants narrow it
// (proptests/comparator_properties.cpp): an output buffer not compared (a role ignored).
struct RopeScope {
  bool buffers[kRopeBuffers] = {true, true, true, true};
};
RopeComparison compare_rope(const RopePort& p, const RopeArithmetic& a, std::size_t keep, const RopeScope& scope = {});
std::string describe_rope(const RopePort& p, const RopeArithmetic& a, const RopeComparison& c);

// kvq identify for RoPE: every arithmetic variant (both pairings, each FMA form, with and without
// flush to zero, the three scale operations, saturating or not, rounded to the input dtype or not),
// each with cos/sin from the port's cache and, given rope_theta, computed (RopeCosSin);
// those that reproduce every byte, fewest changes from kvq's model (with the port's is_neox) first,
// and the nearest others. Several may reproduce a call whose inputs do not separate them.
struct RopeCandidate {
  RopeArithmetic arithmetic;
  RopeComparison comparison;
};
using RopeIdentification = LayoutIdentification<RopeCandidate>;
RopeIdentification identify_rope(const RopePort& p, std::size_t nearest);

}  // namespace kvq::ports
