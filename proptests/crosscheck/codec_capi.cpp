// A C entry point to kvq's codec for the Python cross-checks (ctypes; numpy arrays in
// and out). Conversion from FP32 bit patterns, threaded over the array.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "formats/codec.hpp"
#include "formats/names.hpp"

namespace {
thread_local std::string last_error;
}

extern "C" {

const char* kvq_last_error() { return last_error.c_str(); }

// Returns 0 on success; 2 with kvq_last_error() set for an unknown name or a rounding the
// convention does not take.
int kvq_encode_fp32(const char* format, const char* convention, const char* rounding, const std::uint32_t* in,
                    std::uint32_t* out, std::size_t n) {
  const auto f = kvq::format_from_name(format ? format : "");
  const auto c = kvq::convention_from_name(convention ? convention : "");
  const auto r = kvq::rounding_from_name(rounding ? rounding : "");
  if (!f || !c || !r) {
    last_error = "unknown format, convention or rounding name";
    return 2;
  }
  const kvq::ConventionRule rule = kvq::convention_rule(*c, *f);
  if (!(rule.allowed & kvq::rounding_bit(*r)) || *r == kvq::Rounding::stochastic) {
    last_error = "the convention has no such cast or rounding";
    return 2;
  }
  const kvq::Format target = kvq::format_of(*f);
  const kvq::Conversion conversion = kvq::convention_conversion(*c, *f, *r);
  const unsigned threads = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([=] {
      const std::size_t begin = n * t / threads, end = n * (t + 1) / threads;
      for (std::size_t i = begin; i < end; ++i)
        out[i] = static_cast<std::uint32_t>(kvq::encode(target, conversion, kvq::unpack(kvq::kFP32, in[i])));
    });
  }
  for (auto& th : pool) th.join();
  return 0;
}

}  // extern "C"
