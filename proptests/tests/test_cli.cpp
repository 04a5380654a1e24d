// The kvq command line as a contract: formats of input and output, and clear errors.
#include <doctest/doctest.h>

#include <sstream>

#include "cli/commands.hpp"
#include "cli/input_parsing.hpp"

namespace {

struct Run {
  int status;
  std::string out, err;
};

Run encode(const std::vector<std::string>& args, const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out, err;
  const int status = kvq::cli::encode_command(args, in, out, err);
  return {status, out.str(), err.str()};
}

Run decode(const std::vector<std::string>& args, const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out, err;
  const int status = kvq::cli::decode_command(args, in, out, err);
  return {status, out.str(), err.str()};
}

}  // namespace

TEST_CASE("cli: FP32 inputs are bits, hex floats or decimals") {
  using kvq::cli::parse_fp32_bits;
  CHECK(parse_fp32_bits("0x3f800000") == 0x3f800000u);
  CHECK(parse_fp32_bits("0x7fc00000") == 0x7fc00000u);
  CHECK(parse_fp32_bits("0x1") == 0x00000001u);
  CHECK(parse_fp32_bits("0x1.8p+1") == 0x40400000u);  // 3.0
  CHECK(parse_fp32_bits("-0x1p-149") == 0x80000001u);
  CHECK(parse_fp32_bits("1.5") == 0x3fc00000u);
  CHECK(parse_fp32_bits("-0") == 0x80000000u);
  CHECK(parse_fp32_bits("inf") == 0x7f800000u);
  CHECK(parse_fp32_bits("0.1") == 0x3dcccccdu);  // decimal rounded once to nearest FP32
  CHECK_FALSE(parse_fp32_bits("0x123456789"));   // nine hex digits
  CHECK_FALSE(parse_fp32_bits("abc"));
  CHECK_FALSE(parse_fp32_bits("1.5x"));
  CHECK_FALSE(parse_fp32_bits(""));
}

TEST_CASE("cli: encode prints two lower-case hex digits per input") {
  const Run r = encode({"e4m3fn", "--convention", "cuda-satfinite"}, "464\n-500\n# comment\n\n0x7fc00000\n0x1p-10\n");
  CHECK(r.status == 0);
  CHECK(r.out == "0x7e\n0xfe\n0x7f\n0x00\n");
  CHECK(encode({"e2m1", "--convention", "ml_dtypes"}, "5\n0.25\nnan\n").out == "0x06\n0x00\n0x08\n");  // 5 ties to 4 = 0.10.0
  CHECK(encode({"e8m0fnu", "--convention", "cuda-nosat", "--rounding", "ru"}, "3\n0\n-1\n").out == "0x81\n0x00\n0x7f\n");
}

TEST_CASE("cli: encode rejects bad input with status 2 and names it") {
  Run r = encode({"e4m3", "--convention", "ieee"}, "1\n");
  CHECK(r.status == 2);
  CHECK(r.err.find("unknown format 'e4m3'") != std::string::npos);
  r = encode({"e4m3fn", "--convention", "ieee"}, "1\n2\nfoo\n");
  CHECK(r.status == 2);
  CHECK(r.err.find("line 3") != std::string::npos);
  CHECK(r.err.find("'foo'") != std::string::npos);
  r = encode({"e2m1", "--convention", "torch"}, "1\n");
  CHECK(r.status == 2);
  CHECK(r.err.find("no e2m1 cast") != std::string::npos);
  r = encode({"e4m3fn", "--convention", "cuda-nosat", "--rounding", "ru"}, "1\n");
  CHECK(r.status == 2);
  CHECK(r.err.find("rne only") != std::string::npos);
  r = encode({"e4m3fn", "--convention", "nvidia"}, "1\n");
  CHECK(r.status == 2);
  CHECK(r.err.find("unknown convention 'nvidia'") != std::string::npos);
}

TEST_CASE("cli: decode prints exact values") {
  const Run r = decode({"e4m3fn"}, "0x7e\n0x01\n0x80\n0xff\n");
  CHECK(r.status == 0);
  CHECK(r.out == "448\n0.001953125\n-0\n-nan\n");
  CHECK(decode({"e8m0fnu"}, "127\n0xff\n").out == "1\nnan\n");
  CHECK(decode({"e5m2"}, "0x7c\n0xfc\n").out == "inf\n-inf\n");
  const Run bad = decode({"e2m1"}, "0x10\n");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("line 1") != std::string::npos);
}

TEST_CASE("cli: table lists every code") {
  std::ostringstream out, err;
  CHECK(kvq::cli::table_command({"e2m1"}, out, err) == 0);
  CHECK(out.str().find("0x07\t0.11.1\t6\n") != std::string::npos);
  CHECK(out.str().find("0x08\t1.00.0\t-0\n") != std::string::npos);
  std::ostringstream out2, err2;
  CHECK(kvq::cli::table_command({"fp32"}, out2, err2) == 2);
}
