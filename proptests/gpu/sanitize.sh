#!/usr/bin/env bash
# compute-sanitizer over one property of every kernel family (docs/cli.md, "Untrusted input";
# the results go in docs/performance.md's reliability section): memcheck (out-of-bounds and
# misaligned accesses, leaks), racecheck (shared-memory hazards), initcheck (reads of
# uninitialised device memory), synccheck (barrier misuse). A property runs a few cases under
# each tool; any report or failed property is a finding.
#
#   bash proptests/gpu/sanitize.sh KVQ OUT [CASES]     (on a machine with a GPU and compute-sanitizer)
# Prints one line per property and tool, writes each tool's log under OUT, exits 1 on a finding.
set -uo pipefail
KVQ=$1; OUT=$2; CASES=${3:-20}
mkdir -p "$OUT"
PROPERTIES=(
  gpu/kernels/nvfp4/bf16/device-vs-cpu-twin                       # two-level quantize and dequantize, packed words
  gpu/kernels/nvfp4-4over6-paper/bf16/device-vs-cpu-twin          # the occupied 4over6 kernel (code table in shared memory)
  gpu/kernels/nvfp4-modelopt/fp32/device-vs-cpu-twin              # the generic kernel (engine variants)
  gpu/kernels/mxfp4-floor/fp32/device-vs-cpu-twin                 # lane-split MX blocks
  gpu/kernels/mla-fp8-tile128/bf16/device-vs-cpu-twin             # lane-split 128-element tiles
  gpu/kernels/fp8-e4m3-tensor/bf16/device-vs-cpu-twin             # per-tensor spans
  gpu/kernels/nibble-decode/nvfp4/workspace-e4m3/device-equals-twin-every-code-scale-factor  # E4M3 workspace, 4-bit
  gpu/kernels/byte-workspace/mxfp8-e4m3-floor/workspace-e4m3/device-equals-twin-every-code-scale-factor  # 8-bit
  gpu/paged/nvfp4/device-vs-cpu-twin-whole-cache                  # paged NVFP4 store
  gpu/paged/fp8-e4m3-tensor/device-vs-cpu-twin-whole-cache        # paged FP8 store
  gpu/paged/device-rejects-bad-slots-and-writes-nothing           # paged store, bad slots
  gpu/rope/fused/device-vs-cpu-twin                               # fused RoPE + FP8 + paged append
  gpu/rope/unfused/device-vs-cpu-twin
  gpu/rope/fused/device-skips-unplaceable-tokens
  gpu/mla/requant-576-to-656/fold-k-scale/device-vs-cpu-twin      # MLA requantize
  gpu/mla/quantize-model1_fp8_sparse/device-vs-cpu-twin           # MLA quantize
  gpu/mla/dequantize-fp8_nope_with_block_scale_bf16_rope/device-vs-cpu-twin
  gpu/mla/workspace-nvfp4-paged/bad-pages-and-rows-stay-in-bounds # NVFP4 paged -> E4M3 workspace
)
findings=0
for p in "${PROPERTIES[@]}"; do
  for tool in memcheck racecheck initcheck synccheck; do
    log="$OUT/$(echo "$p" | tr '/' '_').$tool.log"
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 \
      "$KVQ" check --device cuda --property "$p" --cases "$CASES" > "$log" 2>&1
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    verdict=$([ $rc -eq 0 ] && echo clean || echo "FINDING (exit $rc)")
    [ $rc -eq 0 ] || findings=$((findings + 1))
    printf '%-90s %-9s %s %s\n' "$p" "$tool" "$verdict" "$summary"
  done
done
echo "sanitize: ${#PROPERTIES[@]} properties x 4 tools, $findings with findings"
[ $findings -eq 0 ]
