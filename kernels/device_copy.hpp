// Device copies for host-pointer interfaces (plug-ins with device pointers, device mutants, the
// studies on the GPU):
// inputs uploaded; outputs allocated with guard bytes of poison that must survive the call.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/quantize.hpp"

namespace kvq::kernels {

struct DeviceCopy {
  static constexpr std::size_t kGuard = 64;
  static constexpr std::uint8_t kPoison = 0x5A;
  void* p = nullptr;
  std::size_t bytes = 0;
  Status error;

  DeviceCopy(const void* host, std::size_t n, bool output) : bytes(n) {
    error = device::allocate(&p, n + kGuard);
    if (error.ok()) error = device::fill(p, kPoison, n + kGuard);
    if (error.ok() && host && !output) error = device::upload(p, host, n);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() { device::release(p); }

  // An output: its data to the host, after checking that nothing past its end was written.
  Status fetch(void* host, const char* what) const {
    std::vector<std::uint8_t> all(bytes + kGuard);
    Status e = device::download(all.data(), p, all.size());
    if (!e.ok()) return e;
    for (std::size_t i = bytes; i < all.size(); ++i)
      if (all[i] != kPoison) return std::string(what) + " written past its end at byte " + std::to_string(i);
    std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(bytes), static_cast<std::uint8_t*>(host));
    return {};
  }
  std::uint8_t* bytes_ptr() const { return static_cast<std::uint8_t*>(p); }
};

}  // namespace kvq::kernels
