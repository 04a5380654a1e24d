// The one runner behind every `kvq study`: a study is a grid of configurations, each a pure
// function of its index (its data come from the seed), so any slice of the grid (a shard) can run
// anywhere and the shards merge into exactly the file one full run writes. The runner spreads the
// configurations over threads, prints progress, and writes DIR/<study>.csv plus a JSON manifest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace kvq::experiments {

struct StudyGrid {
  std::string name;                  // file stem and the manifest's "study"
  std::string header;                // the CSV header line, no newline
  std::vector<std::string> labels;   // one per configuration: what progress prints
  std::function<std::vector<std::string>(std::size_t)> run;  // the CSV lines (no newline) of configuration i
  std::string manifest;              // study-specific JSON members, each "  \"key\": value,\n"
  // After a complete grid (a full run or a merge): derived files from the rows; "" or an error.
  std::function<std::string(const std::string& dir, const std::vector<std::string>& rows)> finish;
};

inline constexpr int kMaxShards = 100000;                      // --shard I/N: N at most this
inline constexpr std::int64_t kMaxConfigurations = std::int64_t{1} << 30;  // a grid's configurations

struct StudyRun {
  std::string dir;
  int shard_index = 0, shard_count = 1;  // run configurations with i % count == index (count <= kMaxShards)
  int jobs = 1;                          // threads
  std::uint64_t seed = 0;
  std::int64_t samples = 0;
  std::string device = "cpu";            // for the manifest
};

// "" or a message naming the argument. Prints one progress line per configuration to `progress`
// and the files written to `out`.
std::string run_study(const StudyGrid& grid, const StudyRun& run, std::ostream& progress, std::ostream& out);

// Joins DIR/<study>.shardIofN.csv (all I of one N) into DIR/<study>.csv and .json, in the order of a
// full run; `finish` (may be empty) then runs as after a full run.
std::string merge_study(const std::string& dir, const std::string& study,
                        const std::function<std::string(const std::string&, const std::vector<std::string>&)>& finish,
                        std::ostream& out);

// The studies with shards in DIR (file stems of *.shard*of*.csv).
std::vector<std::string> sharded_studies(const std::string& dir);

// Small shared helpers.
std::string json_quoted(std::string_view s);
std::string json_list(const std::vector<std::string>& items);  // ["a", "b"]
std::string csv_number(double v);                               // 17 significant digits
std::uint64_t name_hash(std::string_view s);                    // FNV-1a
// The samples of a distribution depend on (seed, name) only, so every recipe sees the same data.
inline std::uint64_t data_seed(std::uint64_t seed, std::string_view name) { return seed ^ name_hash(name); }
std::string write_text_file(const std::string& path, const std::string& text);  // "" or an error

}  // namespace kvq::experiments
