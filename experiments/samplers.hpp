// The error studies' samples, pair by pair, with the same bits on the host and on a GPU
// (docs/studies.md "Samples"). Every pair of samples has its own stream of random words
// (splitmix64 started at a hash of the seed and the pair's index), so any thread may draw any
// pair; the transforms are integer operations and IEEE +, -, *, / and sqrt only, which are
// correctly rounded on both sides (kvq builds with no FMA contraction: CMakeLists.txt), never libm,
// whose log, sin and cos differ between platforms. Data a distribution needs from libm (per-channel
// deviations, RoPE frequencies) are tables computed once on the host and handed to the device.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "formats/float_bits.hpp"
#include "formats/host_device.hpp"

#if !defined(__CUDA_ARCH__)
static_assert(FLT_EVAL_METHOD == 0, "the samplers need double arithmetic in double (no x87 extended precision)");
#endif

namespace kvq::experiments {

enum class SampleKind : std::uint8_t { gaussian, laplace, student_t, uniform, kv_keys, kv_values };

inline constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // splitmix64's increment
inline constexpr int kMaxRotationBlock = 128;

// splitmix64's output function: a bijection of 64-bit words.
KVQ_HD constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A splitmix64 stream; stream k of a seed starts at a hash of both.
class CounterRng {
 public:
  KVQ_HD CounterRng(std::uint64_t seed, std::uint64_t stream) : state_(mix64(seed + mix64(stream + kGolden))) {}
  KVQ_HD std::uint64_t next() { return mix64(state_ += kGolden); }
  KVQ_HD double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1), exact
  KVQ_HD double uniform_open0() { return 1.0 - uniform(); }                         // (0, 1], exact

 private:
  std::uint64_t state_;
};

// ln x for finite normal x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)) by bit arithmetic, then
// ln m = 2 atanh(s), s = (m - 1)/(m + 1), |s| <= 0.1716, by its series to s^23 (the next term is
// below 2^-60 of the result), and e ln 2 in two parts (ln2_hi has 32 bits, so e * ln2_hi is exact).
KVQ_HD inline double log_ieee(double x) {
  std::uint64_t b = bits_of(x);
  int e = static_cast<int>(b >> 52) - 1023;
  b = (b & 0x000F'FFFF'FFFF'FFFFull) | 0x3FF0'0000'0000'0000ull;  // m in [1, 2)
  if (b > 0x3FF6'A09E'667F'3BCCull) {                              // m > sqrt(2): halve it
    b -= 0x0010'0000'0000'0000ull;
    ++e;
  }
  const double f = double_from_bits(b) - 1.0;  // exact (Sterbenz: m in [1/2, 2])
  const double s = f / (2.0 + f);
  const double z = s * s;
  constexpr double kOdd[] = {0.3333333333333333,  0.2,  0.14285714285714285,  0.1111111111111111,
                             0.09090909090909091, 0.07692307692307693, 0.06666666666666667, 0.058823529411764705,
                             0.05263157894736842, 0.047619047619047616, 0.043478260869565216};  // 1/(2k+1), k = 1..11
  double p = kOdd[10];
  for (int k = 9; k >= 0; --k) p = p * z + kOdd[k];
  constexpr double ln2_hi = 0x1.62e42feep-1, ln2_lo = 0x1.a39ef35793c76p-33;
  const double de = static_cast<double>(e);
  return de * ln2_hi + (2.0 * s + (2.0 * s * (z * p) + de * ln2_lo));
}

// cos and sin of 2 pi t for t in [0, 1): the quadrant q and x = (4t - q) pi/2 in [0, pi/2) by exact
// arithmetic on t, then Taylor series of sin and cos to x^25 and x^24 (the next terms are below 2^-62
// on [0, pi/2)), rotated by q quarter turns (exact sign changes and swaps).
KVQ_HD inline void sincos_turns(double t, double* sin_out, double* cos_out) {
  const double t4 = t * 4.0;
  const int q = static_cast<int>(t4);  // floor: t4 >= 0
  const double x = (t4 - static_cast<double>(q)) * 1.5707963267948966;
  const double x2 = x * x;
  constexpr double kSin[] = {0.16666666666666666,    0.008333333333333333,  0.0001984126984126984,
                             2.7557319223985893e-06, 2.505210838544172e-08, 1.6059043836821613e-10,
                             7.647163731819816e-13,  2.8114572543455206e-15, 8.22063524662433e-18,
                             1.9572941063391263e-20, 3.868170170630684e-23, 6.446950284384474e-26};  // 1/(2k+1)!
  constexpr double kCos[] = {0.5,                   0.041666666666666664,  0.001388888888888889,
                             2.48015873015873e-05,  2.755731922398589e-07, 2.08767569878681e-09,
                             1.1470745597729725e-11, 4.779477332387385e-14, 1.5619206968586225e-16,
                             4.110317623312165e-19, 8.896791392450574e-22, 1.6117375710961184e-24};  // 1/(2k)!
  double ps = 0.0, pc = 0.0;  // Horner in x2 with alternating signs, highest term first
  for (int k = 11; k >= 0; --k) {
    const double sign = (k % 2 == 0) ? -1.0 : 1.0;
    ps = (ps + sign * kSin[k]) * x2;
    pc = (pc + sign * kCos[k]) * x2;
  }
  const double s = x + x * ps, c = 1.0 + pc;
  switch (q & 3) {
    case 0: *sin_out = s; *cos_out = c; break;
    case 1: *sin_out = c; *cos_out = -s; break;
    case 2: *sin_out = -s; *cos_out = -c; break;
    default: *sin_out = -c; *cos_out = s; break;
  }
}

// Standard normal draws from one stream: Box-Muller, both values of a pair used in turn.
class NormalDraws {
 public:
  KVQ_HD explicit NormalDraws(CounterRng* rng) : rng_(rng) {}
  KVQ_HD double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = sqrt(-2.0 * log_ieee(rng_->uniform_open0()));
    double s = 0, c = 0;
    sincos_turns(rng_->uniform(), &s, &c);
    spare_ = r * s;
    has_spare_ = true;
    return r * c;
  }

 private:
  CounterRng* rng_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// Gamma(shape, 1) for shape >= 1 (Marsaglia and Tsang's squeeze-free rejection).
KVQ_HD inline double gamma_draw(double shape, CounterRng* rng, NormalDraws* normal) {
  const double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    const double x = normal->next();
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = rng->uniform_open0();
    if (log_ieee(u) < 0.5 * x * x + d - d * v + d * log_ieee(v)) return d * v;
  }
}

// What a distribution's pairs need: the kind, student-t's nu, and for the kv kinds the head size
// and two host-computed tables (per channel: deviation; per rotation pair j: 10000^(-2j/cols) / 2 pi).
struct SamplerParams {
  SampleKind kind = SampleKind::gaussian;
  double nu = 0;
  int cols = 0;
  const double* sigma = nullptr;
  const double* turns = nullptr;
};

// Pair p's two element indices: 2p and 2p + 1 (i.i.d. kinds), or (row, j) and (row, j + cols/2) of
// row p / (cols/2) (kv kinds: a RoPE pair).
KVQ_HD inline void pair_elements(const SamplerParams& sp, std::int64_t p, std::int64_t* first, std::int64_t* second) {
  if (sp.kind == SampleKind::kv_keys || sp.kind == SampleKind::kv_values) {
    const std::int64_t h = sp.cols / 2, row = p / h, j = p % h;
    *first = row * sp.cols + j;
    *second = *first + h;
  } else {
    *first = 2 * p;
    *second = 2 * p + 1;
  }
}

// The two samples of pair p (unit variance). kv-keys: channel deviations, then NeoX RoPE at position
// = row by the angle row * turns[j] turns (one rounding, its fraction exact).
KVQ_HD inline void sample_pair(const SamplerParams& sp, std::uint64_t seed, std::int64_t p, double* a, double* b) {
  CounterRng rng(seed, static_cast<std::uint64_t>(p));
  NormalDraws normal(&rng);
  double* const outs[2] = {a, b};
  switch (sp.kind) {
    case SampleKind::gaussian:
      *a = normal.next();
      *b = normal.next();
      return;
    case SampleKind::laplace:  // b = 1/sqrt(2): variance 2b^2 = 1; the sign from the word's low bit
      for (double* out : outs) {
        const std::uint64_t w = rng.next();
        const double magnitude = -0.7071067811865476 * log_ieee(1.0 - static_cast<double>(w >> 11) * 0x1p-53);
        *out = (w & 1) ? -magnitude : magnitude;
      }
      return;
    case SampleKind::uniform:  // U(-sqrt 3, sqrt 3)
      *a = (2.0 * rng.uniform() - 1.0) * 1.7320508075688772;
      *b = (2.0 * rng.uniform() - 1.0) * 1.7320508075688772;
      return;
    case SampleKind::student_t:  // z / sqrt(chi2_nu / nu), chi2 = 2 Gamma(nu/2), times sqrt((nu-2)/nu)
      for (double* out : outs) {
        const double chi2 = 2.0 * gamma_draw(sp.nu / 2.0, &rng, &normal);
        *out = normal.next() / sqrt(chi2 / sp.nu) * sqrt((sp.nu - 2.0) / sp.nu);
      }
      return;
    case SampleKind::kv_keys:
    case SampleKind::kv_values: {
      const std::int64_t h = sp.cols / 2, row = p / h, j = p % h;
      const double x = sp.sigma[j] * normal.next(), y = sp.sigma[j + h] * normal.next();
      if (sp.kind == SampleKind::kv_values) {
        *a = x;
        *b = y;
        return;
      }
      const double turns = static_cast<double>(row) * sp.turns[j];
      double s = 0, c = 0;
      sincos_turns(turns - static_cast<double>(static_cast<std::int64_t>(turns)), &s, &c);
      *a = x * c - y * s;
      *b = y * c + x * s;
      return;
    }
  }
}

// Block `index` of x (block values, a power of two <= kMaxRotationBlock) multiplied in place by
// H D / sqrt(block): D a +-1 diagonal from stream `index` of the seed (bit i % 64 of word i / 64),
// H the Walsh-Hadamard matrix by the fast transform in double, in a fixed order.
KVQ_HD inline void rotate_block(float* x, int block, std::uint64_t seed, std::int64_t index) {
  CounterRng rng(seed, static_cast<std::uint64_t>(index));
  double v[kMaxRotationBlock];
  std::uint64_t word = 0;
  for (int i = 0; i < block; ++i) {
    if (i % 64 == 0) word = rng.next();
    v[i] = ((word >> (i % 64)) & 1 ? -1.0 : 1.0) * static_cast<double>(x[i]);
  }
  for (int len = 1; len < block; len *= 2)
    for (int i = 0; i < block; i += 2 * len)
      for (int j = i; j < i + len; ++j) {
        const double p = v[j], q = v[j + len];
        v[j] = p + q;
        v[j + len] = p - q;
      }
  const double norm = 1.0 / sqrt(static_cast<double>(block));
  for (int i = 0; i < block; ++i) x[i] = static_cast<float>(v[i] * norm);
}

}  // namespace kvq::experiments
