#include "cli/json.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace kvq::cli {

const Json* Json::get(const std::string& key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

namespace {

struct Parser {
  const std::string& s;
  std::size_t p = 0;
  std::string error;
  std::size_t values = 0;

  void space() {
    while (p < s.size() && (s[p] == ' ' || s[p] == '\n' || s[p] == '\r' || s[p] == '\t')) ++p;
  }
  bool fail(const std::string& what) {
    if (error.empty()) error = what + " at byte " + std::to_string(p);
    return false;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (s.compare(p, w.size(), w) != 0) return fail("unexpected text");
    p += w.size();
    return true;
  }
  bool string(std::string* out) {
    if (p >= s.size() || s[p] != '"') return fail("expected a string");
    for (++p; p < s.size() && s[p] != '"'; ++p) {
      if (s[p] != '\\') {
        *out += s[p];
        continue;
      }
      if (++p >= s.size()) break;
      const char e = s[p];
      if (e == 'n') *out += '\n';
      else if (e == 't') *out += '\t';
      else if (e == 'u') {  // kept as '?': manifests are ASCII names and paths
        for (int i = 1; i <= 4; ++i)
          if (p + i >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[p + i]))) return fail("bad \\u escape");
        p += 4;
        *out += '?';
      } else *out += e;
    }
    if (p >= s.size()) return fail("unterminated string");
    ++p;
    return true;
  }
  bool value(Json* out, int depth) {
    if (depth > 64) return fail("nesting too deep");
    if (++values > kMaxJsonValues) return fail("more than " + std::to_string(kMaxJsonValues) + " values");
    space();
    if (p >= s.size()) return fail("unexpected end");
    const char c = s[p];
    if (c == '{') {
      out->kind = Json::Kind::object;
      ++p;
      space();
      if (p < s.size() && s[p] == '}') return ++p, true;
      while (true) {
        space();
        std::string key;
        if (!string(&key)) return false;
        space();
        if (p >= s.size() || s[p] != ':') return fail("expected ':'");
        ++p;
        Json v;
        if (!value(&v, depth + 1)) return false;
        out->members.emplace_back(std::move(key), std::move(v));
        space();
        if (p < s.size() && s[p] == ',') { ++p; continue; }
        if (p < s.size() && s[p] == '}') return ++p, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      out->kind = Json::Kind::array;
      ++p;
      space();
      if (p < s.size() && s[p] == ']') return ++p, true;
      while (true) {
        Json v;
        if (!value(&v, depth + 1)) return false;
        out->items.push_back(std::move(v));
        space();
        if (p < s.size() && s[p] == ',') { ++p; continue; }
        if (p < s.size() && s[p] == ']') return ++p, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      out->kind = Json::Kind::string;
      return string(&out->text);
    }
    if (c == 't' || c == 'f') {
      out->kind = Json::Kind::boolean;
      out->boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') return literal("null");
    // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, then strtod over exactly that text
    const auto digits = [&] {
      const std::size_t from = p;
      while (p < s.size() && s[p] >= '0' && s[p] <= '9') ++p;
      return p > from;
    };
    const std::size_t start = p;
    if (p < s.size() && s[p] == '-') ++p;
    if (p < s.size() && s[p] == '0') {
      ++p;
    } else if (!digits()) {
      p = start;
      return fail("unexpected character");
    }
    if (p < s.size() && s[p] == '.' && (++p, !digits())) return fail("expected digits after '.'");
    if (p < s.size() && (s[p] == 'e' || s[p] == 'E')) {
      ++p;
      if (p < s.size() && (s[p] == '+' || s[p] == '-')) ++p;
      if (!digits()) return fail("expected digits in the exponent");
    }
    out->kind = Json::Kind::number;
    out->number = std::strtod(s.substr(start, p - start).c_str(), nullptr);
    if (!std::isfinite(out->number)) return fail("number out of range");
    return true;
  }
};

}  // namespace

std::string parse_json(const std::string& text, Json* out) {
  Parser parser{text, 0, {}};
  *out = Json{};
  if (parser.value(out, 0)) {
    parser.space();
    if (parser.p != text.size()) parser.fail("text after the value");
  }
  return parser.error;
}

}  // namespace kvq::cli
