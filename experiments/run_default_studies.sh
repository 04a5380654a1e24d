#!/usr/bin/env bash
# The default report: every study at its default size (`kvq study all`, 2^20 samples per
# configuration), then the notebooks executed headless into HTML pages and PNGs, and an index page.
#
#   bash experiments/run_default_studies.sh [OUT]     OUT defaults to build/report
#
# Needs build/kvq and .venv with numpy, pandas, matplotlib, nbconvert and ipykernel (cli/setup.sh
# installs them). Extra arguments for kvq study go in KVQ_STUDY_ARGS, e.g. KVQ_STUDY_ARGS="--samples 65536".
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build/report}"
mkdir -p "$out/studies" "$out/png"
out=$(cd "$out" && pwd)  # absolute: the notebooks run in notebooks/
start=$(date +%s)
# shellcheck disable=SC2086
build/kvq study all --out "$out/studies" ${KVQ_STUDY_ARGS:-}
studies_done=$(date +%s)

export KVQ_STUDY_DIR="$out/studies" KVQ_PNG_DIR="$out/png"
pages=()
for notebook in qsnr crest scales attention errors; do
  echo "kvq report: notebooks/$notebook.ipynb"
  .venv/bin/jupyter nbconvert --to html --execute --log-level=WARN --output-dir "$out" \
    --output "$notebook" "notebooks/$notebook.ipynb"
  pages+=("$notebook")
done
end=$(date +%s)

{
  echo "<!doctype html><html><head><meta charset='utf-8'><title>kvq error studies</title></head><body>"
  echo "<h1>kvq error studies</h1><p>commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown),"
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'); studies $((studies_done - start)) s, notebooks $((end - studies_done)) s."
  echo "Definitions: docs/studies.md. CSVs and manifests: <a href='studies/'>studies/</a>.</p><ul>"
  for page in "${pages[@]}"; do echo "<li><a href='$page.html'>$page</a></li>"; done
  echo "</ul>"
  for png in "$out"/png/*.png; do echo "<h3>$(basename "$png" .png)</h3><img src='png/$(basename "$png")' width='900'>"; done
  echo "</body></html>"
} > "$out/index.html"
echo "kvq report: $out/index.html (studies $((studies_done - start)) s, notebooks $((end - studies_done)) s)"
