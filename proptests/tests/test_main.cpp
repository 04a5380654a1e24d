// doctest main for kvq_tests. Exit status 77 (CTest's SKIP_RETURN_CODE) when every
// property this run selected was skipped, e.g. the GPU suite on a machine with no GPU:
// a counted skip, never a silent pass.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <iostream>

#include "proptests/tests/suite_runner.hpp"

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int status = context.run();
  if (context.shouldExit()) return status;
  const auto& tally = kvq::props::suite_tally();
  if (status == 0 && tally.ran > 0 && tally.skipped == tally.ran) {
    std::cerr << "kvq_tests: all " << tally.ran << " selected properties were SKIPPED\n";
    return 77;
  }
  return status;
}
