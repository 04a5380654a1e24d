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

void run_suite_under_doctest(const std::string& suite);

}  // namespace kvq::props
