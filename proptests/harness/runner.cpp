#include "proptests/harness/runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace kvq::props {

std::vector<const Property*> select(const Selection& s) {
  std::vector<const Property*> out;
  for (const Property& p : registry()) {
    if (!s.property.empty() && p.id() != s.property) continue;
    if (!s.suites.empty() && std::find(s.suites.begin(), s.suites.end(), p.suite) == s.suites.end()) continue;
    const std::string id = p.id();
    if (!s.matches.empty() && std::none_of(s.matches.begin(), s.matches.end(), [&](const std::string& m) {
          return id.find(m) != std::string::npos;
        }))
      continue;
    if ((p.device == Device::cpu && !s.cpu) || (p.device == Device::cuda && !s.cuda)) continue;
    out.push_back(&p);
  }
  return out;
}

std::vector<Result> run_properties(const std::vector<const Property*>& properties, const RunOptions& options,
                                   std::ostream& log) {
  std::vector<Result> results;
  const bool tty = isatty(STDERR_FILENO) != 0;
  const std::size_t total = properties.size();
  log << "kvq check: " << total << " properties, seed " << options.seed << ", " << options.cases
      << " random cases each\n";
  for (std::size_t i = 0; i < total; ++i) {
    const Property& p = *properties[i];
    RunContext ctx;
    ctx.id = p.id();
    ctx.base_seed = options.seed;
    ctx.seed = derive_seed(options.seed, ctx.id);
    ctx.cases = options.cases;
    ctx.reproduce = options.reproduce;
    std::ostringstream head;
    head << "[" << std::setw(4) << i + 1 << "/" << total << "] " << name_of(p.device) << " " << ctx.id;
    auto last = std::chrono::steady_clock::now();
    ctx.progress = [&](double fraction) {  // a live percentage on a terminal, a line a minute in a log
      const auto now = std::chrono::steady_clock::now();
      const double since = std::chrono::duration<double>(now - last).count();
      if (tty && since > 0.2) {
        log << "\r" << head.str() << " " << std::fixed << std::setprecision(0) << 100 * fraction << "%" << std::flush;
        last = now;
      } else if (!tty && since > 60) {
        log << head.str() << " " << std::fixed << std::setprecision(0) << 100 * fraction << "% ...\n" << std::flush;
        last = now;
      }
    };
    Result r;
    r.id = ctx.id;
    r.suite = p.suite;
    r.device = p.device;
    const auto start = std::chrono::steady_clock::now();
    try {
      r.outcome = p.run(ctx);
    } catch (const std::exception& e) {
      r.outcome.status = Status::failed;
      r.outcome.detail = std::string("exception: ") + e.what();
      r.outcome.replay = replay_line(ctx);
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    log << (tty ? "\r" : "") << head.str() << "  " << name_of(r.outcome.status) << "  " << r.outcome.cases
        << " cases  " << std::fixed << std::setprecision(2) << r.seconds << " s";
    if (r.outcome.status == Status::skipped) log << "  (" << r.outcome.detail << ")";
    log << "\n" << std::flush;
    if (r.outcome.status == Status::failed) {
      log << r.outcome.detail << "replay: " << r.outcome.replay << "\n" << std::flush;
    }
    results.push_back(std::move(r));
  }
  return results;
}

Totals totals(const std::vector<Result>& results) {
  Totals t;
  for (const auto& r : results) {
    switch (r.outcome.status) {
      case Status::passed: ++t.passed; break;
      case Status::failed: ++t.failed; break;
      case Status::skipped: ++t.skipped; break;
    }
  }
  return t;
}

void print_summary(const std::vector<Result>& results, std::ostream& os) {
  std::size_t width = 8;
  for (const auto& r : results) width = std::max(width, r.id.size());
  os << "\n" << std::left << std::setw(static_cast<int>(width)) << "property" << "  device  "
     << std::setw(12) << "cases" << std::setw(9) << "result" << "seconds\n";
  for (const auto& r : results) {
    os << std::left << std::setw(static_cast<int>(width)) << r.id << "  " << std::setw(6) << name_of(r.device) << "  "
       << std::setw(12) << r.outcome.cases << std::setw(9) << name_of(r.outcome.status) << std::fixed
       << std::setprecision(2) << r.seconds;
    for (const auto& [k, v] : r.outcome.metrics) os << "  " << k << "=" << std::setprecision(3) << v;
    os << "\n";
  }
  const Totals t = totals(results);
  os << t.passed << " passed, " << t.failed << " failed, " << t.skipped << " skipped\n";
}

void print_failures(const std::vector<Result>& results, std::ostream& os) {
  for (const auto& r : results) {
    if (r.outcome.status != Status::failed) continue;
    os << "\nFAILED " << r.id << "\n" << r.outcome.detail << "replay: " << r.outcome.replay << "\n";
  }
}

namespace {
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}
}  // namespace

std::string json_report(const std::vector<Result>& results, const RunOptions& options) {
  std::ostringstream os;
  const Totals t = totals(results);
  os << "{\n  \"seed\": " << options.seed << ",\n  \"cases\": " << options.cases << ",\n  \"passed\": " << t.passed
     << ",\n  \"failed\": " << t.failed << ",\n  \"skipped\": " << t.skipped << ",\n  \"properties\": [\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    os << "    {\"property\": " << json_string(r.id) << ", \"suite\": " << json_string(r.suite)
       << ", \"device\": " << json_string(name_of(r.device)) << ", \"result\": " << json_string(name_of(r.outcome.status))
       << ", \"cases\": " << r.outcome.cases << ", \"seconds\": " << std::setprecision(6) << r.seconds;
    if (!r.outcome.detail.empty()) os << ", \"detail\": " << json_string(r.outcome.detail);
    if (!r.outcome.replay.empty()) os << ", \"replay\": " << json_string(r.outcome.replay);
    if (!r.outcome.metrics.empty()) {
      os << ", \"metrics\": {";
      for (std::size_t k = 0; k < r.outcome.metrics.size(); ++k)
        os << (k ? ", " : "") << json_string(r.outcome.metrics[k].first) << ": " << r.outcome.metrics[k].second;
      os << "}";
    }
    if (!r.outcome.classes.empty()) {
      os << ", \"classes\": {";
      for (std::size_t k = 0; k < r.outcome.classes.size(); ++k)
        os << (k ? ", " : "") << json_string(r.outcome.classes[k].first) << ": " << r.outcome.classes[k].second;
      os << "}";
    }
    os << "}" << (i + 1 < results.size() ? "," : "") << "\n";
  }
  os << "  ]\n}\n";
  return os.str();
}

}  // namespace kvq::props
