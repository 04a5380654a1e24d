// What `kvq identify` answers for the layout-aware kinds (oracle/verify_paged.hpp, verify_rope.hpp,
// verify_mla.hpp, verify_workspace.hpp): how many candidates it tried, those that reproduce every
// byte (in the order tried), and the nearest others, fewest differing bytes first.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace kvq::ports {

template <class Candidate>
struct LayoutIdentification {
  int tried = 0;
  std::vector<Candidate> exact, nearest;

  // Adds a tried candidate (its comparison has exact() and differing()).
  void add(Candidate c) {
    ++tried;
    (c.comparison.exact() ? exact : others_).push_back(std::move(c));
  }
  // Keeps the `keep` nearest of the others in `nearest` (stable: ties keep the order tried).
  void rank(std::size_t keep) {
    std::stable_sort(others_.begin(), others_.end(), [](const Candidate& a, const Candidate& b) {
      return a.comparison.differing() < b.comparison.differing();
    });
    if (others_.size() > keep) others_.resize(keep);
    nearest = std::move(others_);
    others_.clear();
  }

 private:
  std::vector<Candidate> others_;
};

}  // namespace kvq::ports
