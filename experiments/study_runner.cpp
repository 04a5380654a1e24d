#include "experiments/study_runner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <mutex>
#include <ostream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "cli/untrusted.hpp"

#ifndef KVQ_COMMIT
#define KVQ_COMMIT "unknown"
#endif

namespace kvq::experiments {

std::string json_quoted(std::string_view s) {
  std::string q = "\"";
  for (const char c : s) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return q + "\"";
}

std::string json_list(const std::vector<std::string>& items) {
  std::string s = "[";
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + json_quoted(items[i]);
  return s + "]";
}

std::string csv_number(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  return os.str();
}

std::uint64_t name_hash(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

std::string write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  return f ? "" : "cannot write " + path;
}

namespace {

std::string shard_suffix(int index, int count) {
  return count > 1 ? ".shard" + std::to_string(index) + "of" + std::to_string(count) : "";
}

std::string csv_text(const std::string& header, const std::vector<std::string>& rows) {
  std::string s = header + "\n";
  for (const std::string& r : rows) s += r + "\n";
  return s;
}

std::string manifest_text(const StudyGrid& grid, const StudyRun& run, std::size_t rows, double seconds,
                          const std::string& config_rows) {
  std::ostringstream os;
  os << "{\n  \"study\": " << json_quoted(grid.name) << ",\n  \"commit\": " << json_quoted(KVQ_COMMIT)
     << ",\n  \"device\": " << json_quoted(run.device) << ",\n  \"seed\": " << run.seed << ",\n  \"samples_requested\": " << run.samples
     << ",\n  \"shard\": " << json_quoted(std::to_string(run.shard_index) + "/" + std::to_string(run.shard_count))
     << ",\n  \"jobs\": " << run.jobs << ",\n  \"configurations\": " << grid.labels.size() << ",\n  \"rows\": " << rows
     << ",\n  \"seconds\": " << seconds << ",\n  \"config_rows\": " << json_quoted(config_rows) << ",\n"
     << grid.manifest << "  \"csv\": " << json_quoted(grid.name + shard_suffix(run.shard_index, run.shard_count) + ".csv")
     << "\n}\n";
  return os.str();
}

}  // namespace

std::string run_study(const StudyGrid& grid, const StudyRun& run, std::ostream& progress, std::ostream& out) {
  if (run.shard_count <= 0 || run.shard_index < 0 || run.shard_index >= run.shard_count)
    return "--shard I/N needs 0 <= I < N";
  if (run.jobs <= 0) return "--jobs must be > 0";
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < grid.labels.size(); ++i)
    if (static_cast<int>(i % run.shard_count) == run.shard_index) mine.push_back(i);
  std::vector<std::vector<std::string>> rows(mine.size());
  std::vector<std::string> errors(mine.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};  // the first error stops the run
  std::size_t done = 0;
  std::mutex lock;
  const auto start = std::chrono::steady_clock::now();
  auto seconds_since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto worker = [&] {
    for (std::size_t k; !failed && (k = next++) < mine.size();) {
      try {
        rows[k] = grid.run(mine[k]);
      } catch (const std::exception& e) {
        errors[k] = grid.labels[mine[k]] + ": " + e.what();
        failed = true;
      }
      const std::lock_guard<std::mutex> guard(lock);
      const double t = seconds_since_start();
      ++done;
      progress << "[" << done << "/" << mine.size() << "] " << grid.name << " " << grid.labels[mine[k]] << "  ("
               << std::fixed << std::setprecision(1) << t << " s, about "
               << t / static_cast<double>(done) * static_cast<double>(mine.size() - done) << " s left)\n"
               << std::defaultfloat << std::flush;
    }
  };
  std::vector<std::thread> threads;
  const int jobs = std::min<int>(run.jobs, static_cast<int>(std::max<std::size_t>(mine.size(), 1)));
  for (int j = 1; j < jobs; ++j) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) return e;
  const double seconds = seconds_since_start();

  std::vector<std::string> all;
  std::string config_rows;
  for (std::size_t k = 0; k < mine.size(); ++k) {
    config_rows += (k ? " " : "") + std::to_string(mine[k]) + ":" + std::to_string(rows[k].size());
    all.insert(all.end(), rows[k].begin(), rows[k].end());
  }
  std::error_code ec;
  std::filesystem::create_directories(run.dir, ec);
  if (ec) return "cannot create --out " + run.dir + ": " + ec.message();
  const std::string stem = run.dir + "/" + grid.name + shard_suffix(run.shard_index, run.shard_count);
  if (auto e = write_text_file(stem + ".csv", csv_text(grid.header, all)); !e.empty()) return e;
  if (auto e = write_text_file(stem + ".json", manifest_text(grid, run, all.size(), seconds, config_rows)); !e.empty())
    return e;
  out << "kvq study " << grid.name << ": " << mine.size() << " configurations, " << all.size() << " rows in "
      << seconds << " s -> " << stem << ".csv, .json\n";
  if (run.shard_count == 1 && grid.finish) return grid.finish(run.dir, all);
  return {};
}

namespace {

std::string read_file(const std::string& path, bool* ok) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  *ok = static_cast<bool>(f);
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) lines.push_back(line);
  return lines;
}

// The value of a one-line member "  \"key\": value," of a manifest, without quotes and comma.
std::string member(const std::vector<std::string>& lines, const std::string& key) {
  const std::string prefix = "  \"" + key + "\": ";
  for (const std::string& l : lines)
    if (l.rfind(prefix, 0) == 0) {
      std::string v = l.substr(prefix.size());
      if (!v.empty() && v.back() == ',') v.pop_back();
      if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  return {};
}

}  // namespace

std::vector<std::string> sharded_studies(const std::string& dir) {
  std::set<std::string> names;
  const std::regex shard_file(R"(([a-z0-9_-]+)\.shard[0-9]+of[0-9]+\.csv)");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, m, shard_file)) names.insert(m[1]);
  }
  return {names.begin(), names.end()};
}

std::string merge_study(const std::string& dir, const std::string& study,
                        const std::function<std::string(const std::string&, const std::vector<std::string>&)>& finish,
                        std::ostream& out) {
  const std::regex shard_file(study + R"(\.shard([0-9]+)of([0-9]+)\.csv)");
  std::map<int, std::set<int>> found;  // N -> the I present
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (!std::regex_match(file, m, shard_file)) continue;
    const auto index = cli::parse_integer(m[1].str(), 0, kMaxShards - 1), count = cli::parse_integer(m[2].str(), 1, kMaxShards);
    if (!index || !count || *index >= *count)
      return "merge " + study + ": " + file + " does not name a shard I of N with 0 <= I < N <= " + std::to_string(kMaxShards);
    found[static_cast<int>(*count)].insert(static_cast<int>(*index));
  }
  if (ec) return "cannot read --out " + dir + ": " + ec.message();
  if (found.size() != 1) return "merge " + study + ": expected the shards of one N in " + dir + ", found " +
                                std::to_string(found.size()) + " shard counts";
  const int count = found.begin()->first;
  for (int i = 0; i < count; ++i)
    if (!found.begin()->second.count(i))
      return "merge " + study + ": shard " + std::to_string(i) + "/" + std::to_string(count) + " is missing in " + dir;

  std::map<std::size_t, std::vector<std::string>> by_config;
  std::string header;
  std::vector<std::string> manifest0;
  std::size_t configurations = 0;
  double seconds = 0;
  for (int i = 0; i < count; ++i) {
    const std::string stem = dir + "/" + study + shard_suffix(i, count);
    bool ok_csv = false, ok_json = false;
    const std::vector<std::string> csv = lines_of(read_file(stem + ".csv", &ok_csv));
    const std::vector<std::string> manifest = lines_of(read_file(stem + ".json", &ok_json));
    if (!ok_csv || !ok_json || csv.empty()) return "merge " + study + ": cannot read " + stem + ".csv and .json";
    const auto configs = cli::parse_integer(member(manifest, "configurations"), 0, kMaxConfigurations);
    const auto shard_seconds = cli::parse_finite(member(manifest, "seconds"));
    if (!configs || !shard_seconds)
      return "merge " + study + ": " + stem + ".json lacks \"configurations\" (an integer) or \"seconds\" (a number)";
    if (i == 0) {
      header = csv[0];
      manifest0 = manifest;
      configurations = static_cast<std::size_t>(*configs);
    } else if (csv[0] != header || static_cast<std::size_t>(*configs) != configurations) {
      return "merge " + study + ": " + stem + " is from a different grid (header or configurations differ)";
    }
    seconds += *shard_seconds;
    std::size_t line = 1;
    std::stringstream spans(member(manifest, "config_rows"));
    for (std::string span; spans >> span;) {
      const auto colon = span.find(':');
      const auto config_index = colon == std::string::npos ? std::nullopt : cli::parse_integer(span.substr(0, colon), 0, *configs - 1);
      const auto rows = colon == std::string::npos ? std::nullopt : cli::parse_integer(span.substr(colon + 1), 0, static_cast<std::int64_t>(csv.size()));
      if (!config_index || !rows)
        return "merge " + study + ": " + stem + ".json: \"config_rows\" entry '" + span + "' is not CONFIG:ROWS of its grid";
      const auto config = static_cast<std::size_t>(*config_index), n = static_cast<std::size_t>(*rows);
      if (line + n > csv.size()) return "merge " + study + ": " + stem + ".csv has fewer rows than its manifest lists";
      by_config[config].assign(csv.begin() + static_cast<std::ptrdiff_t>(line),
                               csv.begin() + static_cast<std::ptrdiff_t>(line + n));
      line += n;
    }
    if (line != csv.size()) return "merge " + study + ": " + stem + ".csv has more rows than its manifest lists";
  }
  if (by_config.size() != configurations)
    return "merge " + study + ": the shards hold " + std::to_string(by_config.size()) + " of " +
           std::to_string(configurations) + " configurations";
  std::vector<std::string> rows;
  std::string config_rows;
  for (const auto& [config, lines] : by_config) {
    config_rows += (config ? " " : "") + std::to_string(config) + ":" + std::to_string(lines.size());
    rows.insert(rows.end(), lines.begin(), lines.end());
  }
  std::string manifest;
  for (const std::string& l : manifest0) {
    std::string line = l;
    auto set = [&](const std::string& key, const std::string& value) {
      if (l.rfind("  \"" + key + "\": ", 0) == 0) line = "  \"" + key + "\": " + value + (l.back() == ',' ? "," : "");
    };
    set("shard", json_quoted("merged from " + std::to_string(count) + " shards"));
    set("rows", std::to_string(rows.size()));
    set("seconds", csv_number(seconds));
    set("config_rows", json_quoted(config_rows));
    set("csv", json_quoted(study + ".csv"));
    manifest += line + "\n";
  }
  if (auto e = write_text_file(dir + "/" + study + ".csv", csv_text(header, rows)); !e.empty()) return e;
  if (auto e = write_text_file(dir + "/" + study + ".json", manifest); !e.empty()) return e;
  out << "kvq study merge: " << study << " from " << count << " shards, " << rows.size() << " rows -> " << dir << "/"
      << study << ".csv, .json\n";
  return finish ? finish(dir, rows) : "";
}

}  // namespace kvq::experiments
