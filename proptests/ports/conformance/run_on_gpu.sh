#!/usr/bin/env bash
# The conformance run on a GPU machine without internet, from what stage.py and
# stage_flashinfer.sh prepared: installs the staged wheels into a scratch site folder, runs the
# probes (experiments/probes/torch_sum_order.py, div_full.py, log2_ceil.py, torch_compile_nvfp4.py)
# and run_conformance.py, and leaves
# summary.json and the logs in OUT.
#
#   bash proptests/ports/conformance/run_on_gpu.sh STAGE FLASHINFER_STAGE KVQ OUT [run_conformance args...]
# KVQ_PROBES: the probes to run (default all four; "" none); KVQ_CONFORMANCE_TIMEOUT: seconds (540).
set -uo pipefail
STAGE=$(realpath "$1"); FI=$(realpath "$2"); KVQ=$(realpath "$3"); OUT=$4; shift 4
cd "$(dirname "$0")/../../.."
mkdir -p "$OUT" /tmp/kvq-site /tmp/kvq-fi-cache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/kvq-site "$STAGE"/wheels/*.whl \
  || { echo "run_on_gpu: wheel install failed"; exit 2; }
export PYTHONPATH=/tmp/kvq-site:$FI${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export FLASHINFER_STAGE=$FI  # flashinfer_fns.py imports flashinfer from here only (not from STAGE)
export FLASHINFER_CUDA_ARCH_LIST=9.0 FLASHINFER_WORKSPACE_BASE=/tmp/kvq-fi-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/device.txt"
for probe in ${KVQ_PROBES-torch_sum_order div_full log2_ceil torch_compile_nvfp4}; do  # KVQ_PROBES="" skips them
  timeout 120 python3 "experiments/probes/$probe.py" > "$OUT/probe-$probe.txt" 2>&1 || echo "probe $probe: exit $?" >> "$OUT/probe-$probe.txt"
done
timeout "${KVQ_CONFORMANCE_TIMEOUT:-540}" python3 proptests/ports/conformance/run_conformance.py --root "$STAGE" --out /tmp/kvq-conformance --kvq "$KVQ" "$@" \
  > "$OUT/conformance.log" 2>&1
echo "run_conformance: exit $?" >> "$OUT/conformance.log"
cp /tmp/kvq-conformance/summary.json "$OUT/" 2>/dev/null
tail -5 "$OUT/conformance.log"
