#include <doctest/doctest.h>

#include <cstdlib>
#include <iostream>

#include "proptests/harness/rapidcheck_bridge.hpp"
#include "proptests/harness/runner.hpp"
#include "proptests/tests/suite_runner.hpp"

namespace kvq::props {

SuiteTally& suite_tally() {
  static SuiteTally tally;
  return tally;
}

namespace {
std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  return text && *text ? std::strtoull(text, nullptr, 0) : fallback;
}
}  // namespace

void run_suite_under_doctest(const std::string& suite, int part, int parts) {
  Selection selection;
  selection.suites = {suite};
  RunOptions options;
  options.seed = env_number("KVQ_SEED", kDefaultSeed);
  options.cases = static_cast<int>(env_number("KVQ_CASES", 1000));
  auto properties = select(selection);
  if (parts > 1) {  // every parts-th property from `part` on: the parts together are the suite
    decltype(properties) mine;
    for (std::size_t i = static_cast<std::size_t>(part); i < properties.size(); i += static_cast<std::size_t>(parts))
      mine.push_back(properties[i]);
    properties = std::move(mine);
  }
  REQUIRE_MESSAGE(!properties.empty(), "suite " << suite << " has no properties");
  const auto results = run_properties(properties, options, std::cerr);
  for (const auto& r : results) {
    ++suite_tally().ran;
    if (r.outcome.status == Status::skipped) {
      ++suite_tally().skipped;
      MESSAGE("SKIPPED " << r.id << ": " << r.outcome.detail);
    } else if (r.outcome.status == Status::failed) {
      FAIL_CHECK((r.id + "\n" + r.outcome.detail + "replay: " + r.outcome.replay));
    } else {
      CHECK_MESSAGE(r.outcome.cases > 0, r.id << " checked no input");
    }
  }
  const Totals t = totals(results);
  std::cerr << "suite " << suite << (parts > 1 ? " part " + std::to_string(part + 1) + " of " + std::to_string(parts) : "")
            << ": " << t.passed << " passed, " << t.failed << " failed, " << t.skipped
            << " skipped\n";
}

}  // namespace kvq::props

TEST_CASE("formats") { kvq::props::run_suite_under_doctest("formats"); }
TEST_CASE("exhaustive") { kvq::props::run_suite_under_doctest("exhaustive"); }
TEST_CASE("oracle") { kvq::props::run_suite_under_doctest("oracle"); }
TEST_CASE("cuda-headers") { kvq::props::run_suite_under_doctest("cuda-headers"); }
TEST_CASE("gpu") { kvq::props::run_suite_under_doctest("gpu"); }
TEST_CASE("recipes") { kvq::props::run_suite_under_doctest("recipes"); }
// The longest suite in two halves, so CTest runs them side by side on two cores.
TEST_CASE("kernels-1of2") { kvq::props::run_suite_under_doctest("kernels", 0, 2); }
TEST_CASE("kernels-2of2") { kvq::props::run_suite_under_doctest("kernels", 1, 2); }
TEST_CASE("mla") { kvq::props::run_suite_under_doctest("mla"); }
TEST_CASE("rope") { kvq::props::run_suite_under_doctest("rope"); }
TEST_CASE("studies") { kvq::props::run_suite_under_doctest("studies"); }
TEST_CASE("paged") { kvq::props::run_suite_under_doctest("paged"); }
TEST_CASE("ports") { kvq::props::run_suite_under_doctest("ports"); }
TEST_CASE("mutants") { kvq::props::run_suite_under_doctest("mutants"); }

// Route coverage (check_random's required tags): a required tag that no case sets fails the
// property, one that some case sets passes, and a short run does not ask for coverage.
TEST_CASE("harness: a required route that no case reaches fails the property") {
  using namespace kvq::props;
  RunContext ctx;
  ctx.id = "harness/route-coverage";
  ctx.cases = kRouteCoverageCases;
  const auto tagged = [] { RC_TAG(*rc::gen::inRange(0, 2) == 0 ? "even" : "odd"); };
  CHECK(check_random(ctx, tagged, {"even", "odd"}).status == Status::passed);
  const Outcome missing = check_random(ctx, tagged, {"even", "never"});
  CHECK(missing.status == Status::failed);
  CHECK(missing.detail.find("never") != std::string::npos);
  CHECK(missing.detail.find("even") == std::string::npos);
  ctx.cases = kRouteCoverageCases - 1;
  CHECK(check_random(ctx, tagged, {"never"}).status == Status::passed);
}
