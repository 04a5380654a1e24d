#!/usr/bin/env python3
"""FlashInfer's fused RoPE + FP8 kernels on kvq bench's RoPE problems, for `kvq bench --peers`:

  quant  flashinfer.rope.rope_quantize_fp8                        (twin of kvq's rope-quant row)
  paged  flashinfer.rope.rope_quantize_fp8_append_paged_kv_cache  (twin of kvq's rope-fused row)

kvq bench passes every case as --case FUNCTION:key=value,... with the shape of
kernels/rope_benchmark.hpp (rope_bench_shapes), and the inputs are made as kernels/rope_benchmark.cu
makes them: every input byte 0x3C, every cos_sin_cache byte 0x3F, requests of `request` tokens at
positions 0..request-1 (pos_ids is the positions tensor itself), request r on pages
kv_indptr[r] = r * request / page_size, kv_indices = 0, 1, 2, ..., quant scales 1.0, outputs
preallocated.

Timing: CUDA events around each call, 3 warm-ups, median of --repeats. Before each timed call a spin
kernel (torch.cuda._sleep) holds the stream, so the call is queued behind it and its Python and
launch work on the host is not timed: the times are the device's, as kvq's rows are (time_median,
kernels/benchmark.cu, queues its launches behind a spin kernel too). Copies of about 100 ms settle
the clocks first.

Prints `flashinfer FUNCTION LABEL MS` per case (`flashinfer FUNCTION LABEL skipped: why` for a later
case that failed), and exits 77 with a last line `SKIPPED: why` where FlashInfer cannot run here: FP32
input (its kernels take FP16 and BF16), no torch, no CUDA device, no nvcc, no staged FlashInfer. A
first call that fails (the JIT build, or arguments kvq got wrong) exits 1 with a line `FAILED: why`;
bad --case text exits 2 (argparse).
FlashInfer is imported without its package __init__ from $FLASHINFER_STAGE by the conformance
helper (proptests/ports/conformance/flashinfer_fns.py; staging: stage_flashinfer.sh, docs/performance.md).

--plan prints each case's call (argument shapes, dtypes, contents) and needs neither torch nor a GPU.
"""
import argparse
import dataclasses
import os
import shutil
import sys
import time
import types

FUNCTIONS = {"quant": "rope_quantize_fp8", "paged": "rope_quantize_fp8_append_paged_kv_cache"}
DTYPES = ("bf16", "fp16", "fp32")
INPUT_BYTE, COS_SIN_BYTE = 0x3C, 0x3F  # as kernels/rope_benchmark.cu fills its buffers
SPIN_CYCLES = 2_000_000  # about 1 ms of torch.cuda._sleep: far longer than a call's host work


@dataclasses.dataclass(frozen=True)
class Case:
    function: str  # "quant" or "paged"
    label: str     # kvq's row label (rope_bench_label)
    attention: str
    style: str
    layout: str
    tokens: int
    batch: int
    q_heads: int
    kv_heads: int
    head_dim: int
    rope_dim: int
    max_pos: int
    page_size: int
    num_pages: int
    num_page_indices: int
    request: int

    @property
    def mla(self):
        return self.attention == "mla"

    @property
    def nope_dim(self):
        return self.head_dim - self.rope_dim


CHOICES = {"attention": ("mha", "mla"), "style": ("neox", "gptj"), "layout": ("nhd", "hnd")}
INTEGERS = tuple(f.name for f in dataclasses.fields(Case) if f.type is int)


def parse_case(text):
    """A Case from FUNCTION:key=value,...; ValueError naming what is wrong."""
    function, colon, spec = text.partition(":")
    if function not in FUNCTIONS or not colon:
        raise ValueError(f"--case {text!r}: expected quant:... or paged:...")
    fields = {}
    for item in spec.split(","):
        key, eq, value = item.partition("=")
        if not eq or key in fields:
            raise ValueError(f"--case {text!r}: {item!r} is not a new key=value")
        fields[key] = value
    known = {f.name for f in dataclasses.fields(Case)} - {"function"}
    if set(fields) != known:
        missing, extra = sorted(known - set(fields)), sorted(set(fields) - known)
        raise ValueError(f"--case {text!r}: missing {missing}, unknown {extra}")
    for key, allowed in CHOICES.items():
        if fields[key] not in allowed:
            raise ValueError(f"--case {text!r}: {key} is one of {allowed}, got {fields[key]!r}")
    for key in INTEGERS:
        if not fields[key].isdigit() or int(fields[key]) == 0:
            raise ValueError(f"--case {text!r}: {key} must be a positive integer, got {fields[key]!r}")
        fields[key] = int(fields[key])
    c = Case(function=function, **fields)
    rules = [
        (c.nope_dim >= 0, "rope_dim <= head_dim"),
        (not c.mla or c.kv_heads == 1, "MLA has one KV head"),
        (c.request % c.page_size == 0, "request a multiple of page_size"),
        (c.tokens == c.batch * c.request, "tokens = batch * request"),
        (c.num_page_indices == c.batch * c.request // c.page_size, "one page index per page of every request"),
        (c.num_pages >= c.num_page_indices, "num_pages >= num_page_indices"),
        (c.max_pos >= c.request, "max_pos >= request (pos_ids = positions)"),
    ]
    for ok, rule in rules:
        if not ok:
            raise ValueError(f"--case {text!r}: needs {rule}")
    return c


@dataclasses.dataclass(frozen=True)
class Tensor:
    shape: tuple
    kind: str  # input (the input dtype), fp8 (zeros), cos_sin (FP32), positions, batch_indices, indptr, iota (int32)


def plan(c):
    """The FlashInfer call of case c: keyword arguments, tensors as Tensor (paged_kv_cache a pair);
    the positions tensor is also pos_ids (one tensor, as in kvq's bench)."""
    t, qh, kvh, r, n = c.tokens, c.q_heads, c.kv_heads, c.rope_dim, c.nope_dim
    k = (t,) if c.mla else (t, kvh)  # FlashInfer: MLA's K is 2-D, MHA/GQA's 3-D
    args = dict(q_rope=Tensor((t, qh, r), "input"), k_rope=Tensor(k + (r,), "input"),
                q_nope=Tensor((t, qh, n), "input"), k_nope=Tensor(k + (n,), "input"))
    if c.function == "paged":
        args["v"] = None if c.mla else Tensor((t, kvh, c.head_dim), "input")
    args["cos_sin_cache"] = Tensor((c.max_pos, r), "cos_sin")
    args["pos_ids"] = Tensor((t,), "positions")
    scalars = dict(is_neox=c.style == "neox", quantize_dtype="float8_e4m3fn", quant_scale_q=1.0, quant_scale_kv=1.0)
    if c.function == "quant":
        args.update(q_rope_out=Tensor((t, qh, r), "fp8"), k_rope_out=Tensor(k + (r,), "fp8"),
                    q_nope_out=Tensor((t, qh, n), "fp8"), k_nope_out=Tensor(k + (n,), "fp8"))
        return {**args, **scalars}
    p, ps = c.num_pages, c.page_size
    if c.mla:
        caches = (Tensor((p, ps, n), "fp8"), Tensor((p, ps, r), "fp8"))  # ckv (K nope), kpe (K rope)
    else:
        shape = (p, ps, kvh, c.head_dim) if c.layout == "nhd" else (p, kvh, ps, c.head_dim)
        caches = (Tensor(shape, "fp8"), Tensor(shape, "fp8"))  # k_cache, v_cache
    args.update(paged_kv_cache=caches, kv_indices=Tensor((c.num_page_indices,), "iota"),
                kv_indptr=Tensor((c.batch + 1,), "indptr"), batch_indices=Tensor((t,), "batch_indices"),
                positions=Tensor((t,), "positions"))
    return {**args, **scalars, "page_size": ps, "kv_layout": c.layout.upper(),
            "q_rope_out": Tensor((t, qh, r), "fp8"), "q_nope_out": Tensor((t, qh, n), "fp8")}


def describe(value, dtype):
    if isinstance(value, tuple):
        return "(" + ", ".join(describe(v, dtype) for v in value) + ")"
    if not isinstance(value, Tensor):
        return repr(value)
    what = {"input": f"{dtype} bytes 0x{INPUT_BYTE:02X}", "fp8": "float8_e4m3fn", "cos_sin": f"float32 bytes 0x{COS_SIN_BYTE:02X}",
            "positions": "int32 i % request", "batch_indices": "int32 i // request",
            "indptr": "int32 r * request / page_size", "iota": "int32 0, 1, 2, ..."}[value.kind]
    return f"[{', '.join(map(str, value.shape))}] {what}"


def materialize(torch, c, dtype, device):
    """plan(c) with torch tensors on device."""
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    i = torch.arange(c.tokens, dtype=torch.int32, device=device)
    shared = {"positions": i % c.request, "batch_indices": i // c.request,
              "indptr": torch.arange(c.batch + 1, dtype=torch.int32, device=device) * (c.request // c.page_size),
              "iota": torch.arange(c.num_page_indices, dtype=torch.int32, device=device)}

    def make(v):
        if isinstance(v, tuple):
            return tuple(make(x) for x in v)
        if not isinstance(v, Tensor):
            return getattr(torch, v) if isinstance(v, str) and v.startswith("float8") else v
        if v.kind in shared:
            return shared[v.kind]  # pos_ids and positions: one tensor
        fill, view = {"input": (INPUT_BYTE, torch_dtype), "cos_sin": (COS_SIN_BYTE, torch.float32),
                      "fp8": (0, torch.float8_e4m3fn)}[v.kind]
        if 0 in v.shape:  # an empty nope part, as FlashInfer makes it for None
            return torch.empty(v.shape, dtype=view, device=device)
        elem = torch.empty((), dtype=view).element_size()
        shape = v.shape[:-1] + (v.shape[-1] * elem,)
        return torch.full(shape, fill, dtype=torch.uint8, device=device).view(view)

    return {name: make(v) for name, v in plan(c).items()}


def skip(why):
    print(f"SKIPPED: {why}", flush=True)
    return 77


def import_flashinfer_rope():
    """flashinfer.rope through the conformance helper (no package __init__; JIT env defaults)."""
    here = os.path.dirname(os.path.abspath(__file__))
    conformance = os.path.join(here, "..", "proptests", "ports", "conformance")
    sys.path.insert(0, os.path.abspath(conformance))
    import flashinfer_fns
    root = os.path.abspath(os.path.join(here, ".."))  # not searched for a flashinfer/ folder
    return flashinfer_fns.flashinfer_module(types.SimpleNamespace(root=root), "flashinfer.rope")


def device_ms(torch, fn, repeats, spin):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(3 + repeats):
        if spin:
            torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def settle_clocks(torch):
    """About 100 ms of 256 MiB copies, as kvq bench's copy_rate does before its first baseline."""
    a = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.1:
        b.copy_(a)
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", action="append", default=[], help="FUNCTION:key=value,... (see kvq bench --peers)")
    ap.add_argument("--dtype", choices=DTYPES, default="bf16")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--plan", action="store_true", help="print the calls; no torch, no GPU")
    args = ap.parse_args()
    try:
        cases = [parse_case(text) for text in args.case]
    except ValueError as e:
        print(f"bench_flashinfer_rope.py: {e}", flush=True)
        return 2
    if args.repeats <= 0:
        print("bench_flashinfer_rope.py: --repeats must be > 0", flush=True)
        return 2
    if args.plan:
        for c in cases:
            print(f"{c.label} ({c.function}): flashinfer.rope.{FUNCTIONS[c.function]}(")
            for name, value in plan(c).items():
                print(f"    {name}={describe(value, args.dtype)},")
            print(")")
        return 0
    if args.dtype == "fp32":
        return skip("FlashInfer's rope kernels take FP16 or BF16 input, not FP32")
    try:
        import torch
    except ImportError as e:
        return skip(f"no torch ({e})")
    if not torch.cuda.is_available():
        return skip("no CUDA device")
    if not (shutil.which("nvcc") or os.path.isfile(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"))):
        return skip("no nvcc on PATH or in $CUDA_HOME/bin (FlashInfer JIT-builds its rope module)")
    major, minor = torch.cuda.get_device_capability()
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", f"{major}.{minor}")
    try:
        fi = import_flashinfer_rope()
    except Exception as e:  # no FLASHINFER_STAGE, an incomplete stage, a missing dependency
        return skip(f"cannot import flashinfer.rope: {type(e).__name__}: {e}")
    spin = hasattr(torch.cuda, "_sleep")
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  flashinfer "
          f"{getattr(sys.modules.get('flashinfer'), '__version__', '?')} ({os.path.dirname(os.path.dirname(fi.__file__))})")
    print("note: " + ("device time: each call queued behind a spin kernel, its host work untimed" if spin else
                      "torch.cuda._sleep missing: each time includes the call's host work"))
    built = False
    for c in cases:
        try:
            kwargs = materialize(torch, c, args.dtype, "cuda")
            call = getattr(fi, FUNCTIONS[c.function])
            if not built:  # the first call JIT-builds (or loads) the rope module: not a timed launch
                t0 = time.perf_counter()
                call(**kwargs)
                torch.cuda.synchronize()
                print(f"note: rope module ready in {time.perf_counter() - t0:.1f} s (JIT build or cache load; "
                      f"FLASHINFER_WORKSPACE_BASE={os.environ.get('FLASHINFER_WORKSPACE_BASE')})", flush=True)
                built = True
                settle_clocks(torch)
            ms = device_ms(torch, lambda: call(**kwargs), args.repeats, spin)
            print(f"flashinfer {c.function} {c.label} {ms:.6f}", flush=True)
        except Exception as e:
            if not built:  # FlashInfer is here but its first call failed (JIT build or arguments): an error, not a skip
                print(f"FAILED: {FUNCTIONS[c.function]} on its first call ({c.label}): {type(e).__name__}: {e}", flush=True)
                return 1
            print(f"flashinfer {c.function} {c.label} skipped: {type(e).__name__}: {e}", flush=True)
        finally:
            kwargs = None
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
