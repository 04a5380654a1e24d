// A small JSON reader for manifests (objects, arrays, strings, numbers, true/false/null).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace kvq::cli {

struct Json {
  enum class Kind { null, boolean, number, string, array, object } kind = Kind::null;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  Json() {}  // user-provided: clang with libstdc++ 12 would otherwise check the pair while Json is incomplete

  const Json* get(const std::string& key) const;  // an object's member, or nullptr
};

// "" on success, else what is wrong and at which byte. Strict JSON (no hex, inf or nan numbers);
// at most kMaxJsonValues values (a value costs about 100 bytes of memory) nested 64 deep.
inline constexpr std::size_t kMaxJsonValues = 1 << 21;
std::string parse_json(const std::string& text, Json* out);

}  // namespace kvq::cli
