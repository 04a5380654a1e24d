// A port's tensors on disk: a JSON manifest naming roles, .npy or .safetensors files
// (docs/ports.md "Manifest"). Read into ports::PortData for kvq verify / kvq identify.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>

#include "cli/npy.hpp"
#include "oracle/verify.hpp"
#include "oracle/verify_mla.hpp"
#include "oracle/verify_paged.hpp"
#include "oracle/verify_rope.hpp"
#include "oracle/verify_workspace.hpp"

namespace kvq::cli {

struct PortFiles {
  std::string inputs, outputs;  // directories: x (and a given global scale) / what the port wrote
  std::string manifest;         // empty: OUTPUTS/manifest.json, else INPUTS/manifest.json
  // The Python package (docs/python.md): no files; the manifest's text, and its tensors by the names
  // the manifest gives as "file".
  const std::map<std::string, NpyArray>* memory = nullptr;
  std::string manifest_text;
};

// The manifest's "kind": what the port computes (docs/ports.md). quantize (the default): a flat
// quantizer, read into `data`; paged-store: a paged KV store, read into `paged` (its recipe the
// one the command names, given to load_port); rope-quantize, rope-append: FlashInfer's fused RoPE +
// FP8 calls, read into `rope`; mla-cache, mla-requant: an MLA cache writer or requantizer, read into
// `mla` (MlaPort::call says which); workspace: an NVFP4 paged cache -> E4M3 workspace, read into
// `workspace`.
enum class PortKind : std::uint8_t { quantize, paged_store, rope, mla, workspace };

struct LoadedPort {
  PortKind kind = PortKind::quantize;
  ports::PortData data;
  ports::PagedPort paged;
  ports::RopePort rope;
  ports::MlaPort mla;
  ports::WorkspacePort workspace;
  std::string recipe;    // the manifest's "recipe", if any
  std::string manifest;  // the path read
};

// What kvq verify / kvq identify check: RECIPE or kind (verify's argument), the tensors (files, or
// memory: the Python package), how many differences to show, identify's most changes.
// A difference of a verdict as named fields: integers, numbers and names (the Python package's
// report records, docs/python.md).
using RecordValue = std::variant<std::int64_t, double, std::string>;
using DifferenceRecord = std::map<std::string, RecordValue>;

struct PortRequest {
  std::string recipe;
  PortFiles files;
  int show = 8;
  int changes = 2;
  std::vector<DifferenceRecord>* records = nullptr;  // verify_port: where the first differences go as records
};
// Their verdicts: the report on out, exit status 0 (bit-exact / a variant reproduces every output),
// 1 (a mismatch / none does) or 2 (bad input: the message on err names the file or role).
int verify_port(const PortRequest& request, std::ostream& out, std::ostream& err);
int identify_port(const PortRequest& request, std::ostream& out, std::ostream& err);

// "" on success, else a message naming the file and the role. recipe: the recipe the command
// checks against (the paged kinds read their caches' layout from it; nullptr: the flat kind only).
std::string load_port(const PortFiles& files, LoadedPort* out, const Recipe* recipe = nullptr);

}  // namespace kvq::cli
