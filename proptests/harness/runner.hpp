// Runs a selection of registered properties with progress, then reports.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "proptests/harness/property.hpp"

namespace kvq::props {

struct Selection {
  std::vector<std::string> suites;  // empty: every suite
  std::string property;             // one property id, or empty
  std::vector<std::string> matches;  // keep ids containing any of these (empty: all)
  bool cpu = true;
  bool cuda = true;
};

struct RunOptions {
  std::uint64_t seed = kDefaultSeed;
  int cases = 1000;
  std::string reproduce;
};

struct Result {
  std::string id;
  std::string suite;
  Device device = Device::cpu;
  Outcome outcome;
  double seconds = 0;
};

std::vector<const Property*> select(const Selection& s);
std::vector<Result> run_properties(const std::vector<const Property*>& properties, const RunOptions& options,
                                   std::ostream& log);

struct Totals {
  int passed = 0, failed = 0, skipped = 0;
};
Totals totals(const std::vector<Result>& results);

void print_summary(const std::vector<Result>& results, std::ostream& os);
void print_failures(const std::vector<Result>& results, std::ostream& os);
// The property ids a --reproduce string replays, or nullopt where it is not a replay string.
std::optional<std::vector<std::string>> reproduce_ids(const std::string& text);

std::string json_report(const std::vector<Result>& results, const RunOptions& options);

}  // namespace kvq::props
