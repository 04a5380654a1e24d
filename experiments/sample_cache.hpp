// Seeded samples drawn once per key and shared by every configuration that needs them (the grids
// run recipe-major, so the same data are needed many times). Thread-safe; a key is drawn at most
// once except when two threads race for it, and then both draws are equal (a pure function).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kvq::experiments {

class SampleCache {
 public:
  using Samples = std::shared_ptr<const std::vector<float>>;
  Samples get(const std::string& key, const std::function<std::vector<float>()>& draw) {
    {
      const std::lock_guard<std::mutex> guard(lock_);
      if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    }
    auto samples = std::make_shared<const std::vector<float>>(draw());
    const std::lock_guard<std::mutex> guard(lock_);
    return cache_.emplace(key, std::move(samples)).first->second;
  }

 private:
  std::mutex lock_;
  std::map<std::string, Samples> cache_;
};

}  // namespace kvq::experiments
