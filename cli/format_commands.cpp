// kvq formats | table | encode | decode | docs formats
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/commands.hpp"
#include "cli/input_parsing.hpp"
#include "formats/float_bits.hpp"
#include "formats/names.hpp"
#include "formats/recipe_names.hpp"
#include "oracle/oracle.hpp"

namespace kvq::cli {
namespace {

std::string joined(auto const& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

std::optional<FormatId> format_argument(const std::string& name, const char* command, std::ostream& err) {
  const auto id = format_from_name(name);
  if (!id) err << "kvq " << command << ": unknown format '" << name << "' (known: " << joined(kFormatNames) << ")\n";
  return id;
}

std::string hex(Format f, std::uint64_t code) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setfill('0') << std::setw(f.bits() <= 8 ? 2 : (f.bits() + 3) / 4) << code;
  return os.str();
}

// The output line (with its '\n') of every code of f where f has at most 16 bits (else none): a
// stream of codes then costs a lookup a line.
template <typename Text>
std::vector<std::string> code_lines(Format f, Text text) {
  std::vector<std::string> out;
  if (f.bits() <= 16)
    for (std::uint64_t c = 0; c < f.code_count(); ++c) out.push_back(text(c) + "\n");
  return out;
}

struct BadLine {
  std::size_t number = 0;  // from 1, blank and comment lines counted
  std::string text;
};

// The lines of `in` converted into `out`: convert(text, &output) appends the output line of a
// meaningful line's text, or returns false for a bad line. A block of input (about 1 MiB) at a
// time, its two halves on two threads (encode and decode stream tens of millions of lines), the
// output written in input order, a write a block. At the first bad line: the lines before it
// written, its number and text in *bad. Exit 2 for a read or write error, naming the stream.
template <typename Convert>
int convert_stream(const char* command, std::istream& in, std::ostream& out, std::ostream& err, Convert convert,
                   std::optional<BadLine>* bad) {
  struct Part {
    std::string out;
    std::size_t lines = 0;
    std::optional<BadLine> bad;
  };
  const auto run = [&](std::string_view text, Part* p) {
    while (!text.empty()) {
      const std::string_view line = take_line(&text);
      ++p->lines;
      const auto meant = meaningful(line);
      if (meant && !convert(*meant, &p->out)) {
        p->bad = BadLine{p->lines, std::string(*meant)};
        return;
      }
    }
  };
  const bool two = std::thread::hardware_concurrency() > 1;
  LineReader lines(in);
  std::string_view block;
  for (std::size_t base = 0; lines.next_block(&block);) {
    const auto cut = two ? block.find('\n', block.size() / 2) : std::string_view::npos;
    const std::string_view first = cut == std::string_view::npos ? block : block.substr(0, cut + 1);
    const std::string_view second = cut == std::string_view::npos ? std::string_view() : block.substr(cut + 1);
    Part a, b;
    std::thread helper;
    if (!second.empty()) helper = std::thread(run, second, &b);
    run(first, &a);
    if (helper.joinable()) helper.join();
    out.write(a.out.data(), static_cast<std::streamsize>(a.out.size()));
    if (!a.bad) out.write(b.out.data(), static_cast<std::streamsize>(b.out.size()));
    if (a.bad || b.bad) {
      *bad = a.bad ? a.bad : b.bad;
      (*bad)->number += base + (a.bad ? 0 : a.lines);
      break;
    }
    base += a.lines + b.lines;
    if (!out) break;
  }
  if (!out.flush()) {
    err << "kvq " << command << ": cannot write standard output\n";
    return 2;
  }
  if (!*bad && lines.failed()) {
    err << "kvq " << command << ": cannot read standard input\n";
    return 2;
  }
  return 0;
}

std::string field_bits(Format f, std::uint64_t code) {  // "0.1111.110"
  std::string s;
  for (int i = f.bits() - 1; i >= 0; --i) {
    s += ((code >> i) & 1) ? '1' : '0';
    const bool after_sign = f.is_signed && i == f.bits() - 1;
    const bool after_exponent = i == f.mantissa_bits && f.mantissa_bits > 0;
    if (after_sign || after_exponent) s += '.';
  }
  return s;
}

std::string exact_text(Format f, std::uint64_t code) {
  const oracle::Real r = oracle::real_of(f, code);
  if (r.kind == ValueKind::nan) return r.negative ? "-nan" : "nan";
  if (r.kind == ValueKind::infinity) return r.negative ? "-inf" : "inf";
  if (r.kind == ValueKind::zero) return r.negative ? "-0" : "0";
  return (r.negative ? "-" : "") + oracle::decimal_expansion(r.magnitude);
}

std::string allowed_roundings(std::uint8_t allowed) {
  std::string s;
  for (int r = 0; r < 6; ++r)
    if (allowed & (1u << r)) s += (s.empty() ? "" : "|") + std::string(kRoundingNames[r]);
  return s;
}

std::string hexfloat(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

}  // namespace

std::string formats_markdown() {
  std::ostringstream os;
  os << "## Formats\n\n| format | layout | bits | bias | max finite | min normal | min subnormal | inf | NaN codes |\n"
     << "|---|---|---|---|---|---|---|---|---|\n";
  for (int i = 0; i < kFormatCount; ++i) {
    const auto id = static_cast<FormatId>(i);
    const Format f = format_of(id);
    std::string nans;
    if (f.bits() <= 8) {
      for (std::uint64_t c = 0; c < f.code_count(); ++c)
        if (f.is_nan(c)) nans += (nans.empty() ? "" : " ") + hex(f, c);
      if (nans.size() > 40) nans = "exponent all ones, mantissa != 0";
    } else {
      nans = "exponent all ones, mantissa != 0";
    }
    os << "| " << name_of(id) << " | " << kFormatSummaries[i] << " | " << f.bits() << " | " << f.bias << " | "
       << hexfloat(max_finite(f)) << " | " << hexfloat(min_normal(f)) << " | "
       << (f.has_zero ? hexfloat(min_subnormal(f)) : std::string("none")) << " | "
       << (f.has_inf() ? "yes" : "no") << " | " << (nans.empty() ? "none" : nans) << " |\n";
  }
  os << "\n## Conventions (float32 -> format)\n\n"
     << "Rules as kvq models them; `-` means the library has no such cast. Roundings: the first is the default.\n\n"
     << "| convention | format | roundings | overflow | NaN rule | unsigned rule | quirk |\n|---|---|---|---|---|---|---|\n";
  static const char* overflow_names[] = {"saturate", "ieee", "nan"};
  static const char* nan_names[] = {"all_ones_keep_sign", "all_ones_positive", "quiet_keep_sign",
                                    "payload_keep_sign",  "max_positive",      "max_keep_sign",
                                    "zero_flipped_sign"};
  static const char* unsigned_names[] = {"absolute", "nonpositive_is_nan"};
  for (int c = 0; c < kConventionCount; ++c) {
    for (int i = 0; i < 4; ++i) {  // the small formats
      const auto conv = static_cast<ConventionId>(c);
      const auto fmt = static_cast<FormatId>(i);
      const ConventionRule rule = convention_rule(conv, fmt);
      os << "| " << name_of(conv) << " | " << name_of(fmt) << " | ";
      if (!rule.allowed) {
        os << "- | - | - | - | - |\n";
        continue;
      }
      std::string roundings = std::string(name_of(rule.conversion.rounding));
      const std::string others = allowed_roundings(rule.allowed & ~rounding_bit(rule.conversion.rounding));
      if (!others.empty()) roundings += "|" + others;
      std::replace(roundings.begin(), roundings.end(), '|', '/');  // '|' would split the table cell
      os << roundings << " | " << overflow_names[static_cast<int>(rule.conversion.overflow)] << " | "
         << nan_names[static_cast<int>(rule.conversion.nan)] << " | "
         << (format_of(fmt).is_signed ? "-" : unsigned_names[static_cast<int>(rule.conversion.unsigned_rule)])
         << " | " << (rule.conversion.lowest_binade_rounds_away ? "(2^-127, 2^-126) rounds up" : "-") << " |\n";
    }
  }
  // A few codes every reader checks first.
  os << "\n## Landmarks (kvq encode, default rounding)\n\n| input | ";
  for (int c = 0; c < kConventionCount; ++c) os << name_of(static_cast<ConventionId>(c)) << " | ";
  os << "\n|---|";
  for (int c = 0; c < kConventionCount; ++c) os << "---|";
  os << "\n";
  const std::pair<FormatId, float> landmarks[] = {
      {FormatId::e4m3fn, 464.0f},    {FormatId::e4m3fn, -500.0f},  {FormatId::e4m3fn, -NAN},
      {FormatId::e4m3fn, INFINITY},  {FormatId::e5m2, 61440.0f},   {FormatId::e5m2, NAN},
      {FormatId::e2m1, 5.0f},        {FormatId::e2m1, 0.25f},      {FormatId::e2m1, NAN},
      {FormatId::e2m1, -NAN},        {FormatId::e8m0fnu, 3.0f},    {FormatId::e8m0fnu, 0.0f},
      {FormatId::e8m0fnu, -1.0f},    {FormatId::e8m0fnu, 0x1p-130f}, {FormatId::e8m0fnu, INFINITY}};
  for (const auto& [fmt, x] : landmarks) {
    std::ostringstream input;
    input << name_of(fmt) << "(" << (x != x ? (std::signbit(x) ? "-nan" : "nan") : hexfloat(x)) << ")";
    os << "| " << input.str() << " | ";
    for (int c = 0; c < kConventionCount; ++c) {
      const ConventionRule rule = convention_rule(static_cast<ConventionId>(c), fmt);
      os << (rule.allowed ? hex(format_of(fmt), encode_float(format_of(fmt), rule.conversion, x)) : "-") << " | ";
    }
    os << "\n";
  }
  return os.str();
}

int formats_command(const Args& args, std::ostream& out, std::ostream& err) {
  if (!args.empty()) {
    err << "kvq formats: takes no arguments\n";
    return 2;
  }
  out << "formats:\n";
  for (int i = 0; i < kFormatCount; ++i) {
    const Format f = format_of(static_cast<FormatId>(i));
    out << "  " << std::left << std::setw(9) << kFormatNames[i] << kFormatSummaries[i] << "  (max " << max_finite(f)
        << ")\n";
  }
  out << "conventions (formats: roundings, default first):\n";
  for (int c = 0; c < kConventionCount; ++c) {
    out << "  " << std::left << std::setw(15) << kConventionNames[c] << kConventionSummaries[c] << "\n"
        << std::setw(17) << "";
    for (int i = 0; i < kFormatCount; ++i) {
      const ConventionRule rule = convention_rule(static_cast<ConventionId>(c), static_cast<FormatId>(i));
      if (rule.allowed)
        out << kFormatNames[i] << ": " << name_of(rule.conversion.rounding)
            << ((rule.allowed & ~rounding_bit(rule.conversion.rounding))
                    ? "|" + allowed_roundings(rule.allowed & ~rounding_bit(rule.conversion.rounding))
                    : "")
            << "  ";
    }
    out << "\n";
  }
  return 0;
}

int recipes_command(const Args& args, std::ostream& out, std::ostream& err) {
  if (!args.empty()) {
    err << "kvq recipes: takes no arguments\n";
    return 2;
  }
  std::size_t width = 0;  // the name column: the longest name and two spaces
  for (const NamedRecipe& r : kRecipes) width = std::max(width, r.name.size() + 2);
  out << std::left << std::setw(static_cast<int>(width)) << "recipe" << "element  block  scales\n";
  for (const NamedRecipe& r : kRecipes) {
    const std::string block = r.recipe.scale == BlockScale::tensor_only ? "tensor" : std::to_string(r.recipe.block);
    out << std::left << std::setw(static_cast<int>(width)) << r.name << std::setw(9) << name_of(r.recipe.element)
        << std::setw(7) << block << r.scales << "\n";
  }
  out << "Block recipes take any block size (16 and 32 are tested); all scales are decode scales.\n";
  return 0;
}

int table_command(const Args& args, std::ostream& out, std::ostream& err) {
  if (args.size() != 1) {
    err << "usage: kvq table FORMAT\n";
    return 2;
  }
  const auto id = format_argument(args[0], "table", err);
  if (!id) return 2;
  const Format f = format_of(*id);
  if (f.bits() > 16) {
    err << "kvq table: " << args[0] << " has 2^" << f.bits() << " codes; tables are for formats of at most 16 bits\n";
    return 2;
  }
  out << "code\tbits\tvalue\n";
  for (std::uint64_t c = 0; c < f.code_count(); ++c)
    out << hex(f, c) << "\t" << field_bits(f, c) << "\t" << exact_text(f, c) << "\n";
  return 0;
}

int encode_command(const Args& args, std::istream& in, std::ostream& out, std::ostream& err) {
  std::string format_name, convention_name = "ieee", rounding_name;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == "--convention" || args[i] == "--rounding") && i + 1 < args.size()) {
      (args[i] == "--convention" ? convention_name : rounding_name) = args[i + 1];
      ++i;
    } else if (format_name.empty() && !args[i].starts_with("--")) {
      format_name = args[i];
    } else {
      err << "kvq encode: unexpected argument '" << args[i] << "'\n"
          << "usage: kvq encode FORMAT --convention NAME [--rounding rne|rz|ru|rd|rna|rs|rnz]\n";
      return 2;
    }
  }
  if (format_name.empty()) {
    err << "usage: kvq encode FORMAT --convention NAME [--rounding rne|rz|ru|rd|rna|rs|rnz]\n";
    return 2;
  }
  const auto fmt = format_argument(format_name, "encode", err);
  if (!fmt) return 2;
  const auto conv = convention_from_name(convention_name);
  if (!conv) {
    err << "kvq encode: unknown convention '" << convention_name << "' (known: " << joined(kConventionNames) << ")\n";
    return 2;
  }
  const ConventionRule rule = convention_rule(*conv, *fmt);
  if (!rule.allowed) {
    err << "kvq encode: convention " << convention_name << " has no " << format_name << " cast\n";
    return 2;
  }
  Rounding rounding = rule.conversion.rounding;
  if (!rounding_name.empty()) {
    const auto r = rounding_from_name(rounding_name);
    if (!r) {
      err << "kvq encode: unknown rounding '" << rounding_name << "' (known: " << joined(kRoundingNames) << ")\n";
      return 2;
    }
    if (!(rule.allowed & rounding_bit(*r))) {
      err << "kvq encode: convention " << convention_name << " converts " << format_name << " with "
          << allowed_roundings(rule.allowed) << " only\n";
      return 2;
    }
    if (*r == Rounding::stochastic) {
      err << "kvq encode: stochastic rounding needs random bits per input; use the library API\n";
      return 2;
    }
    rounding = *r;
  }
  const Format f = format_of(*fmt);
  const Conversion c = convention_conversion(*conv, *fmt, rounding);
  const std::vector<std::string> codes = code_lines(f, [&](std::uint64_t code) { return hex(f, code); });
  std::optional<BadLine> bad;
  const int status = convert_stream("encode", in, out, err, [&](std::string_view text, std::string* line) {
    const auto bits = parse_fp32_bits(text);
    if (!bits) return false;
    const std::uint64_t code = encode(f, c, unpack(kFP32, *bits));
    *line += codes.empty() ? hex(f, code) + "\n" : codes[code];
    return true;
  }, &bad);
  if (bad) {
    err << "kvq encode: line " << bad->number << ": cannot read '" << bad->text
        << "' as FP32 (give bits 0x3f800000, a decimal, or a hex float)\n";
    return 2;
  }
  return status;
}

int decode_command(const Args& args, std::istream& in, std::ostream& out, std::ostream& err) {
  if (args.size() != 1) {
    err << "usage: kvq decode FORMAT   (codes on stdin, one a line: 0x7e or 126)\n";
    return 2;
  }
  const auto fmt = format_argument(args[0], "decode", err);
  if (!fmt) return 2;
  const Format f = format_of(*fmt);
  const std::vector<std::string> values = code_lines(f, [&](std::uint64_t code) { return exact_text(f, code); });
  std::optional<BadLine> bad;
  const int status = convert_stream("decode", in, out, err, [&](std::string_view text, std::string* line) {
    const auto code = parse_code(text, f.bits());
    if (!code) return false;
    *line += values.empty() ? exact_text(f, *code) + "\n" : values[*code];
    return true;
  }, &bad);
  if (bad) {
    err << "kvq decode: line " << bad->number << ": '" << bad->text << "' is not a " << args[0] << " code (0 to "
        << hex(f, f.code_count() - 1) << ")\n";
    return 2;
  }
  return status;
}

int docs_command(const Args& args, std::ostream& out, std::ostream& err) {
  if (args.size() != 1 || args[0] != "formats") {
    err << "usage: kvq docs formats   (prints the generated part of docs/formats.md)\n";
    return 2;
  }
  out << formats_markdown();
  return 0;
}

}  // namespace kvq::cli
