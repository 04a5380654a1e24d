#!/usr/bin/env python3
"""Engine and library conformance: run the engines' own quantizers on the inputs of inputs.py,
dump what they wrote in kvq's port layout (docs/ports.md), and ask `kvq verify` / `kvq identify`
which recipe and variant each follows (docs/results/conformance.md records the verdicts).

    python3 proptests/ports/conformance/stage.py --wheels WHEELS --out STAGE   # on a machine with PyPI
    python3 proptests/ports/conformance/run_conformance.py --root STAGE --out OUT --kvq build/kvq

STAGE holds the engines' files as laid out in their wheels (only those the producers load).
Producers live in libraries.py, sglang_fns.py, vllm_fns.py, flashinfer_fns.py; each one's
run(ctx, x) returns dicts of kvq_dump.dump's arguments plus "recipe" (the kvq recipe that claims
to model it), "label", optionally "exact_checks" [(what, expected, actual)] whose expected bytes
derive from the inputs alone, and "raw" {name: tensor} (saved for the layout-aware kinds).
A producer that fails is reported with its exception; nothing here is needed by CI.
"""
import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from common import Context  # noqa: E402
import inputs  # noqa: E402
from kvq_dump import dump, dump_mla_cache, dump_mla_dequant, dump_paged_store, dump_rope, dump_workspace, to_numpy  # noqa: E402

MODULES = ("libraries", "sglang_fns", "vllm_fns", "flashinfer_fns")
DUMP_KEYS = ("x", "codes", "recipe", "block_scales", "global_scale", "global_scale_convention",
             "global_scale_role", "dequantized", "nibble_order", "block")


def versions(root):
    """package -> version from the staged *.dist-info/METADATA (or PKG-INFO of an sdist)."""
    found = {}
    for entry in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        for meta in ("METADATA", "PKG-INFO"):
            p = os.path.join(root, entry, meta)
            if os.path.isfile(p):
                name = version = None
                for line in open(p, encoding="utf-8", errors="replace"):
                    if line.startswith("Name:"):
                        name = line.split(":", 1)[1].strip()
                    elif line.startswith("Version:"):
                        version = line.split(":", 1)[1].strip()
                    if name and version:
                        break
                if name:
                    found[name] = version
    return found


def run_kvq(kvq, args, timeout=600):
    try:
        p = subprocess.run([kvq] + args, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return -1, "timed out"


def first_lines(text, n):
    return "\n".join(text.splitlines()[:n])


def save_raw(directory, raw):
    os.makedirs(directory, exist_ok=True)
    arrays = {}
    for k, v in raw.items():
        if v is None:
            continue
        if hasattr(v, "detach") or hasattr(v, "__array__"):
            a, dt = to_numpy(v)
            arrays[k] = a
            if dt:
                arrays[k + "__dtype"] = np.array(dt)
        else:
            arrays[k] = np.array(v)
    np.savez_compressed(os.path.join(directory, "raw.npz"), **arrays)


IDENTIFY_CHANGES = "2"


def verify_one(kvq, out, rec):
    where = os.path.join(out, rec["dump"])
    io = ["--inputs", os.path.join(where, "in"), "--outputs", os.path.join(where, "out")]
    rc, text = run_kvq(kvq, ["verify", rec["recipe"]] + io + ["--show", "4"])
    rec["verify"] = dict(rc=rc, report=first_lines(text, 40))
    if rec["recipe"] in ("rope-fp8", "mla-cache", "mla-dequant", "workspace"):  # every variant that reproduces the call
        rc2, text2 = run_kvq(kvq, ["identify"] + io + ["--show", "4"])
        rec["identify"] = dict(rc=rc2, report=first_lines(text2, 160))
    elif rc != 0:
        rc2, text2 = run_kvq(kvq, ["identify"] + io + ["--show", "4", "--changes", IDENTIFY_CHANGES])
        rec["identify"] = dict(rc=rc2, report=first_lines(text2, 30))
    return rec


def kvq_recipes(kvq):
    """The recipe names `kvq recipes` lists (first column), or None if it cannot be read."""
    rc, text = run_kvq(kvq, ["recipes"], timeout=60)
    if rc != 0:
        return None
    names = set()
    for line in text.splitlines()[1:]:
        if not line.strip():
            continue
        tokens = line.split()
        name = tokens[0]
        if len(tokens) > 1 and tokens[1] not in ("e2m1", "e4m3fn", "int4", "int8"):  # name ran into the element
            name = re.sub(r"(e2m1|e4m3fn|int4|int8)$", "", name)
        if re.fullmatch(r"[a-z0-9][a-z0-9.-]*", name):
            names.add(name)
    return names or None


def verify_all(kvq, out, records, jobs):
    """kvq verify (and identify where verify fails) on every dump with a recipe, jobs at a time.
    Records without a dump or whose recipe is None (no kvq recipe models the function) are skipped:
    their dumps stay for later recipes."""
    from concurrent.futures import ThreadPoolExecutor

    records = [r for r in records if r.get("dump") and r.get("recipe") is not None]
    known = kvq_recipes(kvq)
    if known:  # a recipe kvq does not list is not verified either (kvq would answer BAD-INPUT)
        known = known | {"rope-fp8", "mla-cache", "mla-dequant", "workspace"}  # the kinds `kvq verify` names without a recipe
        for r in records:
            if r["recipe"] not in known:
                r["verify_skipped"] = "recipe %r unknown to kvq (kvq recipes)" % r["recipe"]
        records = [r for r in records if r["recipe"] in known]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for rec in pool.map(lambda r: verify_one(kvq, out, r), records):
            verdict = {0: "BIT-EXACT", 1: "MISMATCH", 2: "BAD-INPUT"}.get(rec["verify"]["rc"], rec["verify"]["rc"])
            ident = rec.get("identify", {}).get("report", "").splitlines()[1:2]
            print("%-40s %-9s %-12s %-14s %-22s %s %s" % (rec["producer"], rec["dtype"], rec["case"], rec["label"][:14],
                                                       rec["recipe"], verdict, ident[0].strip() if ident else ""), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True, help="staged engine files (stage.py --out)")
    ap.add_argument("--out", required=True, help="where the dumps and summary.json go")
    ap.add_argument("--kvq", help="the kvq binary: verify and identify every dump")
    ap.add_argument("--only", default="", help="comma-separated substrings of producer names")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--dtypes", default="", help="comma-separated input dtypes (default: each producer's)")
    ap.add_argument("--rows", type=int, default=128)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--identify-changes", default="2", help="kvq identify --changes (1 is much faster)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="kvq processes at a time")
    ap.add_argument("--keep-raw", action="store_true", help="save every producer's raw tensors")
    args = ap.parse_args()

    import torch

    global IDENTIFY_CHANGES
    IDENTIFY_CHANGES = args.identify_changes

    ctx = Context(torch=torch, device=args.device, root=os.path.abspath(args.root), versions=versions(args.root))
    ctx.versions.setdefault("torch", torch.__version__)
    producers = []
    for name in MODULES:
        try:
            mod = importlib.import_module(name)
            producers += [(name, p) for p in mod.producers(ctx)]
        except Exception:
            print("module %s: FAILED to list producers\n%s" % (name, traceback.format_exc()), flush=True)
    only = [s for s in args.only.split(",") if s]
    if only:
        producers = [(m, p) for m, p in producers if any(s in p.name for s in only)]
    want_cases = [s for s in args.cases.split(",") if s]
    want_dtypes = [s for s in args.dtypes.split(",") if s]
    case_sets = {d: inputs.cases(d, rows=args.rows) for d in inputs.DTYPES}

    records = []
    for module_name, p in producers:
        for dtype in p.dtypes:
            if want_dtypes and dtype not in want_dtypes:
                continue
            for case, bits in case_sets[dtype]:
                if want_cases and case not in want_cases:
                    continue
                x = inputs.as_torch(torch, bits, dtype, args.device)
                base = dict(producer=p.name, library=p.library, version=ctx.versions.get(p.library, "?"),
                            function=p.function, stubs=p.stubs, dtype=dtype, case=case)
                t0 = time.time()
                try:
                    results = p.run(ctx, x)
                    if args.device == "cuda":
                        torch.cuda.synchronize()
                except Exception as e:  # a producer that cannot run this input: recorded, not fatal
                    records.append(dict(base, label="", error="%s: %s" % (type(e).__name__, e),
                                        traceback=traceback.format_exc(limit=4)))
                    print("%-40s %-9s %-12s ERROR %s: %s" % (p.name, dtype, case, type(e).__name__, str(e)[:200]), flush=True)
                    continue
                for r in results if isinstance(results, list) else [results]:
                    label = r.get("label", "")
                    where = os.path.join(args.out, "dumps", p.name, dtype, case, label or "main")
                    rec = dict(base, label=label, recipe=r.get("recipe"), seconds=round(time.time() - t0, 3))
                    if r.get("note"):
                        rec["note"] = r["note"]
                    checks = []
                    for what, expected, actual in r.get("exact_checks", []):
                        e = np.asarray(to_numpy(expected)[0]).reshape(-1)
                        a = np.asarray(to_numpy(actual)[0]).reshape(-1)
                        n_diff = int(np.count_nonzero(e != a)) if e.shape == a.shape else -1
                        checks.append(dict(what=what, differ=n_diff, total=int(e.size)))
                    rec["exact_checks"] = checks
                    if r.get("raw") and (args.keep_raw or "codes" not in r):
                        save_raw(os.path.join(where, "raw"), r["raw"])
                    if "codes" in r:
                        kw = {k: r[k] for k in DUMP_KEYS if k in r and r[k] is not None}
                        kw.setdefault("x", x)
                        try:
                            dump(os.path.join(where, "in"), os.path.join(where, "out"), **kw)
                            rec["dump"] = os.path.relpath(where, args.out)
                        except Exception as e:
                            rec["error"] = "dump: %s: %s" % (type(e).__name__, e)
                    records.append(rec)
                    # Whole calls in the layout-aware kinds (docs/ports.md): the paged store (under
                    # the producer's recipe), MLA cache writers, prefill workspaces and FlashInfer's fused RoPE.
                    for key, writer, suffix, recipe in (
                            ("paged", dump_paged_store, "paged-store", r.get("recipe")),
                            ("mla", dump_mla_cache, "mla-cache", "mla-cache"),
                            ("mla_dequant", dump_mla_dequant, "mla-dequant", "mla-dequant"),
                            ("mla_dequant_paged", dump_mla_dequant, "mla-dequant-paged", "mla-dequant"),
                            ("workspace", dump_workspace, "workspace", "workspace"),
                            ("rope", dump_rope, (r.get("rope") or {}).get("kind"), "rope-fp8")):
                        if not r.get(key):
                            continue
                        whole = os.path.join(args.out, "dumps", p.name, dtype, case, (label or "main") + "-" + suffix)
                        wrec = dict(base, label=(label or "main") + "/" + suffix, recipe=recipe, exact_checks=[])
                        if key == "paged" and r.get("paged_recipe"):  # a whole call of a recipe the flat dumps lack
                            recipe = wrec["recipe"] = r["paged_recipe"]
                        extra = dict(recipe=recipe) if key == "paged" else {}
                        try:
                            writer(os.path.join(whole, "in"), os.path.join(whole, "out"), **r[key], **extra)
                            wrec["dump"] = os.path.relpath(whole, args.out)
                        except Exception as e:
                            wrec["error"] = "%s: %s: %s" % (writer.__name__, type(e).__name__, e)
                        records.append(wrec)
                    print("%-40s %-9s %-12s %-14s %s%s" % (
                        p.name, dtype, case, label[:14], rec.get("recipe"), rec.get("error", "") + "".join(
                            " [%s: %d/%d]" % (c["what"], c["differ"], c["total"]) for c in checks if c["differ"])),
                          flush=True)
    if args.kvq:
        verify_all(args.kvq, args.out, records, args.jobs)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(dict(versions=ctx.versions, device=torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                       records=records), f, indent=1)
    print("summary: %s (%d records)" % (os.path.join(args.out, "summary.json"), len(records)))


if __name__ == "__main__":
    main()
