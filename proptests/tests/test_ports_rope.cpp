// kvq verify / kvq identify for the kinds rope-quantize and rope-append (docs/ports.md "RoPE"):
// calls whose outputs are written here by hand from the rotation worked out on paper and the E4M3
// table, then broken: a wrong element, a padding token's slot written, a byte no element addresses.
//
// One token, one Q head and one K head, rope_dim 2 (one pair), no nope part; cos_sin_cache row 0 is
// (cos, sin) = (0.5, 0.25). Q (1, 2) rotates to (1*0.5 - 2*0.25, 2*0.5 + 1*0.25) = (0, 1.25), times
// quant_scale_q 2: (0, 2.5) = codes 0x00, 0x42. K (4, -1) rotates to (2 + 0.25, -0.5 + 1) = (2.25,
// 0.5), times quant_scale_kv 1: codes 0x41, 0x30. V (MHA append) (3, -0.75): codes 0x44, 0xB4.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli/commands.hpp"
#include "cli/npy.hpp"
#include "proptests/tests/command_run.hpp"

namespace {

namespace fs = std::filesystem;
using kvq::cli::NpyArray;
using kvq::test::Run;
using kvq::test::run;

NpyArray f32(std::vector<std::int64_t> shape, std::vector<float> v) {
  NpyArray a{"<f4", std::move(shape), std::vector<std::uint8_t>(v.size() * 4)};
  std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
  return a;
}
NpyArray i32(std::vector<std::int32_t> v) {
  NpyArray a{"<i4", {static_cast<std::int64_t>(v.size())}, std::vector<std::uint8_t>(v.size() * 4)};
  std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
  return a;
}
void save(const fs::path& p, const NpyArray& a) { REQUIRE(kvq::cli::write_npy(p.string(), a).empty()); }

const char* kParameters = "\"parameters\": {\"is_neox\": true, \"quant_scale_q\": 2, \"quant_scale_kv\": \"0x3f800000\"";

// rope_quantize_fp8: outputs q_rope_out [1, 1, 2], k_rope_out [1, 1, 2].
fs::path quantize_dump(const std::string& name, std::vector<std::uint8_t> q_out, std::vector<std::uint8_t> k_out) {
  const fs::path dir = fs::temp_directory_path() / ("kvq-ports-rope-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  save(dir / "in" / "q_rope.npy", f32({1, 1, 2}, {1, 2}));
  save(dir / "in" / "k_rope.npy", f32({1, 1, 2}, {4, -1}));
  save(dir / "in" / "cos_sin_cache.npy", f32({1, 2}, {0.5f, 0.25f}));
  save(dir / "in" / "pos_ids.npy", i32({0}));
  save(dir / "out" / "q_rope_out.npy", NpyArray{"|u1", {1, 1, 2}, std::move(q_out)});
  save(dir / "out" / "k_rope_out.npy", NpyArray{"|u1", {1, 1, 2}, std::move(k_out)});
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kind\": \"rope-quantize\", \"tensors\": {\"q_rope\": {\"file\": \"q_rope.npy\"}, \"k_rope\": {\"file\": \"k_rope.npy\"},"
         "\"cos_sin_cache\": {\"file\": \"cos_sin_cache.npy\"}, \"pos_ids\": {\"file\": \"pos_ids.npy\"},"
         "\"q_rope_out\": {\"file\": \"q_rope_out.npy\"}, \"k_rope_out\": {\"file\": \"k_rope_out.npy\"}}, "
      << kParameters << "}}\n";
  return dir;
}

// rope_quantize_fp8_append_paged_kv_cache, MHA NHD: two tokens, token 1 padding; one request whose
// token 0 sits at position 1 of its first page, physical page 1 of 2, page_size 2: K and V at slot
// 3 (bytes 6 and 7 of each cache). Every other byte keeps the poison 0xA5, Q of the padding token too.
fs::path append_dump(const std::string& name, std::vector<std::uint8_t> q_out, std::vector<std::uint8_t> k_cache,
                     std::vector<std::uint8_t> v_cache) {
  const fs::path dir = fs::temp_directory_path() / ("kvq-ports-rope-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  save(dir / "in" / "q_rope.npy", f32({2, 1, 2}, {1, 2, 7, 7}));
  save(dir / "in" / "k_rope.npy", f32({2, 1, 2}, {4, -1, 7, 7}));
  save(dir / "in" / "v.npy", f32({2, 1, 2}, {3, -0.75f, 7, 7}));
  save(dir / "in" / "cos_sin_cache.npy", f32({1, 2}, {0.5f, 0.25f}));
  save(dir / "in" / "pos_ids.npy", i32({0, 0}));
  save(dir / "in" / "kv_indptr.npy", i32({0, 1}));
  save(dir / "in" / "kv_indices.npy", i32({1}));
  save(dir / "in" / "batch_indices.npy", i32({0, -1}));
  save(dir / "in" / "positions.npy", i32({1, 0}));
  save(dir / "out" / "q_rope_out.npy", NpyArray{"|u1", {2, 1, 2}, std::move(q_out)});
  save(dir / "out" / "k_cache.npy", NpyArray{"|u1", {2, 2, 1, 2}, std::move(k_cache)});
  save(dir / "out" / "v_cache.npy", NpyArray{"|u1", {2, 2, 1, 2}, std::move(v_cache)});
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kind\": \"rope-append\", \"tensors\": {\"q_rope\": {\"file\": \"q_rope.npy\"}, \"k_rope\": {\"file\": \"k_rope.npy\"},"
         "\"v\": {\"file\": \"v.npy\"}, \"cos_sin_cache\": {\"file\": \"cos_sin_cache.npy\"}, \"pos_ids\": {\"file\": \"pos_ids.npy\"},"
         "\"kv_indptr\": {\"file\": \"kv_indptr.npy\"}, \"kv_indices\": {\"file\": \"kv_indices.npy\"},"
         "\"batch_indices\": {\"file\": \"batch_indices.npy\"}, \"positions\": {\"file\": \"positions.npy\"},"
         "\"q_rope_out\": {\"file\": \"q_rope_out.npy\", \"poison\": \"0xA5\"},"
         "\"k_cache\": {\"file\": \"k_cache.npy\", \"poison\": \"0xA5\"}, \"v_cache\": {\"file\": \"v_cache.npy\", \"poison\": \"0xA5\"}}, "
      << kParameters << ", \"page_size\": 2, \"kv_layout\": \"NHD\"}}\n";
  return dir;
}

std::vector<std::uint8_t> cache(std::uint8_t a, std::uint8_t b) {
  std::vector<std::uint8_t> c(8, 0xA5);
  c[6] = a, c[7] = b;
  return c;
}

kvq::cli::Args io(const std::string& kind, const fs::path& d) {
  return {kind, "--inputs", (d / "in").string(), "--outputs", (d / "out").string()};
}

}  // namespace

TEST_CASE("ports-rope: rope-quantize outputs worked out by hand are BIT-EXACT; a wrong element is located") {
  Run r = run(kvq::cli::verify_command, io("rope-quantize", quantize_dump("q-exact", {0x00, 0x42}, {0x41, 0x30})));
  CHECK(r.status == 0);
  CHECK(r.out.find("kvq verify rope-quantize: BIT-EXACT (model: NeoX pairs, no FMA)") != std::string::npos);
  r = run(kvq::cli::verify_command, io("rope-fp8", quantize_dump("q-wrong", {0x00, 0x43}, {0x41, 0x30})));
  CHECK(r.status == 1);
  CHECK(r.out.find("q_rope_out: 1 elements differ, 0 bytes no element addresses changed, of 2") != std::string::npos);
  CHECK(r.out.find("q_rope_out byte 1: token 0, head 0, dim 1; x 0x40000000 = 2, partner 0x3f800000 = 1, cos 0x3f000000 = "
                   "0.5, sin 0x3e800000 = 0.25, scale 0x40000000 = 2; 0x42 (2.5) -> 0x43 (2.75), outside the bound") !=
        std::string::npos);
}

TEST_CASE("ports-rope: rope-append writes K and V at the token's page and entry, nothing for the padding token") {
  Run r = run(kvq::cli::verify_command, io("rope-append", append_dump("a-exact", {0x00, 0x42, 0xA5, 0xA5}, cache(0x41, 0x30),
                                                                         cache(0x44, 0xB4))));
  CHECK(r.status == 0);
  CHECK(r.out.find("kvq verify rope-append: BIT-EXACT") != std::string::npos);
  CHECK(r.out.find("2 pages of 2 (NHD)") != std::string::npos);
  // The padding token's Q written (a port that does not skip padding), and a byte of page 0.
  std::vector<std::uint8_t> v = cache(0x44, 0xB4);
  v[0] = 0x00;
  r = run(kvq::cli::verify_command, io("rope-append", append_dump("a-padding", {0x00, 0x42, 0x00, 0x00}, cache(0x41, 0x30), v)));
  CHECK(r.status == 1);
  CHECK(r.out.find("q_rope_out: 0 elements differ, 2 bytes no element addresses changed, of 4") != std::string::npos);
  CHECK(r.out.find("v_cache byte 0: no element addresses this byte: held 0xa5, now 0x00") != std::string::npos);
  // K at the wrong entry (position 0 of the page instead of 1).
  std::vector<std::uint8_t> k(8, 0xA5);
  k[4] = 0x41, k[5] = 0x30;
  r = run(kvq::cli::verify_command, io("rope-append", append_dump("a-entry", {0x00, 0x42, 0xA5, 0xA5}, k, cache(0x44, 0xB4))));
  CHECK(r.status == 1);
  CHECK(r.out.find("k_cache: 2 elements differ, 2 bytes no element addresses changed, of 8") != std::string::npos);
  CHECK(r.out.find("k_cache byte 6: token 0, head 0, dim 0 [page 1, entry 1]") != std::string::npos);
}

TEST_CASE("ports-rope: identify names the arithmetic; bad input exits 2 naming the role") {
  const fs::path dir = quantize_dump("q-identify", {0x00, 0x42}, {0x41, 0x30});
  Run r = run(kvq::cli::identify_command, {"--inputs", (dir / "in").string(), "--outputs", (dir / "out").string()});
  CHECK(r.status == 0);
  CHECK(r.out.find("144 RoPE arithmetic variants tried") != std::string::npos);
  CHECK(r.out.find("exact: this port follows NeoX pairs, no FMA\n") != std::string::npos);
  // quant_scale_q read as a decode scale: (0, 1.25) / 2 = (0, 0.625): codes 0x00, 0x32.
  const fs::path div = quantize_dump("q-divide", {0x00, 0x32}, {0x41, 0x30});
  r = run(kvq::cli::identify_command, {"--inputs", (div / "in").string(), "--outputs", (div / "out").string()});
  CHECK(r.status == 0);
  CHECK(r.out.find("exact: this port follows NeoX pairs, no FMA, value / quant_scale\n") != std::string::npos);
  // A kind the manifest is not; a cache without pos_ids; a float pos_ids.
  CHECK(run(kvq::cli::verify_command, io("rope-append", dir)).status == 2);
  CHECK(run(kvq::cli::verify_command, io("nvfp4", dir)).err.find("does not name the kind") != std::string::npos);
  save(dir / "in" / "pos_ids.npy", f32({1}, {0}));
  r = run(kvq::cli::verify_command, io("rope-quantize", dir));
  CHECK(r.status == 2);
  CHECK(r.err.find("pos_ids: ") != std::string::npos);
  save(dir / "in" / "pos_ids.npy", i32({1}));  // past the cache's one row
  r = run(kvq::cli::verify_command, io("rope-quantize", dir));
  CHECK(r.status == 2);
  CHECK(r.err.find("pos_ids[0] = 1 is outside the cos_sin_cache's 1 rows") != std::string::npos);
}

// A port that computes cos and sin itself (docs/ports.md "RoPE", parameters rope_theta, cos_sin): at
// position 0 every angle is 0, so cos = 1 and sin = 0 exactly under either computed rounding. Q (1,
// 2) stays (1, 2), times 2: codes 0x40, 0x48; K (4, -1): 0x48, 0xB8. Given the cache row (0.5,
// 0.25) above, the port ignored it: verify under the cache fails, identify names the computed cos/sin.
namespace {
fs::path computing_dump(const std::string& name, bool with_cache, const std::string& parameters) {
  const fs::path dir = quantize_dump(name, {0x40, 0x48}, {0x48, 0xB8});
  if (!with_cache) fs::remove(dir / "in" / "cos_sin_cache.npy");
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kind\": \"rope-quantize\", \"tensors\": {\"q_rope\": {\"file\": \"q_rope.npy\"}, \"k_rope\": {\"file\": \"k_rope.npy\"},"
      << (with_cache ? "\"cos_sin_cache\": {\"file\": \"cos_sin_cache.npy\"}," : "")
      << "\"pos_ids\": {\"file\": \"pos_ids.npy\"},"
         "\"q_rope_out\": {\"file\": \"q_rope_out.npy\"}, \"k_rope_out\": {\"file\": \"k_rope_out.npy\"}}, "
      << kParameters << parameters << "}}\n";
  return dir;
}
}  // namespace

TEST_CASE("ports-rope: cos/sin computed by the port (worked out at position 0) verified and told from the cache's") {
  Run r = run(kvq::cli::verify_command, io("rope-quantize", computing_dump("computed", false, ", \"rope_theta\": 10000")));
  CHECK(r.status == 0);
  CHECK(r.out.find("BIT-EXACT (model: NeoX pairs, no FMA, cos/sin computed (nearest FP32 to those of pos * theta^(-2f/rot)))") !=
        std::string::npos);
  r = run(kvq::cli::verify_command,
          io("rope-quantize", computing_dump("computed-fp32", false, ", \"rope_theta\": 10000, \"cos_sin\": \"computed-fp32-angle\"")));
  CHECK(r.status == 0);
  // The cache given and ignored: verify (the cache) fails; identify names the computed cos/sin.
  const fs::path ignored = computing_dump("cache-ignored", true, ", \"rope_theta\": 10000");
  r = run(kvq::cli::verify_command, io("rope-quantize", ignored));
  CHECK(r.status == 1);
  CHECK(r.out.find("q_rope_out byte 0: token 0, head 0, dim 0; x 0x3f800000 = 1, partner 0x40000000 = 2, cos 0x3f000000 = 0.5") !=
        std::string::npos);
  r = run(kvq::cli::identify_command, {"--inputs", (ignored / "in").string(), "--outputs", (ignored / "out").string()});
  CHECK(r.status == 0);
  CHECK(r.out.find("kvq identify: 432 RoPE arithmetic variants tried") != std::string::npos);
  CHECK(r.out.find("exact: this port follows NeoX pairs, no FMA, cos/sin computed (nearest FP32 to those of pos * theta^(-2f/rot))\n") !=
        std::string::npos);
  CHECK(r.out.find("exact: this port follows NeoX pairs, no FMA\n") == std::string::npos);
  // Without rope_theta only the cache is tried, and nothing fits.
  const fs::path no_theta = computing_dump("no-theta", true, "");
  r = run(kvq::cli::identify_command, {"--inputs", (no_theta / "in").string(), "--outputs", (no_theta / "out").string()});
  CHECK(r.status == 1);
  CHECK(r.out.find("kvq identify: 144 RoPE arithmetic variants tried; 0 reproduce every byte") != std::string::npos);
  // Bad input: no cache and no base; a cache claimed but absent; a base <= 0; an unknown source.
  r = run(kvq::cli::verify_command, io("rope-quantize", computing_dump("nothing", false, "")));
  CHECK(r.status == 2);
  CHECK(r.err.find("needs the role \"cos_sin_cache\" (or parameters.rope_theta") != std::string::npos);
  r = run(kvq::cli::verify_command, io("rope-quantize", computing_dump("claims-cache", false, ", \"rope_theta\": 10000, \"cos_sin\": \"cache\"")));
  CHECK(r.status == 2);
  CHECK(r.err.find("\"cos_sin\" is cache, but the manifest names no \"cos_sin_cache\"") != std::string::npos);
  r = run(kvq::cli::verify_command, io("rope-quantize", computing_dump("theta-zero", false, ", \"rope_theta\": 0")));
  CHECK(r.status == 2);
  CHECK(r.err.find("\"rope_theta\" (the base of a port that computes cos/sin) must be a number > 0") != std::string::npos);
  r = run(kvq::cli::verify_command, io("rope-quantize", computing_dump("source", false, ", \"rope_theta\": 10000, \"cos_sin\": \"sincosf\"")));
  CHECK(r.status == 2);
  CHECK(r.err.find("\"cos_sin\" is cache, computed-exact-angle or computed-fp32-angle, got 'sincosf'") != std::string::npos);
}

// Hostile: a computing port whose (position, frequency) pairs would take minutes of 100-digit cos/sin.
TEST_CASE("ports-rope: too many computed cos/sin pairs exit 2 naming rope_theta") {
  const fs::path dir = fs::temp_directory_path() / "kvq-ports-rope-test-many-pairs";
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  const int tokens = 33, dim = 4096;  // 33 positions x 2048 frequencies = 67,584 > 2^16
  std::vector<std::int32_t> pos(tokens);
  for (int i = 0; i < tokens; ++i) pos[static_cast<std::size_t>(i)] = i;
  save(dir / "in" / "q_rope.npy", f32({tokens, 1, dim}, std::vector<float>(static_cast<std::size_t>(tokens) * dim, 1.0f)));
  save(dir / "in" / "k_rope.npy", f32({tokens, 1, dim}, std::vector<float>(static_cast<std::size_t>(tokens) * dim, 1.0f)));
  save(dir / "in" / "pos_ids.npy", i32(pos));
  save(dir / "out" / "q_rope_out.npy", NpyArray{"|u1", {tokens, 1, dim}, std::vector<std::uint8_t>(static_cast<std::size_t>(tokens) * dim)});
  save(dir / "out" / "k_rope_out.npy", NpyArray{"|u1", {tokens, 1, dim}, std::vector<std::uint8_t>(static_cast<std::size_t>(tokens) * dim)});
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kind\": \"rope-quantize\", \"tensors\": {\"q_rope\": {\"file\": \"q_rope.npy\"}, \"k_rope\": {\"file\": \"k_rope.npy\"},"
         "\"pos_ids\": {\"file\": \"pos_ids.npy\"}, \"q_rope_out\": {\"file\": \"q_rope_out.npy\"}, \"k_rope_out\": {\"file\": \"k_rope_out.npy\"}}, "
      << kParameters << ", \"rope_theta\": 10000}}\n";
  const Run r = run(kvq::cli::verify_command, io("rope-quantize", dir));
  CHECK(r.status == 2);
  CHECK(r.err.find("parameters: \"rope_theta\": computing cos/sin for 67584 (position, frequency) pairs is too many") !=
        std::string::npos);
}
