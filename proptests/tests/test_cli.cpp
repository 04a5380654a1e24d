// The kvq command line as a contract: formats of input and output, and clear errors.
#include <doctest/doctest.h>

#include <cstdio>
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

#include <cstring>
#include <filesystem>

#include "cli/npy.hpp"
#include "formats/recipe_names.hpp"
#include "kernels/benchmark.hpp"
#include "kernels/quantize.hpp"

TEST_CASE("cli: quant and dequant exchange .npy files and match the CPU twin") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "kvq-cli-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  kvq::cli::NpyArray x{"<f4", {2, 32}, std::vector<std::uint8_t>(2 * 32 * 4)};
  std::vector<float> values(64);
  for (int i = 0; i < 64; ++i) values[i] = static_cast<float>((i * 37) % 23 - 11) * 0.125f;
  std::memcpy(x.bytes.data(), values.data(), x.bytes.size());
  REQUIRE(kvq::cli::write_npy((dir / "x.npy").string(), x).empty());
  kvq::cli::NpyArray back;
  REQUIRE(kvq::cli::read_npy((dir / "x.npy").string(), &back).empty());
  CHECK(back.descr == "<f4");
  CHECK(back.shape == std::vector<std::int64_t>{2, 32});
  CHECK(back.bytes == x.bytes);

  std::ostringstream out, err;
  REQUIRE(kvq::cli::quant_command({"nvfp4", "--in", (dir / "x.npy").string(), "--out", (dir / "q").string(),
                                   "--device", "cpu"}, out, err) == 0);
  REQUIRE(kvq::cli::dequant_command({"nvfp4", "--in", (dir / "q").string(), "--out", (dir / "y.npy").string(),
                                     "--device", "cpu"}, out, err) == 0);
  kvq::kernels::QuantizeShape s{kvq::recipe_from_name("nvfp4")->recipe, 2, 32};
  const float g = kvq::tensor_scale(s.recipe, kvq::kernels::amax_cpu(kvq::kernels::DType::fp32, values.data(), 64));
  std::vector<std::uint8_t> codes(s.code_bytes()), scales(s.scale_bytes());
  std::vector<float> y(64);
  REQUIRE(kvq::kernels::quantize_cpu(s, kvq::kernels::DType::fp32, values.data(), g, codes.data(), scales.data()).ok());
  REQUIRE(kvq::kernels::dequantize_cpu(s, codes.data(), scales.data(), g, kvq::kernels::DType::fp32, y.data()).ok());
  kvq::cli::NpyArray c, sc, yy;
  REQUIRE(kvq::cli::read_npy((dir / "q" / "codes.npy").string(), &c).empty());
  REQUIRE(kvq::cli::read_npy((dir / "q" / "scales.npy").string(), &sc).empty());
  REQUIRE(kvq::cli::read_npy((dir / "y.npy").string(), &yy).empty());
  CHECK(c.shape == std::vector<std::int64_t>{2, 16});
  CHECK(c.bytes == codes);
  CHECK(sc.bytes == scales);
  CHECK(std::memcmp(yy.bytes.data(), y.data(), 64 * 4) == 0);

  // Errors name what is wrong and exit 2, writing nothing.
  kvq::cli::NpyArray bad{"<f4", {1, 24}, std::vector<std::uint8_t>(24 * 4)};
  REQUIRE(kvq::cli::write_npy((dir / "bad.npy").string(), bad).empty());
  std::ostringstream e1;
  CHECK(kvq::cli::quant_command({"nvfp4", "--in", (dir / "bad.npy").string(), "--out", (dir / "z").string()}, out, e1) == 2);
  CHECK(e1.str().find("cols (head_dim) = 24 is not a multiple of the block size 16") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "z"));
  std::ostringstream e2;
  CHECK(kvq::cli::quant_command({"nvfp5", "--in", (dir / "x.npy").string(), "--out", (dir / "z").string()}, out, e2) == 2);
  CHECK(e2.str().find("unknown recipe 'nvfp5'") != std::string::npos);
  std::ostringstream e3;
  CHECK(kvq::cli::dequant_command({"mxfp4-floor", "--in", (dir / "q").string(), "--out", (dir / "z.npy").string()}, out, e3) == 2);
  CHECK(e3.str().find("holds recipe 'nvfp4'") != std::string::npos);
  fs::remove_all(dir);
}

// kvq's RoPE problems as kernels/bench_flashinfer_rope.py reads them: every --case string kvq bench
// --peers would pass parses, and the script plans one call a pair (5 paged, 3 quant), no GPU needed.
TEST_CASE("cli: kvq bench --peers hands the FlashInfer script cases its parser takes") {
  for (const std::string dtype : {"bf16", "fp16"})
    for (const std::int64_t tokens : {std::int64_t{256}, std::int64_t{16384}}) {
      const std::string command = "python3 '" KVQ_SOURCE_DIR "/kernels/bench_flashinfer_rope.py' --plan --dtype " + dtype +
                                  kvq::cli::flashinfer_case_arguments(dtype, tokens) + " 2>&1";
      FILE* pipe = popen(command.c_str(), "r");
      REQUIRE(pipe != nullptr);
      std::string text;
      char buffer[4096];
      while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
      const int status = pclose(pipe);
      INFO(dtype << ", " << tokens << " tokens: " << text.substr(0, 400));
      CHECK(status == 0);
      int paged = 0, quant = 0;
      for (std::size_t at = 0; (at = text.find(" (paged): ", at)) != std::string::npos; ++at) ++paged;
      for (std::size_t at = 0; (at = text.find(" (quant): ", at)) != std::string::npos; ++at) ++quant;
      CHECK(paged == 5);
      CHECK(quant == 3);
      CHECK(text.find("mha-gptj-hnd-" + std::to_string(tokens) + " (paged)") != std::string::npos);
    }
}

TEST_CASE("cli: kvq bench rejects bad arguments before touching a GPU, and names --peers and --swizzle in its usage") {
  const auto bench = [](const std::vector<std::string>& args) {
    std::ostringstream out, err;
    const int status = kvq::cli::bench_command(args, out, err);
    return Run{status, out.str(), err.str()};
  };
  const Run missing_python = bench({"--peers", "--python"});  // --python needs its value
  CHECK(missing_python.status == 2);
  CHECK(missing_python.err.find("unexpected argument '--python'") != std::string::npos);
  CHECK(missing_python.err.find("[--peers [--python EXE]]") != std::string::npos);
  const Run dtype = bench({"--dtype", "int8", "--peers"});
  CHECK(dtype.status == 2);
  CHECK(dtype.err.find("--dtype is bf16, fp16 or fp32, got 'int8'") != std::string::npos);
  CHECK(bench({"--recipes", "no-such-recipe"}).status == 2);
  const Run swizzle = bench({"--swizzle", "k_and_v"});
  CHECK(swizzle.status == 2);
  CHECK(swizzle.err.find("--swizzle is none, v (V's scales) or kv (K's and V's), got 'k_and_v'") != std::string::npos);
  CHECK(bench({"--swizzle"}).err.find("[--swizzle none|v|kv]") != std::string::npos);  // --swizzle needs its value
  const Run rounds_alone = bench({"--peer-rounds", "2"});  // FlashInfer's rounds belong to --peers
  CHECK(rounds_alone.status == 2);
  CHECK(rounds_alone.err.find("--peer-rounds needs --peers") != std::string::npos);
  const Run no_rounds = bench({"--peers", "--peer-rounds", "0"});
  CHECK(no_rounds.status == 2);
  CHECK(no_rounds.err.find("--peer-rounds") != std::string::npos);
  CHECK(no_rounds.out.empty());
  const Run no_blocks = bench({"--blocks-per-sm", "0"});  // a cap of at least one thread block an SM
  CHECK(no_blocks.status == 2);
  CHECK(no_blocks.err.find("--blocks-per-sm") != std::string::npos);
  CHECK(bench({"--blocks-per-sm"}).err.find("[--blocks-per-sm N]") != std::string::npos);
}

// kvq bench's yardstick: each row gets the fastest copy of about its copy's bytes (within 5%) measured
// in the run, its own included: never a slower one, never one of other bytes.
TEST_CASE("cli: kvq bench holds each row to the fastest copy of about its bytes") {
  std::vector<kvq::kernels::BenchRow> rows = {{"a", "-", "bf16", 300e6, 1, 0, 2700, 310e6},
                                              {"b", "-", "bf16", 300e6, 1, 0, 2930, 310e6},
                                              {"c", "-", "bf16", 60e6, 1, 0, 2700, 310e6},   // an append row: its shape's copy
                                              {"d", "-", "bf16", 300e6, 1, 0, 2800, 320e6},  // 3% more bytes
                                              {"e", "-", "bf16", 900e6, 1, 0, 3000, 900e6},
                                              {"f", "-", "bf16", 200e6, 1, 0, 2880, 200e6}};
  kvq::kernels::fastest_copy_baselines(rows);
  CHECK(rows[0].copy_gbps == 2930);  // the slow copy replaced by another of the same bytes
  CHECK(rows[1].copy_gbps == 2930);
  CHECK(rows[2].copy_gbps == 2930);
  CHECK(rows[3].copy_gbps == 2930);
  CHECK(rows[4].copy_gbps == 3000);  // no other copy of its bytes: its own
  CHECK(rows[5].copy_gbps == 2880);  // not the larger copies' faster rate
}
