"""FlashInfer (flashinfer-python 0.7.2.post1) fused RoPE + FP8 quantize (+ paged append) producers.

Functions run (FlashInfer's own CUDA kernels, JIT-built from the wheel's csrc/rope.cu):
  flashinfer/rope.py:rope_quantize_fp8                          (MHA/GQA 3-D K, MLA 2-D K)
  flashinfer/rope.py:rope_quantize_fp8_append_paged_kv_cache    (MHA/GQA NHD/HND, MLA ckv/kpe)

Environment the driver provides (GPU machine, no internet):
  * FlashInfer is NOT staged by stage.py (Producer.files is empty here): stage_flashinfer.sh stages it,
    trimmed to the import closure of flashinfer.rope and its JIT driver (flashinfer.version,
    flashinfer.api_logging, flashinfer.jit.*, ...) with apache-tvm-ffi unpacked beside it, into
    FLASHINFER_STAGE, which run_on_gpu.sh puts on PYTHONPATH. The package folder is looked up in
    $FLASHINFER_STAGE if set, else on sys.path (the first folder holding flashinfer/rope.py and
    flashinfer/version.py), never in ctx.root (stage.py's tree, which has no FlashInfer files). The
    package __init__ is never run (a whole wheel's imports every FlashInfer submodule): `flashinfer` is
    made an empty namespace over that folder, then flashinfer.rope is imported from it.
  * FLASHINFER_CUDA_ARCH_LIST=9.0 (set here by default; sm_90 -> compute_90a), nvcc (CUDA_HOME or
    PATH) and ninja; FLASHINFER_WORKSPACE_BASE = a writable folder (the JIT writes its build tree and
    rope.so under $FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/90a/; default here:
    $TMPDIR/kvq_flashinfer_jit). The first call builds the module (~1 minute).
  * pynvml and requests are imported at module level by flashinfer/utils.py and artifacts.py but never
    called on this path; if they are not installed, empty stubs stand in (listed in Producer.stubs).

Each result is {"recipe": "rope-fp8", "label": ..., "raw": {...}} with FlashInfer's argument names:
inputs (q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, kv_indptr, kv_indices,
batch_indices, positions), scalars as 0-d tensors (is_neox bool, quant_scale_q / quant_scale_kv
float32, exactly what the kernel receives after its double -> float conversion, page_size int32,
kv_layout_code int32: NHD 0, HND 1) plus kv_layout as a string, and outputs (q_rope_out, k_rope_out,
q_nope_out, k_nope_out; or q_rope_out, q_nope_out and k_cache/v_cache or ckv_cache/kpe_cache), all FP8
outputs as torch.float8_e4m3fn. Caches and Q outputs of the paged calls are pre-filled with the poison
byte 0xA5 (raw["poison_byte"]), so bytes the kernel does not write (other slots, spare pages, the
padding token's Q rows) read 0xA5. Empty nope parts are size-0 tensors, as FlashInfer makes them.
"""
import importlib
import importlib.util
import os
import sys
import tempfile
import types

try:
    from .common import Producer, module
except ImportError:  # run as a top-level module next to common.py
    from common import Producer, module

POISON = 0xA5
# stage.py copies nothing for FlashInfer: stage_flashinfer.sh stages the whole (trimmed) package into
# FLASHINFER_STAGE. Files copied into stage.py's tree would only make a partial flashinfer/ folder there.
FILES = []
_STUBS = []
_NEEDED = ("rope.py", "version.py", "api_logging.py", os.path.join("jit", "core.py"), os.path.join("jit", "rope.py"))


def _flashinfer_root(ctx):
    """The folder holding the complete (trimmed) flashinfer package: $FLASHINFER_STAGE, else the
    first sys.path entry with flashinfer/rope.py and flashinfer/version.py. ctx.root is never used."""
    def complete(d):
        return d and all(os.path.isfile(os.path.join(d, "flashinfer", f)) for f in _NEEDED)

    env = os.environ.get("FLASHINFER_STAGE")
    if env:
        if not complete(env):
            raise FileNotFoundError("FLASHINFER_STAGE=%s lacks flashinfer/{%s} (run stage_flashinfer.sh)"
                                    % (env, ", ".join(_NEEDED)))
        return os.path.abspath(env)
    for d in sys.path:
        d = os.path.abspath(d or os.getcwd())
        if os.path.abspath(ctx.root) != d and complete(d):
            return d
    raise ModuleNotFoundError("no staged FlashInfer on sys.path (a folder with flashinfer/{%s}); put "
                              "stage_flashinfer.sh's DEST on PYTHONPATH or set FLASHINFER_STAGE" % ", ".join(_NEEDED))


def _flashinfer(ctx):
    """flashinfer.rope, imported without the package __init__, from FLASHINFER_STAGE."""
    return flashinfer_module(ctx, "flashinfer.rope")


def flashinfer_module(ctx, name):
    """A FlashInfer submodule (flashinfer.rope, flashinfer.quantization.fp4_quantization), imported
    without the package __init__, from FLASHINFER_STAGE (the JIT environment set as above)."""
    if name in sys.modules:
        return sys.modules[name]
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0")
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", os.path.join(tempfile.gettempdir(), "kvq_flashinfer_jit"))
    os.makedirs(os.environ["FLASHINFER_WORKSPACE_BASE"], exist_ok=True)
    fi_root = _flashinfer_root(ctx)
    pkg_dir = os.path.join(fi_root, "flashinfer")
    if fi_root not in sys.path:
        sys.path.insert(0, fi_root)  # tvm_ffi staged beside flashinfer (stage_flashinfer.sh TVM_FFI_WHEEL)
    for dep, why in (("pynvml", "NVML bindings (memory-bandwidth/CC queries, unused by rope and fp4_quantize)"),
                     ("requests", "HTTP client (cubin downloads, unused by rope and fp4_quantize)")):
        if importlib.util.find_spec(dep) is None:
            module(dep, exceptions=types.SimpleNamespace(RequestException=Exception))
            _STUBS.append(f"{dep}: empty stub for {why}")
    pkg = sys.modules.get("flashinfer")
    if pkg is None or list(getattr(pkg, "__path__", [])) != [pkg_dir]:
        # (a flashinfer left by an earlier failed try, or one over another folder, is replaced)
        for loaded in [m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer.")]:
            del sys.modules[loaded]
        pkg = types.ModuleType("flashinfer")
        pkg.__path__ = [pkg_dir]
        pkg.__file__ = os.path.join(pkg_dir, "__init__.py")
        sys.modules["flashinfer"] = pkg
        why = "flashinfer: package __init__ not run (empty namespace over %s)" % pkg_dir
        if why not in _STUBS:
            _STUBS.append(why)
        ver = importlib.import_module("flashinfer.version")
        pkg.__version__ = getattr(ver, "__version__", "unknown")
    return importlib.import_module(name)


# ---- inputs drawn from x ----

def _take(x, shape, offset):
    """A tensor of `shape` filled (cyclically) with x's values from flat position `offset`: x's own
    bit patterns, in x's dtype."""
    flat = x.reshape(-1)
    n = 1
    for d in shape:
        n *= d
    idx = (offset + _arange_like(flat, n)) % flat.numel()
    return flat[idx].reshape(shape).contiguous()


def _arange_like(t, n):
    import torch
    return torch.arange(n, device=t.device, dtype=torch.int64)


def _cos_sin_cache(torch, rope_dim, max_pos, device, base=10000.0):
    """The engines' way: FP32 inv_freq and FP32 angles (values need not be accurate; the verifier
    reads the cache itself). Columns: cos of frequency f at f, sin at rope_dim/2 + f."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rope_dim, 2, dtype=torch.float32, device=device) / rope_dim))
    t = torch.arange(max_pos, dtype=torch.float32, device=device)
    freqs = torch.outer(t, inv_freq)
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1).contiguous()


def _f32(torch, v):
    return torch.tensor(float(v), dtype=torch.float32)


def _scales(torch, x):
    """quant scales (exact FP32 values, passed as Python floats) that push the largest values past 448."""
    amax = float(x.float().abs().amax().clamp_min(1e-30))
    q = torch.tensor(448.0 / (0.6 * amax), dtype=torch.float32).item()
    kv = torch.tensor(448.0 / (0.8 * amax), dtype=torch.float32).item()
    return q, kv


def _poisoned(torch, shape, device):
    return torch.full(shape, POISON, dtype=torch.uint8, device=device).view(torch.float8_e4m3fn)


def _pos_ids(torch, tokens, max_pos, device, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    p = torch.randint(0, max_pos, (tokens,), generator=g, dtype=torch.int32)
    p[0] = 0                 # cos 1, sin 0: a plain scale
    p[-1] = max_pos - 1      # the largest position
    return p.to(device)


def _scalars(torch, is_neox, sq, skv):
    return dict(is_neox=torch.tensor(bool(is_neox)), quant_scale_q=_f32(torch, sq), quant_scale_kv=_f32(torch, skv))


# ---- rope_quantize_fp8 (no cache) ----

def _rope_quantize(ctx, x, label, qh, kvh, rope_dim, nope_dim, is_neox, mla, max_pos, seed):
    torch = ctx.torch
    fi = _flashinfer(ctx)
    dev = x.device
    tokens = max(x.shape[0], 8)  # values are taken cyclically from x
    q_rope = _take(x, (tokens, qh, rope_dim), 0)
    q_nope = _take(x, (tokens, qh, nope_dim), 7919) if nope_dim else None
    kshape = (tokens,) if mla else (tokens, kvh)
    k_rope = _take(x, kshape + (rope_dim,), 104729)
    k_nope = _take(x, kshape + (nope_dim,), 1299709) if nope_dim else None
    csc = _cos_sin_cache(torch, rope_dim, max_pos, dev)
    pos_ids = _pos_ids(torch, tokens, max_pos, dev, seed)
    sq, skv = _scales(torch, x)
    qr, kr, qn, kn = fi.rope_quantize_fp8(q_rope, k_rope, q_nope, k_nope, csc, pos_ids, is_neox=is_neox,
                                          quantize_dtype=torch.float8_e4m3fn, quant_scale_q=sq,
                                          quant_scale_kv=skv)
    torch.cuda.synchronize()
    empty_q = torch.empty(tokens, qh, 0, dtype=x.dtype, device=dev)
    empty_k = torch.empty(kshape + (0,), dtype=x.dtype, device=dev)
    raw = dict(q_rope=q_rope, k_rope=k_rope, q_nope=q_nope if q_nope is not None else empty_q,
               k_nope=k_nope if k_nope is not None else empty_k, cos_sin_cache=csc, pos_ids=pos_ids,
               q_rope_out=qr, k_rope_out=kr, q_nope_out=qn, k_nope_out=kn, **_scalars(torch, is_neox, sq, skv))
    rope = dict(kind="rope-quantize", is_neox=is_neox, quant_scale_q=sq, quant_scale_kv=skv,
                tensors={k: raw[k] for k in ("q_rope", "k_rope", "q_nope", "k_nope", "cos_sin_cache", "pos_ids",
                                             "q_rope_out", "k_rope_out", "q_nope_out", "k_nope_out")})
    return dict(recipe="rope-fp8", label=label, raw=raw, rope=rope)


# ---- rope_quantize_fp8_append_paged_kv_cache ----

def _page_table(torch, tokens, page_size, dev, seed):
    """3 requests (ragged, with prefixes already in the cache), pages scattered over a pool with spare
    pages; token 1 is padding (batch_indices -1, its positions entry arbitrary)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    counts = [tokens // 2, tokens // 3, tokens - tokens // 2 - tokens // 3]
    prefixes = [3, 0, page_size + 5]
    pages_per = [-(-(p + c) // page_size) for p, c in zip(prefixes, counts)]
    num_pages = sum(pages_per) + 5
    perm = torch.randperm(num_pages, generator=g)[: sum(pages_per)]
    indptr = [0]
    for n in pages_per:
        indptr.append(indptr[-1] + n)
    batch, pos = [], []
    for b, (p, c) in enumerate(zip(prefixes, counts)):
        batch += [b] * c
        pos += list(range(p, p + c))
    batch[1] = -1
    pos[1] = 10 ** 6
    i32 = dict(dtype=torch.int32, device=dev)
    return dict(kv_indptr=torch.tensor(indptr, **i32), kv_indices=perm.to(**i32),
                batch_indices=torch.tensor(batch, **i32), positions=torch.tensor(pos, **i32)), num_pages


def _rope_append(ctx, x, label, qh, kvh, rope_dim, nope_dim, is_neox, mla, layout, page_size, max_pos, seed):
    torch = ctx.torch
    fi = _flashinfer(ctx)
    dev = x.device
    tokens = max(x.shape[0], 8)  # values are taken cyclically from x
    head_dim = rope_dim + nope_dim
    q_rope = _take(x, (tokens, qh, rope_dim), 0)
    q_nope = _take(x, (tokens, qh, nope_dim), 7919) if nope_dim else None
    kshape = (tokens,) if mla else (tokens, kvh)
    k_rope = _take(x, kshape + (rope_dim,), 104729)
    k_nope = _take(x, kshape + (nope_dim,), 1299709) if nope_dim else None
    v = None if mla else _take(x, (tokens, kvh, head_dim), 15485863)
    csc = _cos_sin_cache(torch, rope_dim, max_pos, dev)
    pos_ids = _pos_ids(torch, tokens, max_pos, dev, seed)
    table, num_pages = _page_table(torch, tokens, page_size, dev, seed)
    sq, skv = _scales(torch, x)
    if mla:
        caches = dict(ckv_cache=_poisoned(torch, (num_pages, page_size, nope_dim), dev),
                      kpe_cache=_poisoned(torch, (num_pages, page_size, rope_dim), dev))
        pair = (caches["ckv_cache"], caches["kpe_cache"])
    else:
        shape = (num_pages, page_size, kvh, head_dim) if layout == "NHD" else (num_pages, kvh, page_size, head_dim)
        caches = dict(k_cache=_poisoned(torch, shape, dev), v_cache=_poisoned(torch, shape, dev))
        pair = (caches["k_cache"], caches["v_cache"])
    q_rope_out = _poisoned(torch, (tokens, qh, rope_dim), dev)
    q_nope_out = _poisoned(torch, (tokens, qh, nope_dim), dev)
    fi.rope_quantize_fp8_append_paged_kv_cache(
        q_rope, k_rope, q_nope, k_nope, v, csc, pos_ids, pair, table["kv_indices"], table["kv_indptr"],
        table["batch_indices"], table["positions"], is_neox=is_neox, quantize_dtype=torch.float8_e4m3fn,
        quant_scale_q=sq, quant_scale_kv=skv, page_size=page_size, kv_layout=layout,
        q_rope_out=q_rope_out, q_nope_out=q_nope_out)
    torch.cuda.synchronize()
    empty_q = torch.empty(tokens, qh, 0, dtype=x.dtype, device=dev)
    empty_k = torch.empty(kshape + (0,), dtype=x.dtype, device=dev)
    raw = dict(q_rope=q_rope, k_rope=k_rope, q_nope=q_nope if q_nope is not None else empty_q,
               k_nope=k_nope if k_nope is not None else empty_k, cos_sin_cache=csc, pos_ids=pos_ids, **table,
               q_rope_out=q_rope_out, q_nope_out=q_nope_out, **caches, **_scalars(torch, is_neox, sq, skv),
               page_size=torch.tensor(page_size, dtype=torch.int32),
               kv_layout_code=torch.tensor(0 if layout == "NHD" or mla else 1, dtype=torch.int32),
               kv_layout="NHD" if mla else layout, poison_byte=torch.tensor(POISON, dtype=torch.uint8))
    if v is not None:
        raw["v"] = v
    names = ("q_rope", "k_rope", "q_nope", "k_nope", "v", "cos_sin_cache", "pos_ids", "kv_indptr", "kv_indices",
             "batch_indices", "positions", "q_rope_out", "q_nope_out") + tuple(caches)
    rope = dict(kind="rope-append", is_neox=is_neox, quant_scale_q=sq, quant_scale_kv=skv, page_size=page_size,
                kv_layout="NHD" if mla else layout, poison=POISON, tensors={k: raw[k] for k in names if k in raw})
    return dict(recipe="rope-fp8", label=label, raw=raw, rope=rope)


# Geometries. FlashInfer's kernels need rope_dim a multiple of 32 for NeoX (16 for GPT-J; vectors of
# 16 elements, NeoX halves of whole vectors) and, for the paged kernel, nope_dim a multiple of rope_dim
# (it has no tail handling there). Positions up to 1e5 in one case per function (the cache then has
# 100,001 rows: 25.6 MB at rope_dim 64); the others use 4096 rows.
BIG_POS = 100_001


def _quantize_cases(ctx, x):
    return [
        _rope_quantize(ctx, x, "gqa-neox-partial(q4,kv2,64+64)-pos1e5", 4, 2, 64, 64, True, False, BIG_POS, 1),
        _rope_quantize(ctx, x, "gqa-gptj-full(q4,kv2,128)", 4, 2, 128, 0, False, False, 4096, 2),
        _rope_quantize(ctx, x, "mha-neox-nope-tail(q2,kv2,128+64)", 2, 2, 128, 64, True, False, 4096, 3),
        _rope_quantize(ctx, x, "mla-neox(q8,64+512)", 8, 1, 64, 512, True, True, 4096, 4),
        _rope_quantize(ctx, x, "mla-gptj(q8,64+512)", 8, 1, 64, 512, False, True, 4096, 5),
    ]


def _append_cases(ctx, x):
    return [
        _rope_append(ctx, x, "gqa-neox-partial-nhd(q4,kv2,64+64,ps16)-pos1e5", 4, 2, 64, 64, True, False, "NHD", 16,
                     BIG_POS, 11),
        _rope_append(ctx, x, "gqa-gptj-full-hnd(q4,kv2,128,ps16)", 4, 2, 128, 0, False, False, "HND", 16, 4096, 12),
        _rope_append(ctx, x, "mha-neox-full-hnd(q2,kv2,128,ps7)", 2, 2, 128, 0, True, False, "HND", 7, 4096, 13),
        _rope_append(ctx, x, "gqa-gptj-partial-nhd(q4,kv1,64+64,ps1)", 4, 1, 64, 64, False, False, "NHD", 1, 4096, 14),
        _rope_append(ctx, x, "mla-neox(q8,64+512,ps16)", 8, 1, 64, 512, True, True, "NHD", 16, 4096, 15),
        _rope_append(ctx, x, "mla-gptj(q8,64+512,ps32)", 8, 1, 64, 512, False, True, "NHD", 32, 4096, 16),
    ]


def producers(ctx):
    common = dict(library="flashinfer-python", files=FILES, stubs=_STUBS, dtypes=("bfloat16", "float16"))
    return [
        Producer(name="flashinfer-rope-quantize-fp8", function="flashinfer/rope.py:rope_quantize_fp8",
                 run=_quantize_cases, **common),
        Producer(name="flashinfer-rope-quantize-fp8-append-paged",
                 function="flashinfer/rope.py:rope_quantize_fp8_append_paged_kv_cache", run=_append_cases, **common),
    ]
