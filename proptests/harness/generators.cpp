#include "proptests/harness/generators.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <cstdio>
#include <ostream>
#include <utility>

#include "formats/float_bits.hpp"

namespace kvq::props {

void showValue(Fp32 x, std::ostream& os) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "0x%08x (%.9g = %a)", x.bits, static_cast<double>(float_from_bits(x.bits)),
                static_cast<double>(float_from_bits(x.bits)));
  os << buf;
}
void showValue(Fp64 x, std::ostream& os) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "0x%016llx (%.17g = %a)", static_cast<unsigned long long>(x.bits),
                double_from_bits(x.bits), double_from_bits(x.bits));
  os << buf;
}

namespace {

// Ascending non-negative finite magnitudes of a format, and the step past its max.
std::vector<double> make_ladder(Format f) {
  std::vector<double> values;
  const std::uint64_t codes = std::uint64_t{1} << (f.bits() - (f.is_signed ? 1 : 0));
  for (std::uint64_t c = 0; c < codes; ++c)
    if (!f.is_nan(c) && !f.is_inf(c)) values.push_back(finite_value(f, c));
  std::sort(values.begin(), values.end());
  const double top = values.back();
  const double below = values.size() > 1 ? values[values.size() - 2] : top / 2;
  values.push_back(f.mantissa_bits == 0 ? 2 * top : top + (top - below));
  return values;
}

template <typename T>
const T& cached(Format f, T (*make)(Format)) {  // one list per format, built once
  static std::mutex mutex;
  static std::map<Format, T> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(f);
  if (it == cache.end()) it = cache.emplace(f, make(f)).first;
  return it->second;
}

const std::vector<double>& ladder(Format f) { return cached(f, make_ladder); }

void push_fp32_neighbourhood(std::vector<std::uint32_t>& out, double v) {
  const auto b = bits_of(static_cast<float>(v));
  for (const std::uint32_t s : {0u, 0x80000000u}) {
    out.push_back(b | s);
    if ((b & 0x7fffffffu) != 0) out.push_back((b - 1) | s);
    if ((b & 0x7fffffffu) < 0x7f7fffffu) out.push_back((b + 1) | s);
  }
}

std::vector<std::uint32_t> make_edge_inputs_fp32(Format f) {
  std::vector<std::uint32_t> out;
  const std::vector<double>& values = ladder(f);
  for (std::size_t i = 0; i < values.size(); ++i) {
    push_fp32_neighbourhood(out, values[i]);
    if (i + 1 < values.size()) push_fp32_neighbourhood(out, (values[i] + values[i + 1]) / 2);
  }
  if (!f.has_zero) push_fp32_neighbourhood(out, values.front() / 2);
  const auto specials = fp32_specials();
  out.insert(out.end(), specials.begin(), specials.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::uint64_t> make_edge_inputs_fp64(Format f) {
  std::vector<std::uint64_t> out;
  const std::vector<double>& values = ladder(f);
  for (std::size_t i = 0; i + 1 < values.size(); ++i) {
    const std::uint64_t mid = bits_of((values[i] + values[i + 1]) / 2);
    for (const std::uint64_t s : {std::uint64_t{0}, std::uint64_t{1} << 63}) {
      for (const std::uint64_t d : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{1} << 29}) {
        out.push_back((mid + d) | s);
        if ((mid & ~(std::uint64_t{1} << 63)) > d) out.push_back((mid - d) | s);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<std::uint32_t> edge_inputs_fp32(Format f) { return cached(f, make_edge_inputs_fp32); }
std::vector<std::uint64_t> edge_inputs_fp64(Format f) { return cached(f, make_edge_inputs_fp64); }

std::vector<std::uint32_t> bf16_and_fp16_inputs() {
  std::vector<std::uint32_t> out;
  out.reserve(1u << 17);
  for (std::uint32_t h = 0; h < (1u << 16); ++h) out.push_back(h << 16);
  for (std::uint32_t h = 0; h < (1u << 16); ++h)
    out.push_back(static_cast<std::uint32_t>(widen(kFP16, h, kFP32)));
  return out;
}

std::vector<std::uint32_t> fp32_specials() {
  return {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
          0xff800001u, 0x7fffffffu, 0xffffffffu, 0x7fa00000u, 0x7f7fffffu, 0xff7fffffu, 0x00800000u,
          0x80800000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu, 0x00400000u, 0x3f800000u};
}

rc::Gen<Fp32> gen_fp32(Format target) {
  const auto from_bits = [](std::uint32_t b) { return Fp32{b}; };
  return rc::gen::weightedOneOf<Fp32>({
      {4, rc::gen::map(rc::gen::elementOf(edge_inputs_fp32(target)), from_bits)},
      {3, rc::gen::map(rc::gen::arbitrary<std::uint32_t>(), from_bits)},
      {1, rc::gen::map(rc::gen::elementOf(fp32_specials()), from_bits)},
      {1, rc::gen::map(rc::gen::inRange<std::uint32_t>(0, 0x00800000u),  // FP32 subnormals
                       [](std::uint32_t m) { return Fp32{m}; })},
      {2, rc::gen::map(rc::gen::inRange<std::uint32_t>(0x30000000u, 0x48000000u),  // the small formats' range
                       from_bits)},
  });
}

rc::Gen<Fp64> gen_fp64(Format target) {
  const auto from_bits = [](std::uint64_t b) { return Fp64{b}; };
  return rc::gen::weightedOneOf<Fp64>({
      {4, rc::gen::map(rc::gen::elementOf(edge_inputs_fp64(target)), from_bits)},
      {3, rc::gen::map(rc::gen::arbitrary<std::uint64_t>(), from_bits)},
      {2, rc::gen::map(rc::gen::inRange<std::uint64_t>(0x3e00000000000000ull, 0x4100000000000000ull), from_bits)},
      {1, rc::gen::map(rc::gen::elementOf(fp32_specials()),
                       [](std::uint32_t b) { return Fp64{widen(kFP32, b, kFP64)}; })},
  });
}

rc::Gen<Fp64> gen_fp64_for(Format target) {
  if (target.bits() <= 16) return gen_fp64(target);
  const auto ties = rc::gen::exec([] {
    const std::uint32_t b = *rc::gen::inRange<std::uint32_t>(0, 0x7f7fffffu);  // finite, below max
    const double lo = static_cast<double>(float_from_bits(b)), hi = static_cast<double>(float_from_bits(b + 1));
    const std::uint64_t mid = bits_of((lo + hi) / 2);  // exact in FP64
    const std::int64_t d = *rc::gen::element<std::int64_t>(0, 1, -1, 1 << 20, -(1 << 20));
    const std::uint64_t sign = *rc::gen::arbitrary<bool>() ? std::uint64_t{1} << 63 : 0;
    return Fp64{(mid + static_cast<std::uint64_t>(d)) | sign};
  });
  return rc::gen::weightedOneOf<Fp64>({{1, gen_fp64(kBF16)}, {1, ties}});
}

std::string classify(Format target, Fp32 x) {
  const Unpacked u = unpack(kFP32, x.bits);
  if (u.kind == ValueKind::nan) return "nan";
  if (u.kind == ValueKind::infinity) return "inf";
  if (u.kind == ValueKind::zero) return "zero";
  if ((x.bits & 0x7f800000u) == 0) return "fp32-subnormal";
  const double v = std::abs(static_cast<double>(float_from_bits(x.bits)));
  const std::vector<double>& values = ladder(target);
  if (v > values.back()) return "far-overflow";
  if (v > max_finite(target)) return "overflow-edge";
  const auto it = std::lower_bound(values.begin(), values.end(), v);
  if (it != values.end() && *it == v) return "exact-code";
  if (it != values.begin() && it != values.end()) {
    const double mid = (*(it - 1) + *it) / 2;
    if (v == mid) return "tie";
    const float fm = static_cast<float>(mid);
    if (static_cast<double>(fm) == mid &&
        (v == static_cast<double>(std::nextafter(fm, 0.0f)) || v == static_cast<double>(std::nextafter(fm, 1e30f))))
      return "tie+-ulp";
  }
  if (it == values.begin()) return "below-min";
  return "between";
}

}  // namespace kvq::props
