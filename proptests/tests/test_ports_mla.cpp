// kvq verify / kvq identify for the MLA and workspace kinds (docs/ports.md "MLA caches", "MLA
// requantize", "Workspaces"): caches and workspaces written here by hand from the layouts' rules
// (docs/layouts.md) and the E4M3 table, then broken: a wrong byte in a record, a byte of another
// slot or row, a port that rounds another way.
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

void save(const fs::path& p, const NpyArray& a) { REQUIRE(kvq::cli::write_npy(p.string(), a).empty()); }

kvq::cli::Args io(const std::string& kind, const fs::path& d) {
  return {kind, "--inputs", (d / "in").string(), "--outputs", (d / "out").string()};
}

}  // namespace

// kind mla-cache, the 656-byte record (docs/layouts.md) worked out by hand under FlashMLA's
// power-of-two rule (the manifest's tile_recipe mla-fp8-tile128): a token of 576 BF16 ones
// (0x3f80). Each 128-dim tile's max is 1: scale 2^ceil(log2(1/448)) = 2^-8 (FP32 0x3b800000),
// elements 1 / 2^-8 = 256 = E4M3 0x78; the 64 rope dims copied. Two blocks of two slots, the token
// at slot 3, a padding token; every other byte keeps the poison 0xA5.
namespace {
std::vector<std::uint8_t> record_656_of_ones() {
  std::vector<std::uint8_t> r(656, 0x78);
  for (int t = 0; t < 4; ++t) r[512 + 4 * t] = 0x00, r[513 + 4 * t] = 0x00, r[514 + 4 * t] = 0x80, r[515 + 4 * t] = 0x3b;
  for (int i = 0; i < 64; ++i) r[528 + 2 * i] = 0x80, r[529 + 2 * i] = 0x3f;
  return r;
}
const std::string kPow2Rule = ", \"tile_recipe\": \"mla-fp8-tile128\"";
fs::path mla_dump(const std::string& name, const std::vector<std::uint8_t>& cache, std::uint16_t value = 0x3f80,
                  const std::string& parameters = kPow2Rule) {
  const fs::path dir = fs::temp_directory_path() / ("kvq-ports-mla-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  NpyArray k{"<u2", {2, 576}, std::vector<std::uint8_t>(2 * 576 * 2)};
  for (std::size_t i = 0; i < k.bytes.size(); i += 2) k.bytes[i] = value & 0xFF, k.bytes[i + 1] = value >> 8;
  save(dir / "in" / "k.npy", k);
  NpyArray slots{"<i8", {2}, std::vector<std::uint8_t>(16)};
  const std::int64_t s[2] = {3, -1};
  std::memcpy(slots.bytes.data(), s, 16);
  save(dir / "in" / "slot_mapping.npy", slots);
  save(dir / "out" / "k_cache.npy", NpyArray{"|u1", {2, 2 * 656}, cache});
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kind\": \"mla-cache\", \"tensors\": {\"k\": {\"file\": \"k.npy\", \"dtype\": \"bfloat16\"},"
         "\"slot_mapping\": {\"file\": \"slot_mapping.npy\"}, \"k_cache\": {\"file\": \"k_cache.npy\", \"poison\": \"0xA5\"}},"
         "\"parameters\": {\"layout\": \"fp8_nope_with_block_scale_bf16_rope\", \"block_size\": 2"
      << parameters << "}}\n";
  return dir;
}
// The same token of 672s (BF16 0x4428) under an FP32 tile rule with IEEE division
// (fp8-e4m3-tensor-rcp; SGLang's writer is the same with Triton's `/`, whose s = 672 * rcp.approx(448)
// is not 1.5): s = 672 / 448 = 1.5 exactly (0x3fc00000), elements 672 * RN(1/1.5) = 448.0000133 ->
// 448 = 0x7E; under FlashMLA's rule the scale is 2^ceil(log2 1.5) = 2 and the codes 336 -> 320 =
// 0x7A (the tie 336 between 320 and 352 to even).
std::vector<std::uint8_t> record_656_of_672_fp32_tiles() {
  std::vector<std::uint8_t> r(656, 0x7E);
  for (int t = 0; t < 4; ++t) r[512 + 4 * t] = 0x00, r[513 + 4 * t] = 0x00, r[514 + 4 * t] = 0xc0, r[515 + 4 * t] = 0x3f;
  for (int i = 0; i < 64; ++i) r[528 + 2 * i] = 0x28, r[529 + 2 * i] = 0x44;
  return r;
}
std::vector<std::uint8_t> cache_with_slot3(const std::vector<std::uint8_t>& record = record_656_of_ones()) {
  std::vector<std::uint8_t> c(4 * 656, 0xA5);
  const auto& r = record;
  std::copy(r.begin(), r.end(), c.begin() + 3 * 656);
  return c;
}
}  // namespace

TEST_CASE("ports-mla: mla-cache (the 656-byte record worked out by hand) is BIT-EXACT; differences are located") {
  Run r = run(kvq::cli::verify_command, io("mla-cache", mla_dump("exact", cache_with_slot3())));
  CHECK(r.status == 0);
  CHECK(r.out.find("kvq verify mla-cache fp8_nope_with_block_scale_bf16_rope (tile rule mla-fp8-tile128 at tile 128): "
                   "BIT-EXACT") != std::string::npos);
  std::vector<std::uint8_t> c = cache_with_slot3();
  c[3 * 656 + 5] = 0x79;        // a nope code of the token
  c[3 * 656 + 512 + 3] = 0x3c;  // its first tile scale's top byte
  c[10] = 0x00;                 // slot 0, no token's
  r = run(kvq::cli::verify_command, io("mla-cache", mla_dump("wrong", c)));
  CHECK(r.status == 1);
  CHECK(r.out.find("k_cache: 2 bytes differ in the records the tokens address, 1 changed outside them") != std::string::npos);
  CHECK(r.out.find("k_cache byte 10: block 0, entry 0 (slot 0), no token addresses this slot: held 0xa5, now 0x00") !=
        std::string::npos);
  CHECK(r.out.find("k_cache byte 1973: block 1, entry 1 (slot 3), token 0, nope[5]: 0x78 -> 0x79") != std::string::npos);
  CHECK(r.out.find("k_cache byte 2483: block 1, entry 1 (slot 3), token 0, tile scales[3]: 0x3b -> 0x3c") != std::string::npos);
  CHECK(run(kvq::cli::verify_command, io("nvfp4", mla_dump("kind", cache_with_slot3()))).status == 2);
}

// The record's own rule (SGLang's, fp8-e4m3-tensor-rcp-triton per tile) on a token of zeros, the
// case that needs no rcp.approx table value: s = 0 * rcp(448) = 0 (FP32 0x00000000), 1 / 0 = inf,
// every element 0 * inf = NaN, which tl.clamp makes +448 (0x7E); the rope zeros copied.
TEST_CASE("ports-mla: mla-cache under the 656 record's own rule (SGLang's): a zero token worked out by hand") {
  std::vector<std::uint8_t> rec(656, 0x7E);
  std::fill(rec.begin() + 512, rec.end(), 0x00);
  const fs::path dir = mla_dump("sglang-zero", cache_with_slot3(rec), 0x0000, "");
  Run r = run(kvq::cli::verify_command, io("mla-cache", dir));
  CHECK(r.status == 0);
  CHECK(r.out.find("(tile rule fp8-e4m3-tensor-rcp-triton at tile 128): BIT-EXACT") != std::string::npos);
  r = run(kvq::cli::verify_command, io("mla-fp8-tile128", dir));
  CHECK(r.status == 1);  // FlashMLA's rule: scale 2^-13, codes 0x00
  CHECK(r.out.find("token 0, nope[0]: 0x00 -> 0x7e") != std::string::npos);
}

TEST_CASE("ports-mla: mla-cache tile rules: FP32 amax/448 tile scales (worked out by hand) found by identify, named by "
          "the manifest or the command; rules a layout cannot store exit 2") {
  const auto fp32_cache = cache_with_slot3(record_656_of_672_fp32_tiles());
  const fs::path dir = mla_dump("fp32-tiles", fp32_cache, 0x4428);
  Run r = run(kvq::cli::verify_command, io("mla-cache", dir));
  CHECK(r.status == 1);  // the manifest's mla-fp8-tile128: scale 2, codes 0x7A
  CHECK(r.out.find("k_cache: 520 bytes differ in the records the tokens address, 0 changed outside them") != std::string::npos);
  CHECK(r.out.find("token 0, nope[0]: 0x7a -> 0x7e") != std::string::npos);
  r = run(kvq::cli::verify_command, io("fp8-e4m3-tensor-rcp", dir));
  CHECK(r.status == 0);
  CHECK(r.out.find("(tile rule fp8-e4m3-tensor-rcp at tile 128): BIT-EXACT") != std::string::npos);
  r = run(kvq::cli::verify_command,
          io("mla-cache", mla_dump("fp32-tiles-manifest", fp32_cache, 0x4428, ", \"tile_recipe\": \"fp8-e4m3-tensor-rcp\"")));
  CHECK(r.status == 0);
  r = run(kvq::cli::identify_command, {"--inputs", (dir / "in").string(), "--outputs", (dir / "out").string()});
  CHECK(r.status == 0);
  CHECK(r.out.find("exact: this writer follows fp8-e4m3-tensor-rcp\n") != std::string::npos);
  CHECK(r.out.find("exact: this writer follows fp8-e4m3-tensor\n") != std::string::npos);
  CHECK(r.out.find("mla-fp8-tile128: 520\n") != std::string::npos);
  // Rules the layout cannot take: FP4 elements; a bad name in the manifest.
  r = run(kvq::cli::verify_command, io("nvfp4", dir));
  CHECK(r.status == 2);
  CHECK(r.err.find("as the tile rule: recipe must have E4M3 (e4m3fn) elements") != std::string::npos);
  r = run(kvq::cli::verify_command, io("mla-cache", mla_dump("bad-rule", fp32_cache, 0x4428, ", \"tile_recipe\": \"nope\"")));
  CHECK(r.status == 2);
  CHECK(r.err.find("parameters: \"tile_recipe\": unknown recipe 'nope'") != std::string::npos);
}

// kind mla-requant, worked out by hand (docs/layouts.md "1. Requantize 576 -> 656"): one block of
// two slots. Slot 0: nope bytes 0, 1, ..., 255, 0, ..., 255 and rope codes 0x38 (E4M3 1.0); slot 1
// all zero. k_scale = 2: fold stores tile scales 2.0 (0x40000000) and rope BF16(1.0 * 2) = 0x4000;
// drop stores 1.0 (0x3f800000) and BF16(1.0) = 0x3f80; nope bytes are copied either way and the zero
// slot's rope is BF16 +0.
namespace {
std::vector<std::uint8_t> requant_dst(bool fold) {
  std::vector<std::uint8_t> c(2 * 656, 0x00);
  for (int s = 0; s < 2; ++s) {
    std::uint8_t* r = c.data() + s * 656;
    for (int i = 0; s == 0 && i < 512; ++i) r[i] = static_cast<std::uint8_t>(i);
    for (int t = 0; t < 4; ++t) r[514 + 4 * t] = fold ? 0x00 : 0x80, r[515 + 4 * t] = fold ? 0x40 : 0x3f;
    for (int i = 0; s == 0 && i < 64; ++i) r[528 + 2 * i] = fold ? 0x00 : 0x80, r[529 + 2 * i] = fold ? 0x40 : 0x3f;
  }
  return c;
}
fs::path requant_dump(const std::string& name, const std::vector<std::uint8_t>& dst, const std::string& parameters) {
  const fs::path dir = fs::temp_directory_path() / ("kvq-ports-mla-requant-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  std::vector<std::uint8_t> src(2 * 576, 0x00);
  for (int i = 0; i < 512; ++i) src[i] = static_cast<std::uint8_t>(i);
  for (int i = 512; i < 576; ++i) src[i] = 0x38;
  save(dir / "in" / "src.npy", NpyArray{"|u1", {1, 2, 576}, src});
  save(dir / "out" / "dst.npy", NpyArray{"|u1", {1, 2, 656}, dst});
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kind\": \"mla-requant\", \"tensors\": {\"src_cache\": {\"file\": \"src.npy\"},"
         "\"dst_cache\": {\"file\": \"dst.npy\", \"poison\": \"0xA5\"}, \"k_scale\": {\"bits\": \"0x40000000\"}},"
         "\"parameters\": {"
      << parameters << "}}\n";
  return dir;
}
const std::string kRequantLayouts =
    "\"from\": \"fp8_nope_fp8_rope\", \"to\": \"fp8_nope_with_block_scale_bf16_rope\", \"block_size\": 2";
}  // namespace

TEST_CASE("ports-mla: mla-requant (576 -> 656 worked out by hand): fold and drop verified, identified, located") {
  Run r = run(kvq::cli::verify_command, io("mla-requant", requant_dump("fold", requant_dst(true), kRequantLayouts)));
  CHECK(r.status == 0);
  CHECK(r.out.find("kvq verify mla-requant fp8_nope_fp8_rope -> fp8_nope_with_block_scale_bf16_rope (k_scale 0x40000000 = 2, "
                   "fold-k-scale): BIT-EXACT") != std::string::npos);
  r = run(kvq::cli::verify_command,
          io("mla-requant", requant_dump("drop", requant_dst(false), kRequantLayouts + ", \"k_scale_use\": \"drop-k-scale\"")));
  CHECK(r.status == 0);
  // A dropping port checked as folding: 8 scale bytes a slot, 128 rope bytes of slot 0.
  const fs::path dropped = requant_dump("drop-as-fold", requant_dst(false), kRequantLayouts);
  r = run(kvq::cli::verify_command, io("mla-requant", dropped));
  CHECK(r.status == 1);
  CHECK(r.out.find("dst_cache: 144 bytes differ in the converted records, 0 changed outside them") != std::string::npos);
  CHECK(r.out.find("dst_cache byte 514: block 0, entry 0 (slot 0), tile scales[2]: 0x00 -> 0x80") != std::string::npos);
  r = run(kvq::cli::identify_command, {"--inputs", (dropped / "in").string(), "--outputs", (dropped / "out").string()});
  CHECK(r.status == 0);
  CHECK(r.out.find("kvq identify: 2 uses of k_scale tried") != std::string::npos);
  CHECK(r.out.find("exact: this requantizer follows drop-k-scale\n") != std::string::npos);
  CHECK(r.out.find("fold-k-scale: 144\n") != std::string::npos);
  // Bad input: another conversion; a source of the wrong size; the wrong kind named.
  r = run(kvq::cli::verify_command, io("mla-requant", requant_dump("from", requant_dst(true),
                                                                   "\"from\": \"bf16\", \"to\": \"fp8_nope_fp8_rope\", \"block_size\": 2")));
  CHECK(r.status == 2);
  CHECK(r.err.find("parameters: \"from\" and \"to\" name the layouts") != std::string::npos);
  r = run(kvq::cli::verify_command, io("mla-requant", requant_dump("size", requant_dst(true),
                                                                   "\"from\": \"fp8_nope_fp8_rope\", \"to\": "
                                                                   "\"fp8_nope_with_block_scale_bf16_rope\", \"block_size\": 3")));
  CHECK(r.status == 2);
  CHECK(r.err.find("src_cache: 1152 bytes is not a whole number of 1728-byte blocks") != std::string::npos);
  CHECK(run(kvq::cli::verify_command, io("mla-cache", dropped)).status == 2);
}

// kind workspace, worked out by hand (docs/layouts.md "3."): a vLLM NVFP4 page of one block, two
// tokens, one head, head_dim 16 (a side: 2 x 8 data bytes, then 2 scale bytes). K token 0: bytes
// 0x75 (elements 3.0, 6.0 alternating), scale 0x01 (2^-9), factor g / 6 = RN(1/6): 3 x 2^-9 x
// RN(1/6) = 2^-10 (1 + 2^-25) rounds once to 2^-9 (0x01) but through FP32 or BF16 to the tie 2^-10,
// then to even 0 (0x00); 6 x 2^-9 x RN(1/6) is 0x01 either way. V token 0: bytes 0x77 (6.0), scale
// 0x6A (80), factor 1: 480, satfinite 448 (0x7E), PyTorch's cast NaN (0x7F). Token 1 is all zero
// (codes 0x00). The workspaces hold three rows (poison 0xA5): the third is no request's.
namespace {
struct WorkspaceBytes {
  std::vector<std::uint8_t> k, v;
};
WorkspaceBytes workspace_bytes(bool sglang) {
  WorkspaceBytes w{std::vector<std::uint8_t>(48, 0xA5), std::vector<std::uint8_t>(48, 0xA5)};
  for (int d = 0; d < 16; ++d) {
    w.k[d] = (d % 2 == 0 && sglang) ? 0x00 : 0x01;
    w.v[d] = sglang ? 0x7F : 0x7E;
    w.k[16 + d] = w.v[16 + d] = 0x00;
  }
  return w;
}
fs::path workspace_dump(const std::string& name, const WorkspaceBytes& out, const std::string& parameters = "") {
  const fs::path dir = fs::temp_directory_path() / ("kvq-ports-workspace-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  std::vector<std::uint8_t> page(2 * 18, 0x00);  // [K: 2 x 8 data, 2 scales][V: the same]
  for (int i = 0; i < 8; ++i) page[i] = 0x75, page[18 + i] = 0x77;
  page[16] = 0x01, page[18 + 16] = 0x6A;
  save(dir / "in" / "kv_cache.npy", NpyArray{"|u1", {1, 2, 2, 1, 9}, page});
  NpyArray tables{"<i4", {1, 1}, std::vector<std::uint8_t>(4, 0)};
  save(dir / "in" / "block_tables.npy", tables);
  NpyArray cu{"<i8", {2}, std::vector<std::uint8_t>(16, 0)};
  cu.bytes[8] = 2;
  save(dir / "in" / "cu_seq_lens.npy", cu);
  save(dir / "out" / "k_workspace.npy", NpyArray{"|u1", {3, 1, 16}, out.k});
  save(dir / "out" / "v_workspace.npy", NpyArray{"|u1", {3, 1, 16}, out.v});
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kind\": \"workspace\", \"tensors\": {\"kv_cache\": {\"file\": \"kv_cache.npy\"},"
         "\"block_tables\": {\"file\": \"block_tables.npy\"}, \"cu_seq_lens\": {\"file\": \"cu_seq_lens.npy\"},"
         "\"k_scale\": {\"bits\": \"0x3f800000\"}, \"v_scale\": {\"bits\": \"0x3f800000\"},"
         "\"k_workspace\": {\"file\": \"k_workspace.npy\", \"poison\": \"0xA5\"},"
         "\"v_workspace\": {\"file\": \"v_workspace.npy\", \"poison\": \"0xA5\"}},"
         "\"parameters\": {\"k_workspace_scale\": 6"
      << parameters << "}}\n";
  return dir;
}
}  // namespace

TEST_CASE("ports-mla: workspace (worked out by hand): kvq's single rounding and SGLang's FP32/BF16/non-saturating "
          "rounding verified, identified, located") {
  Run r = run(kvq::cli::verify_command, io("workspace", workspace_dump("once", workspace_bytes(false))));
  CHECK(r.status == 0);
  CHECK(r.out.find("kvq verify workspace (rounding once): BIT-EXACT") != std::string::npos);
  const fs::path sglang = workspace_dump("sglang", workspace_bytes(true));
  r = run(kvq::cli::verify_command, io("workspace", sglang));
  CHECK(r.status == 1);
  CHECK(r.out.find("k_workspace: 8 bytes differ in the batch's rows, 0 changed outside them") != std::string::npos);
  CHECK(r.out.find("v_workspace: 16 bytes differ in the batch's rows") != std::string::npos);
  CHECK(r.out.find("k_workspace byte 0: row 0 (request 0, position 0; page 0, entry 0), head 0, dim 0: e2m1 0x5 = 3 x e4m3 "
                   "0x01 = 0.001953125 x 0.166666672: 0x01 = 0.001953125 -> 0x00 = 0") != std::string::npos);
  r = run(kvq::cli::identify_command, {"--inputs", (sglang / "in").string(), "--outputs", (sglang / "out").string()});
  CHECK(r.status == 0);
  CHECK(r.out.find("kvq identify: 8 workspace roundings tried") != std::string::npos);
  CHECK(r.out.find("exact: this workspace rounds fp32-products+via-bf16+nonsaturating\n") != std::string::npos);
  CHECK(r.out.find("    once: 24\n") != std::string::npos);
  r = run(kvq::cli::verify_command, io("workspace", workspace_dump("sglang-named", workspace_bytes(true),
                                                                   ", \"rounding\": \"fp32-products+via-bf16+nonsaturating\"")));
  CHECK(r.status == 0);
  // A byte of the row no request owns.
  WorkspaceBytes stray = workspace_bytes(false);
  stray.v[40] = 0x00;
  r = run(kvq::cli::verify_command, io("workspace", workspace_dump("stray", stray)));
  CHECK(r.status == 1);
  CHECK(r.out.find("v_workspace byte 40: row 2, no request's row: held 0xa5, now 0x00") != std::string::npos);
  // Bad input: an unknown rounding; a manifest of another kind.
  r = run(kvq::cli::verify_command, io("workspace", workspace_dump("bad-rounding", workspace_bytes(false), ", \"rounding\": \"twice\"")));
  CHECK(r.status == 2);
  CHECK(r.err.find("parameters: \"rounding\": 'twice' is 'once' or") != std::string::npos);
  CHECK(run(kvq::cli::verify_command, io("nvfp4", sglang)).status == 2);
  CHECK(run(kvq::cli::verify_command, io("mla-cache", sglang)).status == 2);
}

// Hostile manifests for the MLA and workspace kinds: each exits 2 naming the argument, none runs
// away (an empty page would leave the other dimensions unbounded by any file).
TEST_CASE("ports-mla: bad MLA and workspace manifests exit 2 naming the argument") {
  // A workspace whose page has no blocks; an empty rounding; a table without columns.
  const fs::path empty = workspace_dump("no-blocks", workspace_bytes(false));
  save(empty / "in" / "kv_cache.npy", NpyArray{"|u1", {0, 2, 2, 1, 9}, {}});
  Run r = run(kvq::cli::verify_command, io("workspace", empty));
  CHECK(r.status == 2);
  CHECK(r.err.find("kv_cache: shape must be [num_blocks, 2, block_size, heads, head_dim/2 + head_dim/16], every dimension >= 1") !=
        std::string::npos);
  r = run(kvq::cli::verify_command, io("workspace", workspace_dump("empty-rounding", workspace_bytes(false), ", \"rounding\": \"\"")));
  CHECK(r.status == 2);
  CHECK(r.err.find("parameters: \"rounding\" must be a string: once, or") != std::string::npos);
  const fs::path no_columns = workspace_dump("no-columns", workspace_bytes(false));
  save(no_columns / "in" / "block_tables.npy", NpyArray{"<i4", {1, 0}, {}});
  r = run(kvq::cli::verify_command, io("workspace", no_columns));
  CHECK(r.status == 2);
  CHECK(r.err.find("block_tables: ") != std::string::npos);
  // k_scale_use that is not a name; an MLA cache of a layout no writer quantizes.
  r = run(kvq::cli::verify_command,
          io("mla-requant", requant_dump("use-number", requant_dst(true), kRequantLayouts + ", \"k_scale_use\": 1")));
  CHECK(r.status == 2);
  CHECK(r.err.find("parameters: \"k_scale_use\" is fold-k-scale or drop-k-scale") != std::string::npos);
  const fs::path bf16 = mla_dump("bf16-layout", cache_with_slot3());
  std::ofstream((bf16 / "out" / "manifest.json").string())
      << "{\"kind\": \"mla-cache\", \"tensors\": {\"k\": {\"file\": \"k.npy\", \"dtype\": \"bfloat16\"},"
         "\"k_cache\": {\"file\": \"k_cache.npy\"}}, \"parameters\": {\"layout\": \"bf16\", \"block_size\": 2}}\n";
  r = run(kvq::cli::verify_command, io("mla-cache", bf16));
  CHECK(r.status == 2);
  CHECK(r.err.find("parameters: \"layout\" must be a layout the writers quantize") != std::string::npos);
}

// kind mla-dequant (docs/ports.md "MLA dequantize"), worked out by hand: one block of two 656-byte
// records. Slot 0: nope codes 0x3A (1.25) under tile scales 0x3f6f3333 (15676211 x 2^-24), rope BF16
// 0x4040 (3.0). 1.25 x s = 78381055 x 2^-26, just below 1.16796875 = 1 + 21.5/128, the midpoint of
// BF16 0x3f95 and 0x3f96: rounded once it is 0x3f95; rounded to FP32 first (a step of 8 units) it is
// that midpoint, and then to even 0x3f96 (SGLang's `code.to(fp32) * scale` then `.to(bf16)`). Slot
// 1: zeros (codes 0x00, scales 0, rope 0), every value +0.
namespace {
fs::path dequant_dump(const std::string& name, bool fp32_product, const std::string& extra_tensors = "",
                      std::int64_t rows = 2, const std::vector<std::int64_t>& indices = {}) {
  const fs::path dir = fs::temp_directory_path() / ("kvq-ports-mla-dequant-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  fs::create_directories(dir / "out");
  std::vector<std::uint8_t> cache(2 * 656, 0x00);
  for (int i = 0; i < 512; ++i) cache[i] = 0x3A;
  for (int t = 0; t < 4; ++t) cache[512 + 4 * t] = 0x33, cache[513 + 4 * t] = 0x33, cache[514 + 4 * t] = 0x6f, cache[515 + 4 * t] = 0x3f;
  for (int i = 0; i < 64; ++i) cache[528 + 2 * i] = 0x40, cache[529 + 2 * i] = 0x40;
  save(dir / "in" / "k_cache.npy", NpyArray{"|u1", {2, 656}, cache});
  std::vector<std::uint8_t> slot0(2 * 576);
  for (int d = 0; d < 576; ++d) slot0[2 * d] = d < 512 ? (fp32_product ? 0x96 : 0x95) : 0x40, slot0[2 * d + 1] = d < 512 ? 0x3f : 0x40;
  const std::vector<std::int64_t> order = indices.empty() ? std::vector<std::int64_t>{0, 1} : indices;
  NpyArray out{"<u2", {rows, 576}, std::vector<std::uint8_t>(static_cast<std::size_t>(rows) * 2 * 576, 0x00)};
  for (std::int64_t r = 0; r < rows && r < static_cast<std::int64_t>(order.size()); ++r)
    if (order[r] == 0) std::copy(slot0.begin(), slot0.end(), out.bytes.begin() + r * 2 * 576);
  save(dir / "out" / "output.npy", out);
  std::string tensors = "\"k_cache\": {\"file\": \"k_cache.npy\"}, \"output\": {\"file\": \"output.npy\", \"dtype\": \"bfloat16\"}";
  if (!indices.empty()) {
    NpyArray idx{"<i8", {static_cast<std::int64_t>(indices.size())}, std::vector<std::uint8_t>(8 * indices.size())};
    std::memcpy(idx.bytes.data(), indices.data(), idx.bytes.size());
    save(dir / "in" / "indices.npy", idx);
    tensors += ", \"indices\": {\"file\": \"indices.npy\"}";
  }
  std::ofstream((dir / "out" / "manifest.json").string())
      << "{\"kind\": \"mla-dequant\", \"tensors\": {" << tensors << extra_tensors
      << "}, \"parameters\": {\"layout\": \"fp8_nope_with_block_scale_bf16_rope\", \"block_size\": 2}}\n";
  return dir;
}
}  // namespace

TEST_CASE("ports-mla: mla-dequant (worked out by hand): the FP32 product verified, the single rounding identified, "
          "differences located, gathers by indices, bad manifests exit 2") {
  Run r = run(kvq::cli::verify_command, io("mla-dequant", dequant_dump("fp32", true)));
  CHECK(r.status == 0);
  CHECK(r.out.find("kvq verify mla-dequant fp8_nope_with_block_scale_bf16_rope (code x scale, fp32-product, to bf16): "
                   "BIT-EXACT") != std::string::npos);
  CHECK(r.out.find("output: every one of 1152 values as the model dequantizes them") != std::string::npos);
  // A port that rounds the exact product once: every nope value of slot 0 is one BF16 ulp lower.
  const fs::path once = dequant_dump("once", false);
  r = run(kvq::cli::verify_command, io("mla-dequant", once));
  CHECK(r.status == 1);
  CHECK(r.out.find("output: 512 values differ, of 1152") != std::string::npos);
  CHECK(r.out.find("row 0 (slot 0: block 0, entry 0), nope[0]: 0x3f96 (1.171875) -> 0x3f95 (1.1640625)") != std::string::npos);
  r = run(kvq::cli::identify_command, {"--inputs", (once / "in").string(), "--outputs", (once / "out").string()});
  CHECK(r.status == 0);
  CHECK(r.out.find("kvq identify: 2 dequantize roundings tried; 1 reproduce every output value") != std::string::npos);
  CHECK(r.out.find("exact: this dequantizer rounds exact-product\n") != std::string::npos);
  CHECK(r.out.find("next nearest (values differing):\n    fp32-product: 512\n") != std::string::npos);
  // Gathered rows: slot 1, then slot 0; the rope of a row that should be slot 0's.
  r = run(kvq::cli::verify_command, io("mla-dequant", dequant_dump("gather", true, "", 2, {1, 0})));
  CHECK(r.status == 0);
  const fs::path swapped = dequant_dump("swapped", true, "", 2, {0, 1});
  std::ofstream((swapped / "out" / "manifest.json").string())
      << "{\"kind\": \"mla-dequant\", \"tensors\": {\"k_cache\": {\"file\": \"k_cache.npy\"}, \"output\": {\"file\": \"output.npy\", "
         "\"dtype\": \"bfloat16\"}, \"indices\": {\"file\": \"indices.npy\"}}, \"parameters\": {\"layout\": "
         "\"fp8_nope_with_block_scale_bf16_rope\", \"block_size\": 2}}\n";
  NpyArray idx{"<i8", {2}, std::vector<std::uint8_t>(16)};
  const std::int64_t reversed[2] = {1, 0};
  std::memcpy(idx.bytes.data(), reversed, 16);
  save(swapped / "in" / "indices.npy", idx);
  r = run(kvq::cli::verify_command, io("mla-dequant", swapped));
  CHECK(r.status == 1);
  CHECK(r.out.find("output: 1152 values differ, of 1152") != std::string::npos);
  CHECK(r.out.find("row 0 (slot 1: block 0, entry 1), nope[0]: 0x0000 (0) -> 0x3f96 (1.171875)") != std::string::npos);
  // Bad input: an index past the cache, rows that do not match the indices, the wrong kind named.
  r = run(kvq::cli::verify_command, io("mla-dequant", dequant_dump("past", true, "", 2, {0, 2})));
  CHECK(r.status == 2);
  CHECK(r.err.find("indices: entry 1 is 2, not a slot of the cache (0..1)") != std::string::npos);
  r = run(kvq::cli::verify_command, io("mla-dequant", dequant_dump("rows", true, "", 3)));
  CHECK(r.status == 2);
  CHECK(r.err.find("output: ") != std::string::npos);
  CHECK(r.err.find("must be [2, 576]") != std::string::npos);
  CHECK(run(kvq::cli::verify_command, io("mla-cache", dequant_dump("kind", true))).status == 2);
  CHECK(run(kvq::cli::verify_command, io("mla-dequant", dequant_dump("role", true, ", \"k\": {\"file\": \"x.npy\"}"))).status == 2);
}
