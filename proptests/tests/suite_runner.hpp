// Runs one registered property suite inside a doctest test case: failures become
// doctest failures with the replay line, skips are counted and printed.
#pragma once

#include <string>

namespace kvq::props {

struct SuiteTally {
  int ran = 0;
  int skipped = 0;
};
SuiteTally& suite_tally();

// parts > 1: only the suite's properties part, part + parts, ... (in registry order).
void run_suite_under_doctest(const std::string& suite, int part = 0, int parts = 1);

}  // namespace kvq::props
