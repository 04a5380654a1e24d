#!/usr/bin/env python3
"""Stage the engines' files for run_conformance.py on a machine without internet.

    python3 stage.py --wheels DIR --out STAGE

DIR holds the packages as PyPI serves them (pip download --no-deps; see
docs/results/conformance.md for the versions). Wheels and sdists are unpacked into a scratch
folder beside STAGE, then only the files the producers list (Producer.files) and each package's
METADATA / PKG-INFO are copied into STAGE, so what travels stays small. Wheels that install
whole (torchao, apache-tvm-ffi) are copied as wheels into STAGE/wheels. FlashInfer is not staged
here (its producers list no files): stage_flashinfer.sh stages the trimmed package into
FLASHINFER_STAGE, which run_on_gpu.sh puts on PYTHONPATH and exports as FLASHINFER_STAGE.
"""
import argparse
import glob
import importlib
import os
import shutil
import sys
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from common import Context  # noqa: E402
from run_conformance import MODULES  # noqa: E402

WHOLE_WHEELS = ("torchao-", "apache_tvm_ffi-")


def unpack(wheels, scratch):
    os.makedirs(scratch, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(wheels, "*"))):
        base = os.path.basename(path)
        if base.endswith(".whl"):
            with zipfile.ZipFile(path) as z:
                z.extractall(scratch, [n for n in z.namelist() if n.endswith((".py", "METADATA", ".cuh", ".h", ".cu", ".cc", ".cpp", ".json", ".inc", ".hpp"))])
        elif base.endswith(".tar.gz"):
            with tarfile.open(path) as t:
                t.extractall(scratch, filter="data")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scratch", help="where packages are unpacked (default: STAGE.unpacked)")
    args = ap.parse_args()
    scratch = args.scratch or args.out.rstrip("/") + ".unpacked"
    if not os.path.isdir(scratch):
        unpack(args.wheels, scratch)
    ctx = Context(torch=None, device="cpu", root=scratch)
    files = set()
    for name in MODULES:
        try:
            mod = importlib.import_module(name)
        except Exception as e:
            print("stage: module %s not imported (%s)" % (name, e))
            continue
        for p in mod.producers(ctx):
            files.update(p.files)
        files.update(getattr(mod, "EXTRA_FILES", ()))
    for meta in glob.glob(os.path.join(scratch, "*", "METADATA")) + glob.glob(os.path.join(scratch, "*", "PKG-INFO")):
        files.add(os.path.relpath(meta, scratch))
    missing = [f for f in sorted(files) if not os.path.isfile(os.path.join(scratch, f))]
    if missing:
        sys.exit("stage: files the producers list are not in the packages: %s" % ", ".join(missing))
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    for f in sorted(files):
        dst = os.path.join(args.out, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(os.path.join(scratch, f), dst)
    os.makedirs(os.path.join(args.out, "wheels"), exist_ok=True)
    for path in glob.glob(os.path.join(args.wheels, "*.whl")):
        if os.path.basename(path).startswith(WHOLE_WHEELS):
            shutil.copy2(path, os.path.join(args.out, "wheels"))
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(args.out) for f in fs)
    print("stage: %d files, %.1f MiB in %s" % (len(files), size / 2 ** 20, args.out))


if __name__ == "__main__":
    main()
