// A prefill workspace port checked from its tensors (docs/ports.md "Workspaces"): previous K/V of
// an NVFP4 paged cache (the vLLM page, docs/layouts.md) requantized into contiguous E4M3
// workspaces for a batch given block tables and cu_seq_lens. The model is kvq's twin
// (nvfp4_paged_to_workspace_cpu) under the port's rounding (WorkspaceRounding: kvq's single
// satfinite rounding, or SGLang's FP32 products through BF16 and a non-saturating cast) run on the
// workspaces as they were before the call; both workspaces are compared byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/mla_kernels.hpp"
#include "kernels/status.hpp"
#include "oracle/layout_identification.hpp"

namespace kvq::ports {

struct WorkspacePort {
  kernels::WorkspaceBatch batch;  // an NVFP4 recipe, the page geometry, batch, table width, rows, rounding
  std::vector<std::uint8_t> cache;  // the NVFP4 paged cache the port read
  std::vector<std::int32_t> block_tables, cu_seq_lens;
  float factor[2] = {1.0f, 1.0f};  // K, V: the tensor decode scale g / the workspace decode scale
  // The workspaces after the call and before it (a poison byte or a dump; else before = after and
  // before_known false). Each holds at least workspace_tokens rows of heads x head_dim bytes.
  std::vector<std::uint8_t> after[2], before[2];
  bool before_known[2] = {true, true};
};

// One differing byte, located by workspace row, head and dim, and where the row lies: its
// request and position, the page and the entry the element came from, its E2M1 code and E4M3
// scale.
struct WorkspaceDifference {
  int side = 0;  // 0: k_workspace, 1: v_workspace
  std::int64_t offset = 0;
  std::uint8_t before = 0, expected = 0, actual = 0;
  bool addressed = false;  // a row the batch writes (else a row past workspace_tokens)
  std::int64_t row = 0, head = 0, dim = 0, request = -1, position = -1, page = -1, entry = -1;
  std::uint8_t code = 0, scale = 0;
};

struct WorkspaceComparison {
  Status error;
  std::int64_t bytes[2] = {}, addressed_mismatches[2] = {}, untouched_changed[2] = {};
  std::vector<WorkspaceDifference> first;
  bool exact() const {
    return error.ok() && addressed_mismatches[0] == 0 && addressed_mismatches[1] == 0 && untouched_changed[0] == 0 &&
           untouched_changed[1] == 0;
  }
  std::int64_t differing() const {
    return addressed_mismatches[0] + addressed_mismatches[1] + untouched_changed[0] + untouched_changed[1];
  }
};

WorkspaceComparison compare_workspace(const WorkspacePort& p, std::size_t keep);
std::string describe_workspace(const WorkspacePort& p, const WorkspaceComparison& c);

// A rounding's name: "once" (kvq's), else its departures joined by '+' ("fp32-products",
// "via-bf16", "nonsaturating"); parse_rounding reads either form back.
std::string name_of(const WorkspaceRounding& w);
Status parse_rounding(const std::string& text, WorkspaceRounding* out);

// `kvq identify` for a workspace: the eight roundings, tried on both workspaces.
struct WorkspaceCandidate {
  WorkspaceRounding rounding;
  WorkspaceComparison comparison;
};
using WorkspaceIdentification = LayoutIdentification<WorkspaceCandidate>;
WorkspaceIdentification identify_workspace(const WorkspacePort& p, std::size_t nearest);

}  // namespace kvq::ports
