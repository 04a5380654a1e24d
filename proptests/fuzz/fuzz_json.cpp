// parse_json on any text: a message saying at which byte, or a tree whose nesting is bounded (a
// hostile manifest must not exhaust the stack) and whose kinds match what they hold.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/json.hpp"
#include "proptests/fuzz/fuzz_target.hpp"

namespace {

using kvq::cli::Json;
using kvq::fuzz::require;

// json.cpp stops at 64 levels; the corpus holds 2000-deep text, so a parser that lost its bound
// fails here, not only through a stack overflow at a depth the corpus's small files cannot reach.
constexpr int kDeepestAccepted = 256;

// Whether v holds values nested more than `levels` deep (a scalar or an empty container is 0 deep);
// checks on the way that only arrays hold items and only objects hold members.
bool deeper_than(const Json& v, int levels) {
  require(v.kind == Json::Kind::array || v.items.empty(), "only an array holds items");
  require(v.kind == Json::Kind::object || v.members.empty(), "only an object holds members");
  if (v.items.empty() && v.members.empty()) return false;
  if (levels == 0) return true;
  for (const Json& item : v.items)
    if (deeper_than(item, levels - 1)) return true;
  for (const auto& [key, member] : v.members)
    if (deeper_than(member, levels - 1)) return true;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Json json;
  const std::string error = kvq::cli::parse_json(text, &json);
  if (!error.empty()) {
    require(error.find(" at byte ") != std::string::npos, "parse_json's message says at which byte");
    return 0;
  }
  require(!deeper_than(json, kDeepestAccepted), "parse_json bounds the nesting");
  return 0;
}
