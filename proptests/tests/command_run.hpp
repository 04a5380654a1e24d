// Running a CLI command in process for the tests: its exit status and what it printed.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace kvq::test {

struct Run {
  int status;
  std::string out, err;
};

template <typename Command>
Run run(Command command, const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = command(args, out, err);
  return {status, out.str(), err.str()};
}

}  // namespace kvq::test
