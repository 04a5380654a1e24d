#!/usr/bin/env python3
"""Cross-check kvq's named conventions against the libraries they model.

Converts FP32 inputs with ml_dtypes (astype) and PyTorch (eager Tensor.to, on the CPU
and on CUDA when present) and compares every code, bit for bit, with kvq's codec
(through the C ABI in libkvq_codec_capi.so). Inputs: every special, every BF16 bit
pattern with six low halves (ties and tie +- 1 ulp of every small format), and random
bit patterns from --seed; or, with --full, all 2^32 FP32 bit patterns.

Exit status: 0 all agree, 1 a mismatch, 77 no library to check against (a counted skip).
"""
import argparse
import ctypes
import json
import sys
import time

import numpy as np

ML_DTYPES = {"e2m1": "float4_e2m1fn", "e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2", "e8m0fnu": "float8_e8m0fnu"}
TORCH = {"e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2", "e8m0fnu": "float8_e8m0fnu"}


class Kvq:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.kvq_encode_fp32.restype = ctypes.c_int
        self.lib.kvq_last_error.restype = ctypes.c_char_p

    def encode(self, fmt, convention, bits):
        bits = np.ascontiguousarray(bits, dtype=np.uint32)
        out = np.empty_like(bits)
        rc = self.lib.kvq_encode_fp32(fmt.encode(), convention.encode(), b"rne",
                                      bits.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p),
                                      ctypes.c_size_t(bits.size))
        if rc != 0:
            raise RuntimeError(self.lib.kvq_last_error().decode())
        return out


def sample_inputs(seed, random_count):
    specials = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                         0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x80000001,
                         0x007FFFFF, 0x807FFFFF], dtype=np.uint32)
    high = np.arange(1 << 16, dtype=np.uint32) << 16
    lows = np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint32)
    patterns = (high[:, None] | lows[None, :]).ravel()
    rng = np.random.default_rng(seed)
    random = rng.integers(0, 1 << 32, size=random_count, dtype=np.uint64).astype(np.uint32)
    return [np.concatenate([specials, patterns, random])]


def full_inputs(chunk=1 << 26):
    for start in range(0, 1 << 32, chunk):
        yield np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32)


def converters(requested):
    """(library label, kvq convention, {format: function(bits uint32 array) -> codes})."""
    found = []
    if "ml_dtypes" in requested:
        try:
            import ml_dtypes
            fns = {f: (lambda d: lambda b: b.view(np.float32).astype(d).view(np.uint8).astype(np.uint32))(
                getattr(ml_dtypes, name)) for f, name in ML_DTYPES.items()}
            found.append((f"ml_dtypes {ml_dtypes.__version__}", "ml_dtypes", fns))
        except ImportError as e:
            print(f"ml_dtypes not available: {e}", file=sys.stderr)
    if "torch" in requested or "torch-cuda" in requested:
        try:
            import torch
            devices = []
            if "torch" in requested:
                devices.append("cpu")
            if "torch-cuda" in requested and torch.cuda.is_available():
                devices.append("cuda")
            for device in devices:
                def make(dtype, device=device):
                    def fn(b):
                        t = torch.from_numpy(b.view(np.int32)).to(device).view(torch.float32)
                        return t.to(dtype).view(torch.uint8).cpu().numpy().astype(np.uint32)
                    return fn
                fns = {f: make(getattr(torch, name)) for f, name in TORCH.items()}
                found.append((f"torch {torch.__version__} eager .to() on {device}", "torch", fns))
        except ImportError as e:
            print(f"torch not available: {e}", file=sys.stderr)
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="path to libkvq_codec_capi.so")
    ap.add_argument("--libraries", default="ml_dtypes,torch,torch-cuda")
    ap.add_argument("--formats", default="e2m1,e4m3fn,e5m2,e8m0fnu")
    ap.add_argument("--full", action="store_true", help="all 2^32 FP32 inputs")
    ap.add_argument("--random", type=int, default=1 << 22, help="random inputs in sample mode")
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--report", help="write a JSON report here")
    args = ap.parse_args()

    kvq = Kvq(args.lib)
    libraries = converters(set(args.libraries.split(",")))
    if not libraries:
        print("SKIPPED: none of the requested libraries is installed", file=sys.stderr)
        return 77
    rows = []
    failed = False
    for label, convention, fns in libraries:
        for fmt, fn in fns.items():
            if fmt not in args.formats.split(","):
                continue
            start = time.time()
            checked = mismatches = 0
            first = []
            chunks = full_inputs() if args.full else sample_inputs(args.seed, args.random)
            for bits in chunks:
                theirs = fn(bits)
                ours = kvq.encode(fmt, convention, bits)
                bad = np.nonzero(theirs != ours)[0]
                checked += bits.size
                mismatches += bad.size
                for i in bad[: max(0, 8 - len(first))]:
                    first.append({"input": f"0x{int(bits[i]):08x}", "library": f"0x{int(theirs[i]):02x}",
                                  "kvq": f"0x{int(ours[i]):02x}"})
            seconds = time.time() - start
            failed |= mismatches > 0
            rows.append({"library": label, "format": fmt, "convention": convention, "inputs": checked,
                         "mismatches": mismatches, "first": first, "seconds": round(seconds, 2)})
            verdict = "agree" if mismatches == 0 else f"{mismatches} DIFFER, first {first[:3]}"
            print(f"{label:40s} {fmt:8s} kvq --convention {convention:10s} {checked:>12d} inputs  {verdict}  "
                  f"({seconds:.1f} s)", flush=True)
    if args.report:
        with open(args.report, "w") as fh:
            json.dump({"mode": "all 2^32" if args.full else f"sample (seed {args.seed})", "rows": rows}, fh, indent=1)
    total = sum(r["inputs"] for r in rows)
    bad = sum(r["mismatches"] for r in rows)
    print(f"{len(rows) - sum(r['mismatches'] > 0 for r in rows)} passed, {sum(r['mismatches'] > 0 for r in rows)} failed"
          f" ({total} conversions, {bad} mismatches)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
