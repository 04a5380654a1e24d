// Hostile input to the command line: every case exits 2 with a message naming the input and
// leaves nothing behind (docs/cli.md, "Untrusted input"). The byte-level readers' corpus runs
// under the fuzz targets too (proptests/fuzz/).
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <streambuf>

#include "cli/commands.hpp"
#include "proptests/tests/command_run.hpp"
#include "cli/input_parsing.hpp"
#include "cli/npy.hpp"
#include "cli/output_files.hpp"
#include "cli/quant_json.hpp"
#include "cli/untrusted.hpp"
#include "kernels/quantize.hpp"

namespace {

namespace fs = std::filesystem;

using kvq::test::Run;
using kvq::test::run;

// A fresh scratch folder per test case.
fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kvq-hostile-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A .npy file with the given header dict text and data bytes (version 1.0).
std::string npy_bytes(const std::string& dict, std::size_t data_bytes) {
  std::string header = dict;
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string file("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(header.size() & 0xFF);
  file += static_cast<char>(header.size() >> 8);
  return file + header + std::string(data_bytes, '\0');
}

std::string read_npy_error(const fs::path& dir, const std::string& dict, std::size_t data_bytes) {
  write_bytes(dir / "t.npy", npy_bytes(dict, data_bytes));
  kvq::cli::NpyArray a;
  return kvq::cli::read_npy((dir / "t.npy").string(), &a);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Streams whose reads or writes fail (a disk error, a closed pipe).
struct FailingBuffer : std::streambuf {
  int_type underflow() override { throw std::ios_base::failure("read error"); }
  int_type overflow(int_type) override { return traits_type::eof(); }
};

}  // namespace

TEST_CASE("cli: untrusted integers are whole, in range, and never wrap") {
  using kvq::cli::parse_integer;
  CHECK(parse_integer("16", 1, 128) == 16);
  CHECK(parse_integer("-5", -10, 10) == -5);
  CHECK(parse_integer("9223372036854775807", 0, INT64_MAX) == INT64_MAX);
  CHECK(parse_integer("-9223372036854775808", INT64_MIN, 0) == INT64_MIN);
  for (const char* bad : {"", "-", "16abc", " 16", "16 ", "+16", "1e3", "0x10", "4.0", "99999999999999999999",
                          "9223372036854775808", "4294967312"})
    CHECK_FALSE(parse_integer(bad, 0, 4294967295LL));
  CHECK_FALSE(kvq::cli::checked_mul(std::int64_t{1} << 32, std::int64_t{1} << 31));
  CHECK_FALSE(kvq::cli::checked_product({4294967296, 4294967296, 16}));
  CHECK(kvq::cli::checked_product({}) == 1);
  CHECK_FALSE(kvq::cli::integer_of(1e30, 0, INT64_MAX));
  CHECK_FALSE(kvq::cli::integer_of(-1, 0, 10));
  CHECK_FALSE(kvq::cli::integer_of(2.5, 0, 10));
  CHECK(kvq::cli::parse_hex("0xffffffff", 32) == 0xffffffffu);
  CHECK_FALSE(kvq::cli::parse_hex("0x1ffffffff", 32));
  CHECK_FALSE(kvq::cli::parse_hex("garbage", 32));
  CHECK_FALSE(kvq::cli::parse_finite("inf"));
  CHECK_FALSE(kvq::cli::parse_finite("1.5x"));
}

TEST_CASE("cli: .npy headers are checked against the file before anything is allocated") {
  const fs::path dir = scratch("npy");
  CHECK(contains(read_npy_error(dir, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 4), }", 16),
                 "is not a tuple of non-negative integers"));
  // A 2 KB file claiming 4 GB: rejected from the file's size, never allocated.
  CHECK(contains(read_npy_error(dir, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1), }", 2000),
                 "does not match the 2000 data bytes"));
  CHECK(contains(read_npy_error(dir, "{'descr': '<f4', 'fortran_order': False, 'shape': (-4, 64), }", 1024),
                 "is not a tuple"));
  CHECK(contains(read_npy_error(dir, "{'descr': '<f4', 'fortran_order': False, 'shape': (4.0, 64), }", 1024),
                 "is not a tuple"));
  CHECK(contains(read_npy_error(dir, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", 64),
                 "does not match"));
  CHECK(contains(read_npy_error(dir, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 64), }", 1023), "does not match"));
  CHECK(read_npy_error(dir, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 64), }", 1024).empty());
  CHECK(read_npy_error(dir, "{'descr': '|u1', 'fortran_order': False, 'shape': (8,), }", 8).empty());
  CHECK(read_npy_error(dir, "{'descr': '|u1', 'fortran_order': False, 'shape': (), }", 1).empty());
  std::string truncated = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 64), }", 0);
  write_bytes(dir / "t.npy", truncated.substr(0, 20));
  kvq::cli::NpyArray a;
  CHECK(contains(kvq::cli::read_npy((dir / "t.npy").string(), &a), "past the end of the file"));
  fs::remove_all(dir);
}

TEST_CASE("cli: quant and dequant reject bad options and a crafted quant.json, and leave nothing behind") {
  const fs::path dir = scratch("quant");
  kvq::cli::NpyArray x{"<f4", {2, 32}, std::vector<std::uint8_t>(2 * 32 * 4)};
  std::vector<float> values(64, 0.5f);
  values[3] = INFINITY;  // one inf: quant.json must still be JSON
  std::memcpy(x.bytes.data(), values.data(), x.bytes.size());
  REQUIRE(kvq::cli::write_npy((dir / "x.npy").string(), x).empty());
  const std::string in = (dir / "x.npy").string();

  Run r = run(kvq::cli::quant_command, {"nvfp4", "--in", in, "--out", (dir / "q").string(), "--block", "16abc"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--block must be an integer in [1, 128], got '16abc'"));
  r = run(kvq::cli::quant_command, {"nvfp4", "--in", in, "--out", (dir / "q").string(), "--dtype", "int8"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "got 'int8'"));
  CHECK_FALSE(fs::exists(dir / "q"));

  // An output that cannot be renamed into place (a folder is in the way): no file of the set stays.
  fs::create_directories(dir / "q" / "codes.npy");
  r = run(kvq::cli::quant_command, {"nvfp4", "--in", in, "--out", (dir / "q").string(), "--device", "cpu"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "codes.npy"));
  CHECK_FALSE(fs::exists(dir / "q" / "quant.json"));
  CHECK_FALSE(fs::exists(dir / "q" / "scales.npy"));
  CHECK(std::distance(fs::directory_iterator(dir / "q"), fs::directory_iterator{}) == 1);  // the folder in the way
  r = run(kvq::cli::quant_command, {"nvfp4", "--in", in, "--out", (dir / "x.npy" / "q").string(), "--device", "cpu"});
  CHECK(r.status == 2);  // --out below a file

  // The set written, then read back: the inf tensor scale is written as the string "inf".
  fs::remove_all(dir / "q");
  REQUIRE(run(kvq::cli::quant_command, {"nvfp4", "--in", in, "--out", (dir / "q").string(), "--device", "cpu"}).status == 0);
  std::stringstream meta;
  meta << std::ifstream(dir / "q" / "quant.json").rdbuf();
  CHECK(contains(meta.str(), "\"tensor_scale\": \"inf\""));
  kvq::cli::QuantJson q;
  CHECK(kvq::cli::read_quant_json(meta.str(), "quant.json", &q).empty());
  CHECK(q.rows == 2);
  CHECK(run(kvq::cli::dequant_command, {"nvfp4", "--in", (dir / "q").string(), "--out", (dir / "y.npy").string(),
                                        "--device", "cpu"}).status == 0);
  // An unwritable output is bad input (2), not a failed check (1), and leaves no partial file.
  r = run(kvq::cli::dequant_command, {"nvfp4", "--in", (dir / "q").string(), "--out", (dir / "none" / "y.npy").string(),
                                      "--device", "cpu"});
  CHECK(r.status == 2);
  CHECK_FALSE(fs::exists(dir / "none"));

  // A crafted quant.json: sizes that overflow, numbers that are not integers, bits that are not 32.
  const std::string good = meta.str();
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    write_bytes(dir / "q" / "quant.json", text);
    return run(kvq::cli::dequant_command, {"nvfp4", "--in", (dir / "q").string(), "--out", (dir / "z.npy").string(),
                                           "--device", "cpu"});
  };
  r = with("\"rows\": 2", "\"rows\": 3037000500");  // sizes checked against the file
  CHECK(r.status == 2);
  CHECK(contains(r.err, "codes.npy"));
  CHECK(contains(with("\"cols\": 32", "\"cols\": 1e30").err, "\"cols\" must be an integer"));
  CHECK(contains(with("\"rows\": 2", "\"rows\": -2").err, "\"rows\" must be an integer"));
  CHECK(contains(with("\"block\": 16", "\"block\": 1e30").err, "\"block\" must be an integer"));
  CHECK(contains(with("\"rows\": 2,\n  \"cols\": 32", "\"rows\": 4611686018427387904,\n  \"cols\": 4611686018427387904").err,
                 "\"rows\" must be an integer"));
  CHECK(contains(with("0x", "0x1").err, "tensor_scale_bits"));  // 33 bits
  CHECK(contains(with("\"tensor_scale_bits\": \"", "\"tensor_scale_bits\": \"garbage").err, "tensor_scale_bits"));
  CHECK(contains(with("{", "[").err, "is not a JSON object"));
  CHECK_FALSE(fs::exists(dir / "z.npy"));
  kvq::kernels::QuantizeShape huge{kvq::Recipe{}, std::int64_t{1} << 40, std::int64_t{1} << 40};
  CHECK(contains(kvq::kernels::validate(huge).message(), "too large"));
  fs::remove_all(dir);
}

TEST_CASE("cli: numeric options are whole numbers in range") {
  Run r = run(kvq::cli::study_command, {"qsnr", "--out", "/nonexistent-kvq", "--shard", "0/99999999999"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--shard takes I/N"));
  r = run(kvq::cli::study_command, {"qsnr", "--out", "/nonexistent-kvq", "--blocks", "4294967312"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--blocks takes integers in [1, 4096]"));
  r = run(kvq::cli::study_command, {"qsnr", "--out", "/nonexistent-kvq", "--dist", "student-t:inf"});  // hung before
  CHECK(r.status == 2);
  CHECK(contains(r.err, "student-t:NU needs 2 < NU <= 1e6"));
  r = run(kvq::cli::bench_command, {"--mib", "1e3"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--mib must be an integer"));
  r = run(kvq::cli::check_command, {"--cases", "4294967297"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--cases must be an integer in [1, 100000000]"));
  r = run(kvq::cli::check_command, {"--reproduce", "garbage", "--suite", "formats"});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--reproduce: not a replay string"));
}

TEST_CASE("cli: study merge names a corrupt or empty shard") {
  const fs::path dir = scratch("merge");
  write_bytes(dir / "qsnr.shard0of2.csv", "a,b\n1,2\n");
  write_bytes(dir / "qsnr.shard0of2.json", "{\n  \"configurations\": x,\n  \"seconds\": 1\n}\n");
  write_bytes(dir / "qsnr.shard1of2.csv", "");
  write_bytes(dir / "qsnr.shard1of2.json", "");
  Run r = run(kvq::cli::study_command, {"merge", "--out", dir.string()});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "qsnr.shard0of2"));
  fs::remove(dir / "qsnr.shard1of2.csv");
  fs::remove(dir / "qsnr.shard1of2.json");
  write_bytes(dir / "qsnr.shard0of99999999999.csv", "a\n");
  r = run(kvq::cli::study_command, {"merge", "--out", dir.string()});
  CHECK(r.status == 2);
  CHECK(contains(r.err, "does not name a shard"));
  fs::remove_all(dir);
}

TEST_CASE("cli: encode and decode report read and write errors") {
  FailingBuffer failing;
  std::istream bad_in(&failing);
  std::ostringstream out, err;
  CHECK(kvq::cli::encode_command({"e4m3fn", "--convention", "cuda-satfinite"}, bad_in, out, err) == 2);
  CHECK(contains(err.str(), "cannot read standard input"));
  std::istringstream in("1\n2\n");
  std::ostream bad_out(&failing);
  std::ostringstream err2;
  CHECK(kvq::cli::decode_command({"e4m3fn"}, in, bad_out, err2) == 2);
  CHECK(contains(err2.str(), "cannot write standard output"));
  // Lines longer than the reader's block, and a last line without '\n'.
  std::istringstream long_lines(std::string(3 << 20, ' ') + "0x7e\n126");
  std::ostringstream out3, err3;
  CHECK(kvq::cli::decode_command({"e4m3fn"}, long_lines, out3, err3) == 0);
  CHECK(out3.str() == "448\n448\n");
}

TEST_CASE("cli: check --report is written whole or not at all") {
  const fs::path dir = scratch("report");
  Run r = run(kvq::cli::check_command, {"--property", "formats/e2m1/ieee/rz/codec-vs-oracle", "--cases", "10", "--report", dir.string()});
  CHECK(r.status == 2);  // a folder is in the way
  CHECK(contains(r.err, "--report"));
  fs::remove_all(dir);
}
