// RapidCheck under our runner: explicit seed and case count, a minimal
// counterexample on failure, and a replay line with RapidCheck's reproduce string.
#pragma once

#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <rapidcheck.h>

#include "proptests/harness/property.hpp"

namespace kvq::props {

namespace bridge_detail {

class ProgressListener : public rc::detail::TestListener {
 public:
  ProgressListener(const RunContext& ctx) : ctx_(ctx) {}
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {
    if (++done_ % 64 == 0 && ctx_.cases > 0) ctx_.progress(static_cast<double>(done_) / ctx_.cases);
  }
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}

 private:
  const RunContext& ctx_;
  int done_ = 0;
};

Outcome outcome_of(const RunContext& ctx, const rc::detail::TestResult& result,
                   const std::vector<std::string>& required = {});
std::unordered_map<std::string, rc::detail::Reproduce> reproduce_map(const RunContext& ctx);

}  // namespace bridge_detail

// Runs a RapidCheck testable (a lambda taking generated arguments and using RC_ASSERT).
// required: tags (RC_TAG) that must each label some case, the routes of the code under test that
// the testable records; one that got none fails the property (a generator stopped reaching that
// route). Checked where at least kRouteCoverageCases cases run: a short run need not reach all.
inline constexpr int kRouteCoverageCases = 200;
template <typename Testable>
Outcome check_random(const RunContext& ctx, Testable&& testable, const std::vector<std::string>& required = {}) {
  rc::detail::TestParams params;
  params.seed = ctx.seed;
  params.maxSuccess = ctx.cases;
  params.maxSize = 100;
  params.maxDiscardRatio = 10;
  rc::detail::TestMetadata metadata;
  metadata.id = ctx.id;
  metadata.description = ctx.id;
  bridge_detail::ProgressListener listener(ctx);
  const auto result = rc::detail::checkProperty(rc::detail::toProperty(std::forward<Testable>(testable)), metadata,
                                                params, listener, bridge_detail::reproduce_map(ctx));
  return bridge_detail::outcome_of(ctx, result, ctx.cases >= kRouteCoverageCases ? required : std::vector<std::string>{});
}

}  // namespace kvq::props
