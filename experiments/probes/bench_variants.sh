#!/usr/bin/env bash
# Interleaved timing of several kvq builds on one GPU (how a change is compared with its base,
# docs/performance.md): each round runs `kvq bench BENCH_ARGS` once a build, in turn, so drift in
# clocks or temperature falls on every build alike. Each run's table goes to OUTDIR/NAME-rK.txt;
# the summary prints every row's "of copy" per round and their median, a build a column.
#
#   bash experiments/probes/bench_variants.sh OUTDIR ROUNDS "BENCH_ARGS" NAME=path/to/kvq[.xz] ...
#
# A build given as .xz is unpacked beside OUTDIR first (binaries travel to the GPU machine packed).
set -euo pipefail
if (($# < 4)); then
  echo "usage: bench_variants.sh OUTDIR ROUNDS \"BENCH_ARGS\" NAME=KVQ[.xz] ..." >&2
  exit 2
fi
out=$1 rounds=$2 bench_args=$3
shift 3
mkdir -p "$out"
names=() bins=()
for spec in "$@"; do
  name=${spec%%=*} bin=${spec#*=}
  if [[ $name == "$spec" || -z $name || ! -f $bin ]]; then
    echo "bench_variants: '$spec' is not NAME=an existing file" >&2
    exit 2
  fi
  if [[ $bin == *.xz ]]; then
    mkdir -p "$out/bin"
    xz -dc "$bin" >"$out/bin/$name" && chmod +x "$out/bin/$name"
    bin=$out/bin/$name
  fi
  names+=("$name") bins+=("$bin")
done
for ((r = 1; r <= rounds; ++r)); do
  for i in "${!names[@]}"; do
    echo "bench_variants: round $r/$rounds, ${names[$i]}" >&2
    # shellcheck disable=SC2086  # BENCH_ARGS is a list of arguments
    "${bins[$i]}" bench $bench_args >"$out/${names[$i]}-r$r.txt"
  done
done
python3 - "$out" "$rounds" "${names[@]}" <<'EOF'
import statistics, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
table = {}  # (kernel, recipe, dtype) -> name -> [percent per round]
order = []
for name in names:
    for r in range(1, rounds + 1):
        for line in open(f"{out}/{name}-r{r}.txt"):
            f = line.split()
            if len(f) < 8 or not f[-1].endswith("%") or f[0] == "kernel":
                continue
            # kernel, recipe (may hold spaces: "- (writes only)"), dtype, then five numbers
            key = (f[0], " ".join(f[1:-6]), f[-6])
            if key not in table:
                table[key] = {}
                order.append(key)
            table[key].setdefault(name, []).append(float(f[-1][:-1]))
print(f"{'kernel':13}{'recipe':25}{'dtype':6}" + "".join(f"{n:>24}" for n in names))
for key in order:
    cells = []
    for n in names:
        v = table[key].get(n, [])
        cells.append(f"{statistics.median(v):6.1f} ({min(v):.1f}-{max(v):.1f})" if v else "-")
    print(f"{key[0]:13}{key[1][:24]:25}{key[2]:6}" + "".join(f"{c:>24}" for c in cells))
EOF
