// The CPU twins' loops over rows (or blocks), split across the host's cores for large tensors. Each
// row is computed by the same code whichever thread runs it and writes only its own outputs, so the
// results are those of one loop; small tensors stay on the calling thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace kvq::kernels {

inline constexpr std::int64_t kCpuParallelElements = std::int64_t{1} << 20;  // below: one thread

// body(first, last) for consecutive ranges of [0, count) that cover it; `elements` is the work of
// the whole loop (elements of the tensor), which decides whether threads are worth starting.
template <class Body>
void for_ranges(std::int64_t count, std::int64_t elements, const Body& body) {
  const std::int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t threads = std::min(cores, count);
  if (elements < kCpuParallelElements || threads <= 1) return body(std::int64_t{0}, count);
  std::vector<std::thread> pool;
  for (std::int64_t t = 1; t < threads; ++t) pool.emplace_back([&body, count, threads, t] { body(count * t / threads, count * (t + 1) / threads); });
  body(std::int64_t{0}, count / threads);
  for (auto& th : pool) th.join();
}

}  // namespace kvq::kernels
