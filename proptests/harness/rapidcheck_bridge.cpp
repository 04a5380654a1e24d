#include "proptests/harness/rapidcheck_bridge.hpp"

#include <algorithm>

#include "proptests/harness/runner.hpp"

namespace kvq::props::bridge_detail {

std::unordered_map<std::string, rc::detail::Reproduce> reproduce_map(const RunContext& ctx) {
  if (ctx.reproduce.empty()) return {};
  return rc::detail::configFromString(ctx.reproduce).reproduce;
}

Outcome outcome_of(const RunContext& ctx, const rc::detail::TestResult& result, const std::vector<std::string>& required) {
  Outcome o;
  rc::detail::SuccessResult success;
  rc::detail::FailureResult failure;
  rc::detail::GaveUpResult gave_up;
  rc::detail::Error error;
  if (result.match(success)) {
    o.cases = static_cast<std::uint64_t>(success.numSuccess);
    for (const auto& [tags, count] : success.distribution) {
      std::string label;
      for (const auto& t : tags) label += (label.empty() ? "" : ", ") + t;
      o.classes.emplace_back(label.empty() ? "(untagged)" : label, count);
    }
    std::string missing;
    for (const std::string& tag : required) {
      bool seen = false;
      const std::string shown = '"' + tag + '"';  // RC_TAG shows a string argument quoted
      for (const auto& [tags, count] : success.distribution)
        seen = seen || std::find(tags.begin(), tags.end(), shown) != tags.end() ||
               std::find(tags.begin(), tags.end(), tag) != tags.end();
      if (!seen) missing += (missing.empty() ? "" : ", ") + tag;
    }
    if (!missing.empty()) {
      o.status = Status::failed;
      o.detail = "no case took " + missing + " (of " + std::to_string(o.cases) +
                 " passing cases): the generators no longer reach it\n";
      o.replay = replay_line(ctx);
    }
    return o;
  }
  o.status = Status::failed;
  std::ostringstream os;
  if (result.match(failure)) {
    o.cases = static_cast<std::uint64_t>(failure.numSuccess) + 1;
    os << "falsified after " << failure.numSuccess << " passing cases; minimal counterexample:\n";
    for (const auto& [type, value] : failure.counterExample) os << "  " << type << ": " << value << "\n";
    os << failure.description << "\n";
    rc::detail::Configuration config;
    config.reproduce[ctx.id] = failure.reproduce;
    std::string text = rc::detail::configToMinimalString(config);
    o.replay = replay_line(ctx, text);
  } else if (result.match(gave_up)) {
    o.cases = static_cast<std::uint64_t>(gave_up.numSuccess);
    os << "gave up: " << gave_up.description << "\n";
    o.replay = replay_line(ctx);
  } else if (result.match(error)) {
    os << "error: " << error.description << "\n";
    o.replay = replay_line(ctx);
  }
  o.detail = os.str();
  return o;
}

}  // namespace kvq::props::bridge_detail

namespace kvq::props {

std::optional<std::vector<std::string>> reproduce_ids(const std::string& text) {
  try {
    const auto config = rc::detail::configFromString(text);
    if (config.reproduce.empty()) return std::nullopt;
    std::vector<std::string> ids;
    for (const auto& [id, r] : config.reproduce) ids.push_back(id);
    return ids;
  } catch (...) {  // RapidCheck's parse errors (a malformed string)
    return std::nullopt;
  }
}

}  // namespace kvq::props
