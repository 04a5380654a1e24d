#!/usr/bin/env bash
# kvq set-up and main job: installs what is missing (Debian packages, a Python virtual
# environment with numpy and ml_dtypes for the cross-checks, nanobind and pytest for the Python
# package, build/python/kvq; `pip install .` installs it elsewhere), builds, then runs the main
# job: `kvq check` (the whole property suite on the CPU, on the GPU too when one is present),
# then the default error studies and their notebooks (experiments/run_default_studies.sh).
#
#   bash cli/setup.sh            set up, build, run the main job
#   bash cli/setup.sh --build    set up and build only (no notebook packages)
#   bash cli/setup.sh --build --check-build
#                                the same, the device code compiled at NVVM -O1, ptxas -O0, to check that it builds
#                                (what CI does before ctest: no GPU there; not for timing, docs/cli.md)
set -euo pipefail
cd "$(dirname "$0")/.."
case "$*" in
  "" | "--build" | "--build --check-build") ;;
  *) echo "kvq setup: unknown arguments '$*' (none, --build, or --build --check-build)" >&2; exit 2 ;;
esac

packages=(cmake ninja-build g++ libeigen3-dev libboost-dev librapidcheck-dev doctest-dev python3-venv python3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kvq setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import numpy, ml_dtypes, nanobind, pytest" 2>/dev/null; then
  echo "kvq setup: creating .venv (numpy, ml_dtypes 0.6.0, nanobind 3.1.0, pytest)"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check numpy ml_dtypes==0.6.0 nanobind==3.1.0 pytest
fi

if [ "${1:-}" != "--build" ] && ! .venv/bin/python -c "import pandas, matplotlib, nbconvert, ipykernel" 2>/dev/null; then
  echo "kvq setup: adding the notebook packages to .venv (pandas, matplotlib, nbconvert, ipykernel)"
  .venv/bin/pip install -q --disable-pip-version-check pandas matplotlib nbconvert ipykernel
fi

check_build=OFF
[ "${1:-}" = "--build" ] && [ "${2:-}" = "--check-build" ] && check_build=ON
cmake --preset default -DKVQ_PYTHON="$PWD/.venv/bin/python" -DKVQ_CUDA_CHECK_BUILD="$check_build" >/dev/null
cmake --build --preset default -j "$(nproc)"

if [ "${1:-}" = "--build" ]; then exit 0; fi
echo "kvq setup: running the main job (build/kvq check), report in build/check-report.json"
build/kvq check --report build/check-report.json
echo "kvq setup: running the default error studies and notebooks (report in build/report/index.html)"
exec bash experiments/run_default_studies.sh build/report
