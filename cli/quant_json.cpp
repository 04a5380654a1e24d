#include "cli/quant_json.hpp"

#include <cstdio>
#include <optional>

#include "cli/json.hpp"
#include "cli/untrusted.hpp"
#include "formats/recipes.hpp"

namespace kvq::cli {

std::string read_quant_json(const std::string& text, const std::string& path, QuantJson* out) {
  Json json;
  if (auto e = parse_json(text, &json); !e.empty() || json.kind != Json::Kind::object)
    return path + " is not a JSON object" + (e.empty() ? "" : ": " + e);
  const Json* recipe = json.get("recipe");
  if (!recipe || recipe->kind != Json::Kind::string) return path + ": \"recipe\" must be a string";
  out->recipe = recipe->text;
  // An integer member in [min, max], or a message naming it.
  const auto integer = [&](const char* key, std::int64_t min, std::int64_t max, std::int64_t* v) -> std::string {
    const Json* m = json.get(key);
    const auto i = m && m->kind == Json::Kind::number ? integer_of(m->number, min, max) : std::nullopt;
    if (!i) return path + ": \"" + key + "\" must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    *v = *i;
    return {};
  };
  std::int64_t block = 0;
  if (auto e = integer("rows", 0, kMaxJsonInteger, &out->rows); !e.empty()) return e;
  if (auto e = integer("cols", 1, kMaxJsonInteger, &out->cols); !e.empty()) return e;
  if (auto e = integer("block", 1, kMaxRecipeBlock, &block); !e.empty()) return e;
  out->block = static_cast<int>(block);
  const Json* bits = json.get("tensor_scale_bits");
  const auto g = bits && bits->kind == Json::Kind::string && bits->text.size() == 10 ? parse_hex(bits->text, 32) : std::nullopt;
  if (!g) return path + ": \"tensor_scale_bits\" must be the FP32 bits as \"0x\" and 8 hex digits";
  out->tensor_scale_bits = static_cast<std::uint32_t>(*g);
  return {};
}

std::string json_float(float v) {
  if (v != v) return "\"nan\"";
  if (v - v != 0.0f) return v > 0 ? "\"inf\"" : "\"-inf\"";
  char text[64];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(v));
  return text;
}

}  // namespace kvq::cli
