// kvq verify / kvq identify for the manifest kind paged-store (docs/ports.md "Paged stores"): a
// small FP8 store whose caches are written here by hand from the E4M3 table (1.0 is 0x38, 0.5 is
// 0x30), not by the twin, then broken in the ways a port breaks: a wrong addressed byte, a byte
// written outside the slots, a padding token written; and bad input.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.hpp"
#include "proptests/tests/command_run.hpp"
#include "cli/npy.hpp"
#include "formats/recipe_names.hpp"
#include "kernels/paged_store.hpp"

namespace {

namespace fs = std::filesystem;
using kvq::cli::NpyArray;

using kvq::test::Run;
using kvq::test::run;

// Two pages of two slots, one head of 16 dims, NHD: a cache is 2 * 2 * 16 = 64 bytes. Token 0
// (key all 1.0, value all 1.0 in BF16) goes to slot 3 = page 1, position 1 = bytes 48..63; token 1
// is padding (slot -1). k_scale 1, v_scale 2: key codes E4M3(1.0) = 0x38, value codes
// E4M3(0.5) = 0x30. Every other byte keeps the poison 0xA5.
constexpr std::uint8_t kPoison = 0xA5;
constexpr std::int64_t kCacheBytes = 64, kSlotByte = 48;

struct PagedDump {
  std::vector<std::uint8_t> key_cache = std::vector<std::uint8_t>(kCacheBytes, kPoison);
  std::vector<std::uint8_t> value_cache = std::vector<std::uint8_t>(kCacheBytes, kPoison);
  std::string slot_descr = "<i8";
  std::string key_cache_extra = ", \"poison\": \"0xA5\"";
};
PagedDump correct_dump() {
  PagedDump d;
  for (int i = 0; i < 16; ++i) d.key_cache[kSlotByte + i] = 0x38, d.value_cache[kSlotByte + i] = 0x30;
  return d;
}

fs::path write_dump(const std::string& name, const PagedDump& d) {
  const fs::path dir = fs::temp_directory_path() / ("kvq-ports-paged-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  NpyArray kv{"<u2", {2, 1, 16}, std::vector<std::uint8_t>(2 * 16 * 2)};
  for (int i = 0; i < 32; ++i) kv.bytes[2 * i] = 0x80, kv.bytes[2 * i + 1] = 0x3f;  // BF16 1.0 = 0x3f80
  REQUIRE(kvq::cli::write_npy((dir / "in" / "key.npy").string(), kv).empty());
  REQUIRE(kvq::cli::write_npy((dir / "in" / "value.npy").string(), kv).empty());
  NpyArray slots{d.slot_descr, {2}, {}};
  const std::int64_t slot[2] = {3, -1};
  if (d.slot_descr == "<i8") {
    slots.bytes.resize(16);
    std::memcpy(slots.bytes.data(), slot, 16);
  } else {
    const std::int32_t narrow[2] = {3, -1};
    slots.bytes.resize(8);
    std::memcpy(slots.bytes.data(), narrow, 8);
  }
  REQUIRE(kvq::cli::write_npy((dir / "in" / "slot_mapping.npy").string(), slots).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "key_cache.npy").string(), NpyArray{"|u1", {2, 2, 1, 16}, d.key_cache}).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "value_cache.npy").string(), NpyArray{"|u1", {2, 2, 1, 16}, d.value_cache}).empty());
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kvq_port_manifest\": 1, \"kind\": \"paged-store\", \"tensors\": {"
         "\"key\": {\"file\": \"key.npy\", \"dtype\": \"bfloat16\"}, \"value\": {\"file\": \"value.npy\", \"dtype\": \"bfloat16\"},"
         "\"slot_mapping\": {\"file\": \"slot_mapping.npy\"},"
         "\"key_cache\": {\"file\": \"key_cache.npy\""
      << d.key_cache_extra
      << "}, \"value_cache\": {\"file\": \"value_cache.npy\", \"poison\": \"0xA5\"},"
         "\"k_scale\": {\"bits\": \"0x3f800000\"}, \"v_scale\": {\"bits\": \"0x40000000\"}},"
         "\"layout\": {\"kv_layout\": \"NHD\", \"block_size\": 2}}\n";
  return dir;
}

kvq::cli::Args verify_args(const fs::path& d, const std::string& recipe = "fp8-e4m3-tensor") {
  return {recipe, "--inputs", (d / "in").string(), "--outputs", (d / "out").string()};
}

}  // namespace

TEST_CASE("ports-paged: the hand-written FP8 caches are BIT-EXACT against fp8-e4m3-tensor, int64 and int32 slots") {
  for (const std::string descr : {"<i8", "<i4"}) {
    PagedDump d = correct_dump();
    d.slot_descr = descr;
    const Run r = run(kvq::cli::verify_command, verify_args(write_dump("exact", d)));
    CHECK(r.status == 0);
    CHECK(r.out.find("kvq verify paged-store fp8-e4m3-tensor: BIT-EXACT") != std::string::npos);
    CHECK(r.out.find("2 tokens (1 padding) x 1 heads x 16 bf16; NHD, 2 pages of 2 slots") != std::string::npos);
    CHECK(r.out.find("key_cache: every one of 64 bytes as the model writes it") != std::string::npos);
  }
}

TEST_CASE("ports-paged: a wrong addressed byte is located by page, slot, token, head and dim; exit 1") {
  PagedDump d = correct_dump();
  d.key_cache[kSlotByte + 5] = 0x39;  // 1.125
  const Run r = run(kvq::cli::verify_command, verify_args(write_dump("addressed", d)));
  CHECK(r.status == 1);
  CHECK(r.out.find("MISMATCH") != std::string::npos);
  CHECK(r.out.find("key_cache: 1 bytes differ in the slots the tokens address, 0 changed outside them") != std::string::npos);
  CHECK(r.out.find("key_cache byte 53: page 1, position 1 (slot 3); K of token 0, head 0, dim 5 (input 0x3f800000 = 1): "
                   "0x38 (1) -> 0x39 (1.125)") != std::string::npos);
  CHECK(r.out.find("value_cache: every one of 64 bytes") != std::string::npos);
}

TEST_CASE("ports-paged: bytes written outside the addressed slots fail even where every addressed byte is right") {
  PagedDump d = correct_dump();
  d.value_cache[0] = 0x30;  // slot 0, which only the padding token (slot -1) could have meant
  const Run r = run(kvq::cli::verify_command, verify_args(write_dump("untouched", d)));
  CHECK(r.status == 1);
  CHECK(r.out.find("value_cache: 0 bytes differ in the slots the tokens address, 1 changed outside them") != std::string::npos);
  CHECK(r.out.find("value_cache byte 0: page 0, position 0 (slot 0); no token addresses this slot: held 0xa5, now 0x30") !=
        std::string::npos);
}

TEST_CASE("ports-paged: without a poison or before-dump only the addressed bytes are checked, and the report says so") {
  PagedDump d = correct_dump();
  d.key_cache_extra = "";
  d.key_cache[0] = 0x00;  // outside the slots: cannot be judged without the bytes before the call
  const Run r = run(kvq::cli::verify_command, verify_args(write_dump("unknown-before", d)));
  CHECK(r.status == 0);
  CHECK(r.out.find("(the bytes no input addresses not checked: give \"poison\" or \"before\")") != std::string::npos);
}

TEST_CASE("ports-paged: identify names the FP8 recipes that reproduce every byte") {
  const fs::path dir = write_dump("identify", correct_dump());
  const Run r = run(kvq::cli::identify_command, {"--inputs", (dir / "in").string(), "--outputs", (dir / "out").string()});
  CHECK(r.status == 0);
  CHECK(r.out.find("exact: this port follows fp8-e4m3-tensor\n") != std::string::npos);
  PagedDump wrong = correct_dump();
  for (int i = 0; i < 16; ++i) wrong.value_cache[kSlotByte + i] = 0x38;  // 1.0: v_scale ignored
  const fs::path bad = write_dump("identify-none", wrong);
  const Run none = run(kvq::cli::identify_command, {"--inputs", (bad / "in").string(), "--outputs", (bad / "out").string()});
  CHECK(none.status == 1);
  CHECK(none.out.find("nearest (bytes differing):\n    fp8-e4m3-tensor: 16\n") != std::string::npos);
}

TEST_CASE("ports-paged: bad input exits 2 naming the role") {
  const fs::path dir = write_dump("bad", correct_dump());
  // An NVFP4 recipe against FP8 caches.
  Run r = run(kvq::cli::verify_command, verify_args(dir, "nvfp4"));
  CHECK(r.status == 2);
  CHECK(r.err.find("the roles are FP8 caches (key_cache, value_cache), the recipe's element is not E4M3") != std::string::npos);
  // A float slot_mapping; a cache of the wrong shape; a slot past the cache.
  REQUIRE(kvq::cli::write_npy((dir / "in" / "slot_mapping.npy").string(), NpyArray{"<f4", {2}, std::vector<std::uint8_t>(8)}).empty());
  r = run(kvq::cli::verify_command, verify_args(dir));
  CHECK(r.status == 2);
  CHECK(r.err.find("slot_mapping: ") != std::string::npos);
  CHECK(r.err.find("holds <f4; give int32 or int64") != std::string::npos);
  write_dump("bad", correct_dump());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "value_cache.npy").string(), NpyArray{"|u1", {2, 2, 16}, std::vector<std::uint8_t>(64)}).empty());
  r = run(kvq::cli::verify_command, verify_args(dir));
  CHECK(r.status == 2);
  CHECK(r.err.find("value_cache: shape must be [num_blocks, block_size, heads, head_dim]") != std::string::npos);
  write_dump("bad", correct_dump());
  NpyArray far{"<i8", {2}, std::vector<std::uint8_t>(16)};
  const std::int64_t slots[2] = {4, -1};  // 2 pages x 2 slots: slot 4 is past the end
  std::memcpy(far.bytes.data(), slots, 16);
  REQUIRE(kvq::cli::write_npy((dir / "in" / "slot_mapping.npy").string(), far).empty());
  r = run(kvq::cli::verify_command, verify_args(dir));
  CHECK(r.status == 2);
  CHECK(r.err.find("slot_mapping") != std::string::npos);
}

// NVFP4 pages, HND with both sides' scales swizzled: the page comes from kvq's twin (the verdict on
// it is the twin's), and the test is the report's location of a changed scale byte, which the
// report finds by undoing the swizzle (unswizzle_index) where the byte was placed by the layout's
// forward offset (scale_offset).
TEST_CASE("ports-paged: an NVFP4 page's changed scale byte is located through the swizzle") {
  using namespace kvq::kernels;
  PagedStoreShape s;
  s.layout = PagedKvLayout{PagedFormat::nvfp4, KvOrder::hnd, ScaleSwizzle::k_and_v, 3, 8, 2, 32};
  s.recipe = kvq::recipe_from_name("nvfp4")->recipe;
  s.tokens = 5;
  s.input = DType::fp32;
  PagedScales scales;
  scales.k[0] = 0.01f, scales.v[0] = 0.02f;
  std::vector<float> key(5 * 2 * 32), value(key.size());
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = 0.37f * static_cast<float>(i % 23) - 3.0f, value[i] = 1.5f - 0.11f * static_cast<float>(i % 17);
  const std::int64_t slots[5] = {9, 0, -1, 23, 12};
  std::vector<std::uint8_t> page(static_cast<std::size_t>(s.layout.buffer_bytes()), kPoison);
  REQUIRE(paged_store_cpu(s, scales, PagedStoreArgs{key.data(), value.data(), slots, page.data(), nullptr}).ok());
  const std::int64_t off = s.layout.scale_offset(KvSide::v, 2, 7, 1, 1);  // slot 23 = page 2, position 7: token 3
  page[static_cast<std::size_t>(off)] ^= 0x01;
  const fs::path dir = fs::temp_directory_path() / "kvq-ports-paged-test-nvfp4";
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  NpyArray k{"<f4", {5, 2, 32}, std::vector<std::uint8_t>(key.size() * 4)}, v = k;
  std::memcpy(k.bytes.data(), key.data(), k.bytes.size());
  std::memcpy(v.bytes.data(), value.data(), v.bytes.size());
  NpyArray slot{"<i8", {5}, std::vector<std::uint8_t>(40)};
  std::memcpy(slot.bytes.data(), slots, 40);
  REQUIRE(kvq::cli::write_npy((dir / "in" / "key.npy").string(), k).empty());
  REQUIRE(kvq::cli::write_npy((dir / "in" / "value.npy").string(), v).empty());
  REQUIRE(kvq::cli::write_npy((dir / "in" / "slot_mapping.npy").string(), slot).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "kv_cache.npy").string(), NpyArray{"|u1", {3, 2, 2, 8, 18}, page}).empty());
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kind\": \"paged-store\", \"tensors\": {\"key\": {\"file\": \"key.npy\"}, \"value\": {\"file\": \"value.npy\"},"
         "\"slot_mapping\": {\"file\": \"slot_mapping.npy\"}, \"kv_cache\": {\"file\": \"kv_cache.npy\", \"poison\": \"0xA5\"},"
         "\"k_scale\": {\"bits\": \"0x3c23d70a\"}, \"v_scale\": {\"bits\": \"0x3ca3d70a\"}},"
         "\"layout\": {\"kv_layout\": \"HND\", \"scale_swizzle\": \"k_and_v\"}}\n";
  const Run r = run(kvq::cli::verify_command, verify_args(dir, "nvfp4"));
  CHECK(r.status == 1);
  CHECK(r.out.find("kv_cache: 1 bytes differ in the slots the tokens address, 0 changed outside them") != std::string::npos);
  CHECK(r.out.find("kv_cache byte " + std::to_string(off) + ": page 2, position 7 (slot 23); V of token 3, head 1, block scale 1:") !=
        std::string::npos);
}

// A port that writes HND where its manifest says NHD: two heads of 16 dims, two pages of two
// slots; token 0 (head 0 all 1.0, head 1 all 0.5, k_scale = v_scale = 1) goes to slot 1 = page 0,
// position 1. HND puts head h of that position at byte (h * 2 + 1) * 16 (NHD: (1 * 2 + h) * 16):
// codes 0x38 (1.0) at 16..31 and 0x30 (0.5) at 48..63.
TEST_CASE("ports-paged: identify names the layout a port wrote (HND under an NHD manifest)") {
  const fs::path dir = fs::temp_directory_path() / "kvq-ports-paged-test-hnd";
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  NpyArray kv{"<u2", {1, 2, 16}, std::vector<std::uint8_t>(2 * 16 * 2)};
  for (int i = 0; i < 32; ++i) kv.bytes[2 * i] = i < 16 ? 0x80 : 0x00, kv.bytes[2 * i + 1] = 0x3f;  // 1.0 = 0x3f80, 0.5 = 0x3f00
  REQUIRE(kvq::cli::write_npy((dir / "in" / "key.npy").string(), kv).empty());
  REQUIRE(kvq::cli::write_npy((dir / "in" / "value.npy").string(), kv).empty());
  NpyArray slots{"<i8", {1}, std::vector<std::uint8_t>(8, 0)};
  slots.bytes[0] = 1;
  REQUIRE(kvq::cli::write_npy((dir / "in" / "slot_mapping.npy").string(), slots).empty());
  std::vector<std::uint8_t> cache(2 * 2 * 2 * 16, kPoison);
  for (int i = 0; i < 16; ++i) cache[16 + i] = 0x38, cache[48 + i] = 0x30;
  for (const char* name : {"key_cache.npy", "value_cache.npy"})
    REQUIRE(kvq::cli::write_npy((dir / "out" / name).string(), NpyArray{"|u1", {2, 2, 2, 16}, cache}).empty());
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kind\": \"paged-store\", \"tensors\": {"
         "\"key\": {\"file\": \"key.npy\", \"dtype\": \"bfloat16\"}, \"value\": {\"file\": \"value.npy\", \"dtype\": \"bfloat16\"},"
         "\"slot_mapping\": {\"file\": \"slot_mapping.npy\"},"
         "\"key_cache\": {\"file\": \"key_cache.npy\", \"poison\": \"0xA5\"}, \"value_cache\": {\"file\": \"value_cache.npy\", "
         "\"poison\": \"0xA5\"}, \"k_scale\": {\"bits\": \"0x3f800000\"}, \"v_scale\": {\"bits\": \"0x3f800000\"}},"
         "\"layout\": {\"kv_layout\": \"NHD\"}}\n";
  Run r = run(kvq::cli::verify_command, verify_args(dir));
  CHECK(r.status == 1);
  r = run(kvq::cli::identify_command, {"--inputs", (dir / "in").string(), "--outputs", (dir / "out").string()});
  CHECK(r.status == 0);
  CHECK(r.out.find("exact: this port follows fp8-e4m3-tensor (HND)\n") != std::string::npos);
  CHECK(r.out.find("exact: this port follows fp8-e4m3-tensor\n") == std::string::npos);
}

// SGLang's NVFP4 pool (four buffers, one page of block_size = slots): two slots, one head of 16
// dims; token 0 (key and value all 6.0, g = 1 for K and V) goes to slot 1. nvfp4 by hand: bmax 6,
// sf = E4M3(6 / 6 / 1) = 1.0 (0x38), elements 6 / 1 = 6 (E2M1 0x7): data bytes 0x77, scale 0x38.
namespace {
fs::path pool_dump(const std::string& name, std::uint8_t k_scale_byte) {
  const fs::path dir = fs::temp_directory_path() / ("kvq-ports-paged-test-pool-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  NpyArray kv{"<u2", {1, 1, 16}, std::vector<std::uint8_t>(32)};
  for (int i = 0; i < 16; ++i) kv.bytes[2 * i] = 0xC0, kv.bytes[2 * i + 1] = 0x40;  // BF16 6.0 = 0x40c0
  REQUIRE(kvq::cli::write_npy((dir / "in" / "key.npy").string(), kv).empty());
  REQUIRE(kvq::cli::write_npy((dir / "in" / "value.npy").string(), kv).empty());
  NpyArray slots{"<i4", {1}, std::vector<std::uint8_t>(4, 0)};
  slots.bytes[0] = 1;
  REQUIRE(kvq::cli::write_npy((dir / "in" / "slot_mapping.npy").string(), slots).empty());
  std::vector<std::uint8_t> data(2 * 8, kPoison), scale(2, kPoison);
  for (int i = 8; i < 16; ++i) data[i] = 0x77;
  scale[1] = 0x38;
  REQUIRE(kvq::cli::write_npy((dir / "out" / "k_buffer.npy").string(), NpyArray{"|u1", {2, 1, 8}, data}).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "v_buffer.npy").string(), NpyArray{"|u1", {2, 1, 8}, data}).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "v_scale_buffer.npy").string(), NpyArray{"|u1", {2, 1, 1}, scale}).empty());
  scale[1] = k_scale_byte;
  REQUIRE(kvq::cli::write_npy((dir / "out" / "k_scale_buffer.npy").string(), NpyArray{"|u1", {2, 1, 1}, scale}).empty());
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kind\": \"paged-store\", \"tensors\": {"
         "\"key\": {\"file\": \"key.npy\", \"dtype\": \"bfloat16\"}, \"value\": {\"file\": \"value.npy\", \"dtype\": \"bfloat16\"},"
         "\"slot_mapping\": {\"file\": \"slot_mapping.npy\"},"
         "\"k_buffer\": {\"file\": \"k_buffer.npy\", \"poison\": \"0xA5\"}, \"k_scale_buffer\": {\"file\": \"k_scale_buffer.npy\", "
         "\"poison\": \"0xA5\"}, \"v_buffer\": {\"file\": \"v_buffer.npy\", \"poison\": \"0xA5\"}, "
         "\"v_scale_buffer\": {\"file\": \"v_scale_buffer.npy\", \"poison\": \"0xA5\"},"
         "\"k_scale\": {\"bits\": \"0x3f800000\"}, \"v_scale\": {\"bits\": \"0x3f800000\"}}}\n";
  return dir;
}
}  // namespace

TEST_CASE("ports-paged: SGLang's NVFP4 pool buffers (worked out by hand) verify as one page; differences name the buffer") {
  Run r = run(kvq::cli::verify_command, verify_args(pool_dump("exact", 0x38), "nvfp4"));
  CHECK(r.status == 0);
  CHECK(r.out.find("the pool (k_buffer | k_scale_buffer | v_buffer | v_scale_buffer): every one of 36 bytes") != std::string::npos);
  r = run(kvq::cli::verify_command, verify_args(pool_dump("wrong-scale", 0x39), "nvfp4"));
  CHECK(r.status == 1);
  CHECK(r.out.find("k_scale_buffer byte 1: page 0, position 1 (slot 1); K of token 0, head 0, block scale 0") != std::string::npos);
  CHECK(run(kvq::cli::verify_command, verify_args(pool_dump("fp8", 0x38), "fp8-e4m3-tensor")).status == 2);
  // An empty buffer (no slots: every other dimension unbounded) and a missing one exit 2 naming it.
  const fs::path empty = pool_dump("empty", 0x38);
  REQUIRE(kvq::cli::write_npy((empty / "out" / "k_buffer.npy").string(), NpyArray{"|u1", {0, 1, 8}, {}}).empty());
  r = run(kvq::cli::verify_command, verify_args(empty, "nvfp4"));
  CHECK(r.status == 2);
  CHECK(r.err.find("k_buffer: shapes must be [slots, heads, head_dim/2]") != std::string::npos);
  const fs::path missing = pool_dump("missing", 0x38);
  std::string manifest;
  {
    std::ifstream in((missing / "out" / "manifest.json").string());
    std::stringstream text;
    text << in.rdbuf();
    manifest = text.str();
  }
  const std::string v_buffer = "\"v_buffer\": {\"file\": \"v_buffer.npy\", \"poison\": \"0xA5\"}, ";
  REQUIRE(manifest.find(v_buffer) != std::string::npos);
  manifest.erase(manifest.find(v_buffer), v_buffer.size());
  std::ofstream((missing / "out" / "manifest.json").string()) << manifest;
  r = run(kvq::cli::verify_command, verify_args(missing, "nvfp4"));
  CHECK(r.status == 2);
  CHECK(r.err.find("SGLang's NVFP4 pool needs the role \"v_buffer\"") != std::string::npos);
}

// vLLM's per-token-head FP8 store (docs/ports.md "Paged stores"), worked out by hand: one page of
// two slots, two heads of 16 dims, NHD; token 0 at slot 1, token 1 padding. Key head 0 {448, 224,
// -112, 0, ...0}: amax 448, scale 448 / 448 = 1 (FP32 0x3f800000), codes 0x7E 0x76 0xEE 0x00...;
// head 1 {896, 0...}: scale 2 (0x40000000), codes 0x7E 0x00.... Value = -key: the same scales, codes
// with the sign bit (-0 is 0x80). Codes of (slot 1, head h) at bytes (2 + h) * 16; its FP32 scale at
// bytes (2 + h) * 4 of the scale caches [1, 2, 2]. Under fp8-e4m3-token-head-triton an
// all-zero head gets vLLM's floor 1e-6 (FP32 0x358637bd) where fp8-e4m3-tensor stores 0.
namespace {
struct TokenHeadDump {
  std::vector<std::uint8_t> key_cache = std::vector<std::uint8_t>(64, kPoison), value_cache = key_cache;
  std::vector<std::uint8_t> k_scales = std::vector<std::uint8_t>(16, kPoison), v_scales = k_scales;
};
void put_u32(std::vector<std::uint8_t>& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
TokenHeadDump token_head_bytes(bool zero_key) {
  TokenHeadDump d;
  const std::uint8_t k0[4] = {0x7E, 0x76, 0xEE, 0x00}, k1[4] = {0x7E, 0x00, 0x00, 0x00};
  for (int i = 0; i < 16; ++i) {
    const std::uint8_t c0 = i < 4 ? k0[i] : 0x00, c1 = i < 4 ? k1[i] : 0x00;
    d.key_cache[32 + i] = zero_key ? 0x00 : c0, d.key_cache[48 + i] = zero_key ? 0x00 : c1;
    d.value_cache[32 + i] = static_cast<std::uint8_t>(c0 ^ 0x80), d.value_cache[48 + i] = static_cast<std::uint8_t>(c1 ^ 0x80);
  }
  put_u32(d.k_scales, 8, zero_key ? 0x358637bdu : 0x3f800000u), put_u32(d.k_scales, 12, zero_key ? 0x358637bdu : 0x40000000u);
  put_u32(d.v_scales, 8, 0x3f800000u), put_u32(d.v_scales, 12, 0x40000000u);
  return d;
}
fs::path write_token_head_dump(const std::string& name, const TokenHeadDump& d, bool zero_key, const std::string& extra = "",
                               std::int64_t second_slot = -1) {
  const fs::path dir = fs::temp_directory_path() / ("kvq-ports-paged-token-head-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  float key[2][2][16] = {{{448, 224, -112}, {896}}, {{1, 2, 3, 4}, {5, 6, 7, 8}}};  // token 1 is padding
  NpyArray k{"<f4", {2, 2, 16}, std::vector<std::uint8_t>(256)}, v = k;
  for (int i = 0; i < 64; ++i) {
    const float kv = zero_key ? 0.0f : (&key[0][0][0])[i], vv = -(&key[0][0][0])[i];
    std::memcpy(k.bytes.data() + 4 * i, &kv, 4), std::memcpy(v.bytes.data() + 4 * i, &vv, 4);
  }
  REQUIRE(kvq::cli::write_npy((dir / "in" / "key.npy").string(), k).empty());
  REQUIRE(kvq::cli::write_npy((dir / "in" / "value.npy").string(), v).empty());
  NpyArray slots{"<i8", {2}, std::vector<std::uint8_t>(16)};
  const std::int64_t slot[2] = {1, second_slot};
  std::memcpy(slots.bytes.data(), slot, 16);
  REQUIRE(kvq::cli::write_npy((dir / "in" / "slot_mapping.npy").string(), slots).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "key_cache.npy").string(), NpyArray{"|u1", {1, 2, 2, 16}, d.key_cache}).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "value_cache.npy").string(), NpyArray{"|u1", {1, 2, 2, 16}, d.value_cache}).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "k_scale_cache.npy").string(), NpyArray{"<f4", {1, 2, 2}, d.k_scales}).empty());
  REQUIRE(kvq::cli::write_npy((dir / "out" / "v_scale_cache.npy").string(), NpyArray{"|u1", {1, 2, 2, 4}, d.v_scales}).empty());
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kind\": \"paged-store\", \"tensors\": {\"key\": {\"file\": \"key.npy\"}, \"value\": {\"file\": \"value.npy\"},"
         "\"slot_mapping\": {\"file\": \"slot_mapping.npy\"}, \"key_cache\": {\"file\": \"key_cache.npy\", \"poison\": \"0xA5\"},"
         "\"value_cache\": {\"file\": \"value_cache.npy\", \"poison\": \"0xA5\"},"
         "\"k_scale_cache\": {\"file\": \"k_scale_cache.npy\", \"poison\": \"0xA5\"},"
         "\"v_scale_cache\": {\"file\": \"v_scale_cache.npy\", \"poison\": \"0xA5\"}"
      << extra << "}}\n";
  return dir;
}
kvq::cli::Args paged_io(const std::string& recipe, const fs::path& d) {
  return {recipe, "--inputs", (d / "in").string(), "--outputs", (d / "out").string()};
}
}  // namespace

TEST_CASE("ports-paged: vLLM's per-token-head store (worked out by hand): scale caches verified, the 1e-6 floor "
          "identified, differences located, bad manifests exit 2") {
  Run r = run(kvq::cli::verify_command, paged_io("fp8-e4m3-tensor", write_token_head_dump("exact", token_head_bytes(false), false)));
  CHECK(r.status == 0);
  CHECK(r.out.find("kvq verify paged-store fp8-e4m3-tensor: BIT-EXACT") != std::string::npos);
  CHECK(r.out.find("a scale per token and head (k_scale_cache, v_scale_cache)") != std::string::npos);
  CHECK(r.out.find("v_scale_cache: every one of 16 bytes as the model writes it") != std::string::npos);
  // A wrong scale byte (head 1's top byte), a code written into slot 0.
  TokenHeadDump wrong = token_head_bytes(false);
  wrong.k_scales[15] = 0x41;
  wrong.value_cache[0] = 0x00;
  r = run(kvq::cli::verify_command, paged_io("fp8-e4m3-tensor", write_token_head_dump("wrong", wrong, false)));
  CHECK(r.status == 1);
  CHECK(r.out.find("k_scale_cache: 1 bytes differ in the slots the tokens address, 0 changed outside them") != std::string::npos);
  CHECK(r.out.find("value_cache: 0 bytes differ in the slots the tokens address, 1 changed outside them") != std::string::npos);
  CHECK(r.out.find("k_scale_cache byte 15: page 0, position 1 (slot 1); K of token 0, head 1, FP32 scale byte 3: 0x40 -> 0x41") !=
        std::string::npos);
  CHECK(r.out.find("value_cache byte 0: page 0, position 0 (slot 0); no token addresses this slot: held 0xa5, now 0x00") !=
        std::string::npos);
  // The zero key: vLLM's floor; identify names the floored recipe, not the IEEE one.
  const fs::path zero = write_token_head_dump("zero", token_head_bytes(true), true);
  r = run(kvq::cli::verify_command, paged_io("fp8-e4m3-token-head-triton", zero));
  CHECK(r.status == 0);
  r = run(kvq::cli::verify_command, paged_io("fp8-e4m3-tensor", zero));
  CHECK(r.status == 1);
  CHECK(r.out.find("FP32 scale byte 0: 0xbd -> 0x00") == std::string::npos);
  CHECK(r.out.find("FP32 scale byte 0: 0x00 -> 0xbd") != std::string::npos);
  r = run(kvq::cli::identify_command, {"--inputs", (zero / "in").string(), "--outputs", (zero / "out").string()});
  CHECK(r.status == 0);
  CHECK(r.out.find("exact: this port follows fp8-e4m3-token-head-triton\n") != std::string::npos);
  CHECK(r.out.find("exact: this port follows fp8-e4m3-tensor\n") == std::string::npos);
  // Bad input: per-tensor scales beside the scale caches; an NVFP4 recipe; a scale cache of the wrong shape.
  r = run(kvq::cli::verify_command, paged_io("fp8-e4m3-tensor", write_token_head_dump("k-scale", token_head_bytes(false), false,
                                                                                     ", \"k_scale\": {\"bits\": \"0x3f800000\"}")));
  CHECK(r.status == 2);
  CHECK(r.err.find("a per-token-head store has no k_scale / v_scale") != std::string::npos);
  CHECK(run(kvq::cli::verify_command, paged_io("nvfp4", write_token_head_dump("nvfp4", token_head_bytes(false), false))).status == 2);
  r = run(kvq::cli::verify_command, paged_io("fp8-e4m3-tensor", write_token_head_dump("twice", token_head_bytes(false), false, "", 1)));
  CHECK(r.status == 2);
  CHECK(r.err.find("slot_mapping[1] = 1 repeats an earlier token's slot") != std::string::npos);
  r = run(kvq::cli::verify_command, paged_io("fp8-e4m3-tensor", write_token_head_dump("past", token_head_bytes(false), false, "", 2)));
  CHECK(r.status == 2);
  CHECK(r.err.find("slot_mapping[1] = 2 is past the cache's 2 slots") != std::string::npos);
  const fs::path shape = write_token_head_dump("shape", token_head_bytes(false), false);
  REQUIRE(kvq::cli::write_npy((shape / "out" / "k_scale_cache.npy").string(), NpyArray{"<f4", {2, 2}, std::vector<std::uint8_t>(16)}).empty());
  r = run(kvq::cli::verify_command, paged_io("fp8-e4m3-tensor", shape));
  CHECK(r.status == 2);
  CHECK(r.err.find("k_scale_cache: shape must be [num_blocks, block_size, heads] float32") != std::string::npos);
}
