// kvq verify / kvq identify end to end: a port's tensors written as .npy/.safetensors with a
// manifest, from kvq's twin (exact) and from mutants (mismatch, identified), and bad inputs.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.hpp"
#include "proptests/tests/command_run.hpp"
#include "cli/npy.hpp"
#include "formats/recipe_names.hpp"
#include "proptests/ports/mutants.hpp"
#include "oracle/verify.hpp"
#include "proptests/harness/mix32.hpp"

namespace {

namespace fs = std::filesystem;
using kvq::cli::NpyArray;

using kvq::test::Run;
using kvq::test::run;

// A seeded 8x64 FP32 tensor with E2M1 ties at the block scale, a zero block and a spread of magnitudes.
std::vector<float> input() {
  std::vector<float> x(8 * 64);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = std::ldexp(static_cast<float>(static_cast<int>(kvq::props::mix32(i + 7) % 4001) - 2000), -10);  // |x| < 2: amax = 3 from the ties below
  const float ties[16] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -0.25f, -2.5f, -5, 6, 0, 1, 2, 3, 4};
  for (int i = 0; i < 16; ++i) x[i] = ties[i] * 0.5f;
  for (int i = 16; i < 32; ++i) x[64 + i] = 0.0f;
  return x;
}

// The port's outputs: kvq's quantize under a PortKernel (twin or mutant), written with a manifest.
fs::path write_port(const std::string& name, const kvq::ports::PortKernel& k, const std::string& extra_layout = "") {
  const fs::path dir = fs::temp_directory_path() / ("kvq-ports-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  const std::vector<float> x = input();
  kvq::kernels::QuantizeShape s{k.recipe, 8, 64};
  std::vector<std::uint8_t> codes(s.code_bytes()), scales(s.scale_bytes());
  const float g = kvq::tensor_scale(k.recipe, kvq::kernels::amax_cpu(kvq::kernels::DType::fp32, x.data(), 512));
  REQUIRE(k.quantize(s, kvq::kernels::DType::fp32, x.data(), g, codes.data(), scales.data()).ok());
  NpyArray xa{"<f4", {8, 64}, std::vector<std::uint8_t>(512 * 4)};
  std::memcpy(xa.bytes.data(), x.data(), 512 * 4);
  REQUIRE(kvq::cli::write_npy((dir / "in" / "x.npy").string(), xa).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "codes.npy").string(), NpyArray{"|u1", {8, s.code_bytes_per_row()}, codes}).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "scales.npy").string(), NpyArray{"|u1", {8, s.scales_per_row()}, scales}).empty());
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kvq_port_manifest\": 1, \"tensors\": {\"x\": {\"file\": \"x.npy\"}, \"codes\": {\"file\": \"codes.npy\"},"
         " \"block_scales\": {\"file\": \"scales.npy\"}}"
      << extra_layout << "}\n";
  return dir;
}

kvq::cli::Args dirs(const fs::path& d) { return {"--inputs", (d / "in").string(), "--outputs", (d / "out").string()}; }

const kvq::ports::Mutant& mutant(std::string_view name) {
  for (const auto& m : kvq::ports::mutants())
    if (m.name == name) return m;
  throw std::runtime_error("no mutant " + std::string(name));
}

}  // namespace

TEST_CASE("ports-cli: verify says BIT-EXACT for kvq's own outputs and exits 0") {
  const auto dir = write_port("twin", kvq::ports::twin_kernel("nvfp4", kvq::recipe_from_name("nvfp4")->recipe));
  kvq::cli::Args args{"nvfp4"};
  for (const auto& a : dirs(dir)) args.push_back(a);
  const Run r = run(kvq::cli::verify_command, args);
  CHECK(r.status == 0);
  CHECK(r.out.find("kvq verify nvfp4: BIT-EXACT") != std::string::npos);
  CHECK(r.out.find("codes: 0 of 512 differ; block scales: 0 of 32 differ") != std::string::npos);
  CHECK(r.out.find("port: 0 of") != std::string::npos);  // within the recipe's error bound
  const Run id = run(kvq::cli::identify_command, dirs(dir));
  CHECK(id.status == 0);
  CHECK(id.out.find("exact: this port follows nvfp4\n") != std::string::npos);
}

TEST_CASE("ports-cli: verify reports a ties-up port's differences with input bits and hex codes, exit 1") {
  const auto dir = write_port("ties", kvq::ports::mutant_kernel(mutant("nvfp4-ties-up")));
  kvq::cli::Args args{"nvfp4"};
  for (const auto& a : dirs(dir)) args.push_back(a);
  const Run r = run(kvq::cli::verify_command, args);
  CHECK(r.status == 1);
  CHECK(r.out.find("MISMATCH") != std::string::npos);
  CHECK(r.out.find("block scales: 0 of 32 differ") != std::string::npos);
  // amax 3: g = 3/2688, sf = 448, D = 0.5, so x[0] = 0.125 is the E2M1 tie 0.25: RNE 0, ties up 0.5 (0x1).
  CHECK(r.out.find("(0, 0): x 0x3e000000 = 0.125; scale 0x7e/0x7e; code 0x0 -> 0x1; decoded 0 / 0.25") != std::string::npos);
  const Run id = run(kvq::cli::identify_command, dirs(dir));
  CHECK(id.status == 0);
  CHECK(id.out.find("exact: this port follows nvfp4 except ties round up (away from zero)") != std::string::npos);
}

TEST_CASE("ports-cli: identify names a swapped nibble order and an E8M0 bias") {
  Run id = run(kvq::cli::identify_command, dirs(write_port("swap", kvq::ports::mutant_kernel(mutant("nvfp4-nibble-swap")))));
  CHECK(id.status == 0);
  CHECK(id.out.find("nvfp4 except element 2i in the high nibble") != std::string::npos);
  id = run(kvq::cli::identify_command, dirs(write_port("bias", kvq::ports::mutant_kernel(mutant("mxfp4-bias-125")))));
  CHECK(id.status == 0);
  CHECK(id.out.find("mxfp4-floor except E8M0 bias 125 instead of 127") != std::string::npos);
  kvq::Recipe six = kvq::recipe_from_name("nvfp4")->recipe;  // a port computing g = amax/448 (factor 6)
  six.tensor_divisor = 448.0f;
  id = run(kvq::cli::identify_command, dirs(write_port("six", kvq::ports::twin_kernel("six", six))));
  CHECK(id.status == 0);
  CHECK(id.out.find("nvfp4 except global scale amax/448 instead of amax/2688 (factor 6)") != std::string::npos);
  // Read with the high-first layout, the swapped port is exact.
  const auto dir = write_port("swap-layout", kvq::ports::mutant_kernel(mutant("nvfp4-nibble-swap")),
                              ", \"layout\": {\"nibble_order\": \"high_first\"}");
  kvq::cli::Args args{"nvfp4"};
  for (const auto& a : dirs(dir)) args.push_back(a);
  CHECK(run(kvq::cli::verify_command, args).status == 0);
}

TEST_CASE("ports-cli: safetensors files are read by key") {
  const auto dir = write_port("safetensors", kvq::ports::twin_kernel("nvfp4", kvq::recipe_from_name("nvfp4")->recipe));
  NpyArray codes, scales;
  REQUIRE(kvq::cli::read_npy((dir / "out" / "codes.npy").string(), &codes).empty());
  REQUIRE(kvq::cli::read_npy((dir / "out" / "scales.npy").string(), &scales).empty());
  const std::string header = "{\"codes\":{\"dtype\":\"U8\",\"shape\":[8,32],\"data_offsets\":[0,256]},"
                             "\"scales\":{\"dtype\":\"U8\",\"shape\":[8,4],\"data_offsets\":[256,288]}}";
  std::ofstream f((dir / "out" / "out.safetensors").string(), std::ios::binary);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i)));
  f << header;
  f.write(reinterpret_cast<const char*>(codes.bytes.data()), 256);
  f.write(reinterpret_cast<const char*>(scales.bytes.data()), 32);
  f.close();
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"tensors\": {\"x\": {\"file\": \"x.npy\"}, \"codes\": {\"file\": \"out.safetensors\", \"key\": \"codes\"},"
         " \"block_scales\": {\"file\": \"out.safetensors\", \"key\": \"scales\"}}}";
  kvq::cli::Args args{"nvfp4"};
  for (const auto& a : dirs(dir)) args.push_back(a);
  CHECK(run(kvq::cli::verify_command, args).status == 0);
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"tensors\": {\"x\": {\"file\": \"x.npy\"}, \"codes\": {\"file\": \"out.safetensors\", \"key\": \"k\"}}}";
  const Run bad = run(kvq::cli::verify_command, args);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("codes: ") != std::string::npos);
  CHECK(bad.err.find("no tensor 'k' (holds: codes, scales)") != std::string::npos);

  // Crafted headers (docs/cli.md, "Untrusted input"): each exits 2 naming the tensor, nothing allocated first.
  const auto crafted = [&](const std::string& codes_entry) {
    const std::string h = "{\"codes\":" + codes_entry + "}";
    std::ofstream g((dir / "out" / "bad.safetensors").string(), std::ios::binary);
    for (int i = 0; i < 8; ++i) g.put(static_cast<char>(static_cast<std::uint64_t>(h.size()) >> (8 * i)));
    g << h << std::string(256, '\0');
    g.close();
    std::ofstream((dir / "out" / "manifest.json").string())
        << "{\"tensors\": {\"x\": {\"file\": \"x.npy\"}, \"codes\": {\"file\": \"bad.safetensors\", \"key\": \"codes\"}}}";
    return run(kvq::cli::verify_command, args);
  };
  for (const char* entry : {R"({"dtype":"U8","shape":[1e30],"data_offsets":[0,256]})",
                            R"({"dtype":"U8","shape":[8,32],"data_offsets":[-256,0]})",
                            R"({"dtype":"U8","shape":[4294967296,4294967296,16],"data_offsets":[0,256]})",
                            R"({"dtype":"U8","shape":[1000000000000],"data_offsets":[0,1000000000000]})"}) {
    const Run r = crafted(entry);
    CHECK(r.status == 2);
    CHECK(r.err.find("bad.safetensors tensor 'codes'") != std::string::npos);
  }
}

TEST_CASE("ports-cli: bad input exits 2 and names the file or role") {
  const auto dir = write_port("bad", kvq::ports::twin_kernel("nvfp4", kvq::recipe_from_name("nvfp4")->recipe));
  kvq::cli::Args args{"nvfp4"};
  for (const auto& a : dirs(dir)) args.push_back(a);
  // A recipe whose layout does not fit: MXFP4 (block 32) wants 16 scales, not 32.
  kvq::cli::Args mx = args;
  mx[0] = "mxfp4-floor";
  Run r = run(kvq::cli::verify_command, mx);
  CHECK(r.status == 2);
  CHECK(r.err.find("block_scales: 32 bytes, expected 16") != std::string::npos);
  fs::remove(dir / "out" / "codes.npy");
  r = run(kvq::cli::verify_command, args);
  CHECK(r.status == 2);
  CHECK(r.err.find("codes: cannot open") != std::string::npos);
  std::ofstream((dir / "out" / "manifest.json").string()) << "{\"tensors\": {\"x\": {\"file\": \"x.npy\"}, \"kodes\": {}}}";
  r = run(kvq::cli::verify_command, args);
  CHECK(r.status == 2);
  CHECK(r.err.find("unknown role 'kodes'") != std::string::npos);
  std::ofstream((dir / "out" / "manifest.json").string()) << "{\"tensors\": ";
  r = run(kvq::cli::verify_command, args);
  CHECK(r.status == 2);
  CHECK(r.err.find("is not JSON") != std::string::npos);
  // Manifest numbers out of range: a 33-bit global scale, a block of 1e30.
  write_port("bad", kvq::ports::twin_kernel("nvfp4", kvq::recipe_from_name("nvfp4")->recipe));
  const std::string tensors = "{\"tensors\": {\"x\": {\"file\": \"x.npy\"}, \"codes\": {\"file\": \"codes.npy\"}";
  for (const auto& [rest, message] : {std::pair{std::string(", \"global_scale\": {\"bits\": \"0x1ffffffff\"}}}"),
                                                "\"bits\" must be hex FP32 bits"},
                                      std::pair{std::string("}, \"layout\": {\"block\": 1e30}}"), "\"block\" must be an integer"}}) {
    std::ofstream((dir / "out" / "manifest.json").string()) << tensors + rest;
    r = run(kvq::cli::verify_command, args);
    CHECK(r.status == 2);
    CHECK(r.err.find(message) != std::string::npos);
  }
  CHECK(run(kvq::cli::verify_command, {"nvfp5", "--inputs", "a", "--outputs", "b"}).err.find("unknown recipe 'nvfp5'") !=
        std::string::npos);
  CHECK(run(kvq::cli::identify_command, {"--inputs", "a"}).status == 2);
}

TEST_CASE("ports-cli: an encode-convention global scale given to the port, BF16 input, one code a byte, dequantized") {
  const fs::path dir = fs::temp_directory_path() / "kvq-ports-test-roles";
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  const kvq::Recipe r = kvq::recipe_from_name("nvfp4-vllm")->recipe;
  const std::vector<float> values = input();
  std::vector<std::uint16_t> x(values.size());  // BF16 bits (every input is exact in BF16: 11-bit integers * 2^-10)
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::uint16_t>(kvq::bits_of(values[i]) >> 16);
  const float encode = 150.0f;  // the port was handed 1/g
  const float g = 1.0f / encode;
  kvq::kernels::QuantizeShape s{r, 8, 64};
  std::vector<std::uint8_t> codes(s.code_bytes()), scales(s.scale_bytes()), unpacked(512);
  std::vector<float> y(512);
  REQUIRE(kvq::kernels::quantize_cpu(s, kvq::kernels::DType::bf16, x.data(), g, codes.data(), scales.data()).ok());
  REQUIRE(kvq::kernels::dequantize_cpu(s, codes.data(), scales.data(), g, kvq::kernels::DType::fp32, y.data()).ok());
  for (std::int64_t j = 0; j < 512; ++j) unpacked[j] = kvq::kernels::code_at(s, codes.data(), j);
  NpyArray xa{"<u2", {8, 64}, std::vector<std::uint8_t>(1024)}, ga{"<f4", {1}, std::vector<std::uint8_t>(4)},
      ya{"<f4", {8, 64}, std::vector<std::uint8_t>(2048)};
  std::memcpy(xa.bytes.data(), x.data(), 1024);
  std::memcpy(ga.bytes.data(), &encode, 4);
  std::memcpy(ya.bytes.data(), y.data(), 2048);
  REQUIRE(kvq::cli::write_npy((dir / "in" / "x.npy").string(), xa).empty());
  REQUIRE(kvq::cli::write_npy((dir / "in" / "gs.npy").string(), ga).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "codes.npy").string(), NpyArray{"|u1", {8, 64}, unpacked}).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "scales.npy").string(), NpyArray{"|u1", {8, 4}, scales}).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "y.npy").string(), ya).empty());
  const std::string manifest =
      "{\"tensors\": {\"x\": {\"file\": \"x.npy\", \"dtype\": \"bfloat16\"}, \"codes\": {\"file\": \"codes.npy\"},"
      " \"block_scales\": {\"file\": \"scales.npy\"}, \"global_scale\": {\"file\": \"gs.npy\", \"convention\": \"encode\"},"
      " \"dequantized\": {\"file\": \"y.npy\"}}}";
  std::ofstream((dir / "out" / "manifest.json").string()) << manifest;
  kvq::cli::Args args{"nvfp4-vllm"};
  for (const auto& a : dirs(dir)) args.push_back(a);
  Run r1 = run(kvq::cli::verify_command, args);
  CHECK(r1.status == 0);
  CHECK(r1.out.find("8x64 bf16; codes one a byte") != std::string::npos);
  CHECK(r1.out.find("dequantized: 0 of 512 differ") != std::string::npos);
  // Read in the decode convention, g is 150 and the codes no longer follow; identify finds the reading.
  std::ofstream((dir / "out" / "manifest.json").string()) << [&] {
    std::string m = manifest;
    m.replace(m.find("encode"), 6, "decode");
    return m;
  }();
  CHECK(run(kvq::cli::verify_command, args).status == 1);
  const Run id = run(kvq::cli::identify_command, dirs(dir));
  CHECK(id.status == 0);
  CHECK(id.out.find("nvfp4-vllm except the global scale read in the other convention") != std::string::npos);
  // A wrong dequantized value is counted.
  y[5] = -y[5] + 1.0f;
  std::memcpy(ya.bytes.data(), y.data(), 2048);
  REQUIRE(kvq::cli::write_npy((dir / "out" / "y.npy").string(), ya).empty());
  std::ofstream((dir / "out" / "manifest.json").string()) << manifest;
  r1 = run(kvq::cli::verify_command, args);
  CHECK(r1.status == 1);
  CHECK(r1.out.find("dequantized: 1 of 512 differ") != std::string::npos);
  CHECK(r1.out.find("first dequantized differences") != std::string::npos);
  CHECK(r1.out.find("(0, 5): code ") != std::string::npos);
}

TEST_CASE("ports-cli: block scales in the 128x4 swizzle are read by the manifest and found by identify") {
  const auto dir = write_port("swizzle", kvq::ports::twin_kernel("nvfp4", kvq::recipe_from_name("nvfp4")->recipe));
  NpyArray scales;
  REQUIRE(kvq::cli::read_npy((dir / "out" / "scales.npy").string(), &scales).empty());
  using kvq::ports::ScaleLayout;
  std::vector<std::uint8_t> swizzled(static_cast<std::size_t>(kvq::ports::scale_layout_bytes(ScaleLayout::swizzle_128x4, 8, 4)), 0);
  REQUIRE(swizzled.size() == 512);  // 8 rows padded to 128, 4 scale columns
  for (int row = 0; row < 8; ++row)
    for (int b = 0; b < 4; ++b)
      swizzled[kvq::ports::scale_index(ScaleLayout::swizzle_128x4, 4, row, b)] = scales.bytes[row * 4 + b];
  REQUIRE(kvq::cli::write_npy((dir / "out" / "scales.npy").string(), NpyArray{"|u1", {128, 4}, swizzled}).empty());
  const Run id = run(kvq::cli::identify_command, dirs(dir));
  CHECK(id.status == 0);
  CHECK(id.out.find("exact: this port follows nvfp4 except block scales laid out swizzle_128x4") != std::string::npos);
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"tensors\": {\"x\": {\"file\": \"x.npy\"}, \"codes\": {\"file\": \"codes.npy\"},"
         " \"block_scales\": {\"file\": \"scales.npy\"}}, \"layout\": {\"scales\": \"swizzle_128x4\"}}";
  kvq::cli::Args args{"nvfp4"};
  for (const auto& a : dirs(dir)) args.push_back(a);
  const Run r = run(kvq::cli::verify_command, args);
  CHECK(r.status == 0);
  CHECK(r.out.find("block 16, scales swizzle_128x4") != std::string::npos);
  // The FlashInfer formula at a few points (docs/ports.md, swizzle_128x4): (m, k) -> offset.
  CHECK(kvq::ports::scale_index(ScaleLayout::swizzle_128x4, 8, 0, 0) == 0);
  CHECK(kvq::ports::scale_index(ScaleLayout::swizzle_128x4, 8, 1, 0) == 16);
  CHECK(kvq::ports::scale_index(ScaleLayout::swizzle_128x4, 8, 32, 1) == 5);
  CHECK(kvq::ports::scale_index(ScaleLayout::swizzle_128x4, 8, 0, 4) == 512);
  CHECK(kvq::ports::scale_index(ScaleLayout::swizzle_128x4, 8, 128, 0) == 1024);
  CHECK(kvq::ports::scale_index(ScaleLayout::token_group4, 4, 5, 2) == 4 * 4 + 4 * 2 + 1);
}
