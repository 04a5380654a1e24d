#!/usr/bin/env python3
"""Time what a Hopper user would otherwise run, next to `kvq bench`: PyTorch's FP8 cast
x.to(torch.float8_e4m3fn), the same after dividing by the per-tensor scale, and a PyTorch NVFP4
quantizer (reference recipe, codes packed two per byte), eager and under torch.compile
(--compile-mode, default "default"; compiled and checked byte for byte against eager before any
timed launch). CUDA events, 3 warm-ups, median of --repeats; the device-to-device copy of the same
bytes is timed in the same run. Prints rows like kvq bench; --csv writes them."""
import argparse
import sys
import time

import torch


def median_ms(fn, repeats):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(3 + repeats):
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def e2m1_thresholds(device):
    """The midpoints of the E2M1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6."""
    return torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], device=device)


def nvfp4_eager(x, thresholds):
    """Reference NVFP4: g = amax/2688, sf = e4m3(bmax/6/g), q = e2m1(x/(sf*g)); codes packed.
    thresholds = e2m1_thresholds(x.device), an argument so that torch.compile traces one graph."""
    xf = x.float().reshape(-1, 16)
    g = xf.abs().amax() / 2688.0
    sf = ((xf.abs().amax(dim=1, keepdim=True) / 6.0) / g).to(torch.float8_e4m3fn)
    return e2m1_packed(xf / (sf.float() * g), thresholds), sf


def e2m1_packed(y, thresholds):
    """E2M1 codes of the scaled values y (ties to even, saturating at 6), packed two a byte."""
    a = y.abs().clamp(max=6.0)
    # round half to even on the E2M1 grid: a tie goes to the even code
    code = torch.bucketize(a, thresholds, right=False)  # ties go down here ...
    tie = (a.unsqueeze(-1) == thresholds).any(-1) & (code % 2 == 1)  # ... and up to even codes
    code = (code + tie.to(code.dtype)) | ((y < 0).to(code.dtype) << 3)
    code = code.to(torch.uint8).reshape(-1, 2)
    return code[:, 0] | (code[:, 1] << 4)


def compiled_nvfp4(x, thresholds, mode):
    """torch.compile(nvfp4_eager, mode=mode), compiled by its first call here, outside any timing, and
    compared with eager on x byte for byte: (function, note), or (None, why none). One graph
    (fullgraph=True) is tried first, then graph breaks allowed."""
    eager = nvfp4_eager(x, thresholds)
    failures = []
    for fullgraph in (True, False):
        try:
            torch._dynamo.reset()
            fn = torch.compile(nvfp4_eager, mode=mode, fullgraph=fullgraph)
            t0 = time.perf_counter()
            got = fn(x, thresholds)
            torch.cuda.synchronize()
            seconds = time.perf_counter() - t0
        except Exception as e:  # a graph break under fullgraph, or a compiler error
            first_line = (str(e).splitlines() or [""])[0]
            failures.append(f"fullgraph={fullgraph}: {type(e).__name__}: {first_line}")
            continue
        differ = sum(int((a.view(torch.uint8) != b.view(torch.uint8)).sum()) for a, b in zip(eager, got))
        return fn, (f"mode {mode!r}, fullgraph={fullgraph}, compiled in {seconds:.1f} s before timing; "
                    + ("codes and scales equal to eager" if differ == 0 else f"{differ} bytes differ from eager"))
    return None, "; ".join(failures)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--cols", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--compile-mode", default="default",
                    help="torch.compile mode of the NVFP4 row (default, reduce-overhead, max-autotune, ...; none: no row)")
    ap.add_argument("--csv")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIPPED: no CUDA device", file=sys.stderr)
        return 77
    count = args.mib * 1024 * 1024 // 2
    torch.manual_seed(0)  # the same input in every run, so that runs' byte comparisons compare
    x = (torch.randn(count // args.cols, args.cols, device="cuda") *
         torch.rand(count // args.cols, 1, device="cuda") * 4).to(torch.bfloat16)
    copy = torch.empty_like(x)
    rows = []

    def add(kernel, recipe, moved, fn):
        ms = median_ms(fn, args.repeats)
        half = min(int(moved // 2), x.numel() * 2)
        flat_x, flat_c = x.view(torch.uint8).reshape(-1), copy.view(torch.uint8).reshape(-1)
        cms = median_ms(lambda: flat_c[:half].copy_(flat_x[:half]), args.repeats)
        rows.append((kernel, recipe, moved, ms, moved / (ms * 1e6), 2 * half / (cms * 1e6)))

    add("torch-fp8-cast", "fp8-e4m3 (x.to)", x.numel() * 3, lambda: x.to(torch.float8_e4m3fn))
    # What fp8-e4m3-tensor computes, eagerly: divide by the per-tensor scale amax/448, then cast
    # (the scale computed once, outside the timing, as kvq bench's g).
    scale = x.abs().amax().float() / 448.0
    add("torch-fp8-scaled", "fp8-e4m3 (x/s).to", x.numel() * 3, lambda: (x / scale).to(torch.float8_e4m3fn))
    nvfp4_bytes = x.numel() * 2 + x.numel() // 2 + x.numel() // 16
    thresholds = e2m1_thresholds(x.device)
    add("torch-eager", "nvfp4", nvfp4_bytes, lambda: nvfp4_eager(x, thresholds))
    notes = []
    if args.compile_mode != "none":
        compiled, note = compiled_nvfp4(x, thresholds, args.compile_mode)
        notes.append(("torch-compile nvfp4: " if compiled else "torch-compile nvfp4 skipped: ") + note)
        if compiled is not None:  # a compiled quantizer whose bytes differ from eager's is marked, not hidden
            agrees = "equal to eager" in note
            add("torch-compile" if agrees else "torch-compile*", "nvfp4" if agrees else "nvfp4 (!= eager)",
                nvfp4_bytes, lambda: compiled(x, thresholds))
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    for note in notes:
        print("note:", note)
    print(f"{'kernel':18s}{'recipe':20s}{'MB moved':>10s}{'ms':>10s}{'GB/s':>10s}{'copy GB/s':>12s}{'of copy':>10s}")
    for k, r, b, ms, gbps, copy_gbps in rows:
        print(f"{k:18s}{r:20s}{b / 1e6:10.1f}{ms:10.3f}{gbps:10.0f}{copy_gbps:12.0f}{100 * gbps / copy_gbps:9.1f}%")
    if args.csv:
        with open(args.csv, "w") as fh:
            fh.write("device,kernel,recipe,bytes,median_ms,gbps,copy_gbps,fraction_of_copy\n")
            for k, r, b, ms, gbps, copy_gbps in rows:
                fh.write(f"\"{torch.cuda.get_device_name()}\",{k},{r},{b},{ms},{gbps},{copy_gbps},{gbps / copy_gbps}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
