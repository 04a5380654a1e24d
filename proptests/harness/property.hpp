// Properties as data: a registry that both the doctest suite and `kvq check` run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kvq::props {

enum class Device { cpu, cuda };
enum class Status { passed, failed, skipped };

const char* name_of(Device d);
const char* name_of(Status s);

struct Outcome {
  Status status = Status::passed;
  std::uint64_t cases = 0;  // inputs checked
  std::string detail;       // failure: the minimal input, expected and actual; skip: why
  std::string replay;       // one command line that reruns exactly this failure
  std::vector<std::pair<std::string, int>> classes;       // what the generators covered
  std::vector<std::pair<std::string, double>> metrics;  // e.g. sweep milliseconds
};

struct RunContext {
  std::string id;
  std::uint64_t base_seed = 0;
  std::uint64_t seed = 0;  // derived from base_seed and id
  int cases = 1000;        // random cases per property
  std::string reproduce;   // RapidCheck reproduce string from a printed replay line
  std::function<void(double)> progress = [](double) {};
};

using PropertyFn = std::function<Outcome(const RunContext&)>;

struct Property {
  std::string suite;
  std::string name;
  Device device = Device::cpu;
  PropertyFn run;
  std::string id() const { return suite + "/" + name; }
};

std::vector<Property>& registry();
void add_property(std::string suite, std::string name, Device device, PropertyFn fn);

// Registers a family of properties once, before main.
#define KVQ_REGISTER_PROPERTIES(function) \
  [[maybe_unused]] static const bool kvq_registered_##function = (function(), true)

std::uint64_t derive_seed(std::uint64_t base, const std::string& id);
inline constexpr std::uint64_t kDefaultSeed = 20261122;

// The command line that replays one property.
std::string replay_line(const RunContext& ctx, const std::string& reproduce = {});

Outcome skipped(std::string why);

// Collects mismatches of a deterministic sweep; the first few are kept for the report.
class Tally {
 public:
  explicit Tally(std::size_t keep = 8) : keep_(keep) {}
  void pass() { ++checked_; }
  void fail(const std::string& line);
  void merge(const Tally& other);  // sums counts, keeps the first lines of both
  bool ok() const { return failures_ == 0; }
  std::uint64_t checked() const { return checked_; }
  std::uint64_t failures() const { return failures_; }
  Outcome outcome(const RunContext& ctx, const std::string& replay = {}) const;

 private:
  std::size_t keep_;
  std::uint64_t checked_ = 0;
  std::uint64_t failures_ = 0;
  std::vector<std::string> first_;
};

}  // namespace kvq::props
