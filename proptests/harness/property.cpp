#include "proptests/harness/property.hpp"

#include <sstream>

namespace kvq::props {

const char* name_of(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }
const char* name_of(Status s) {
  switch (s) {
    case Status::passed: return "passed";
    case Status::failed: return "FAILED";
    case Status::skipped: return "skipped";
  }
  return "?";
}

std::vector<Property>& registry() {
  static std::vector<Property> properties;
  return properties;
}

void add_property(std::string suite, std::string name, Device device, PropertyFn fn) {
  registry().push_back(Property{std::move(suite), std::move(name), device, std::move(fn)});
}

std::uint64_t derive_seed(std::uint64_t base, const std::string& id) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the id, then one splitmix64 step
  for (const unsigned char ch : id) h = (h ^ ch) * 0x100000001b3ull;
  std::uint64_t z = base ^ h;
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string replay_line(const RunContext& ctx, const std::string& reproduce) {
  std::ostringstream os;
  os << "kvq check --property '" << ctx.id << "' --seed " << ctx.base_seed << " --cases " << ctx.cases;
  if (!reproduce.empty()) os << " --reproduce '" << reproduce << "'";
  return os.str();
}

Outcome skipped(std::string why) {
  Outcome o;
  o.status = Status::skipped;
  o.detail = std::move(why);
  return o;
}

void Tally::fail(const std::string& line) {
  ++checked_;
  ++failures_;
  if (first_.size() < keep_) first_.push_back(line);
}

void Tally::merge(const Tally& other) {
  checked_ += other.checked_;
  failures_ += other.failures_;
  for (const auto& line : other.first_)
    if (first_.size() < keep_) first_.push_back(line);
}

Outcome Tally::outcome(const RunContext& ctx, const std::string& replay) const {
  Outcome o;
  o.cases = checked_;
  if (failures_ == 0) return o;
  o.status = Status::failed;
  std::ostringstream os;
  os << failures_ << " of " << checked_ << " inputs differ; first:\n";
  for (const auto& line : first_) os << "  " << line << "\n";
  o.detail = os.str();
  o.replay = replay.empty() ? replay_line(ctx) : replay;
  return o;
}

}  // namespace kvq::props
