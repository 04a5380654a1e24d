// A small JSON reader for manifests (objects, arrays, strings, numbers, true/false/null).
#pragma once

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

  const Json* get(const std::string& key) const;  // an object's member, or nullptr
};

// "" on success, else what is wrong and at which byte.
std::string parse_json(const std::string& text, Json* out);

}  // namespace kvq::cli
