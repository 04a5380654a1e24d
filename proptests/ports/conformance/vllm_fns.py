"""vLLM 0.33.0 conformance producers: the engine's own Triton KV-cache writers, run on the GPU.

Each producer loads one file from the wheel (common.load_file), with the platform / registry
imports that file makes replaced by the stubs listed in `Producer.stubs` (never arithmetic), calls
the shipped function on a small paged cache pre-filled with the poison byte 0xA5, and returns the
flat view a kvq recipe covers plus exact layout checks and every raw tensor. Findings and the
arithmetic of each function: /work/notes/vllm.md.

Producers:
- vllm-triton-reshape-and-cache-flash-fp8: v1/attention/ops/triton_reshape_and_cache_flash.py:
  triton_reshape_and_cache_flash, kv_cache_dtype "fp8", per-tensor k_scale / v_scale (decode
  scales, x / s in Triton fp32 `/`), NHD cache [blocks, 16, 4, 128], padding slots -1.
- vllm-triton-per-token-head-fp8: the same file, triton_reshape_and_cache_flash_per_token_head_quant
  (KVQuantMode.FP8_PER_TOKEN_HEAD): one FP32 scale per (token, head). kvq has no recipe for it yet
  (recipe None, "note"); each (token, head) of the first 4 tokens is verified as fp8-e4m3-tensor-rcp.
- vllm-dsv4-model1-quantize-insert: models/deepseek_v41/common/ops/cache_utils.py:
  quantize_and_insert_k_cache, 584-byte V4 ("MODEL1") record: 448 E4M3 nope in tiles of 64 with
  UE8M0 scale bytes in the block's tail, 64 BF16 rope.
- vllm-dsv41-mxfp8-quantize-insert: the same function with bytes_per_token=528 (V4.1 MXFP8
  record: all 512 dims E4M3 in tiles of 32, 16 UE8M0 bytes after each token's data).

The 656-byte fp8_ds_mla writer vLLM uses for DeepSeek V3.2 (concat_and_cache_mla) is a compiled
CUDA op (torch.ops._C_cache_ops, in the .so): not covered here.
"""
import enum
import os
import sys
import typing

try:
    from .common import Producer, load_file, module
except ImportError:  # loaded by path, not as a package
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import Producer, load_file, module  # noqa: E402

LIBRARY = "vllm"
POISON = 0xA5

F_FLASH = "vllm/v1/attention/ops/triton_reshape_and_cache_flash.py"
F_CACHE_UTILS = "vllm/models/deepseek_v41/common/ops/cache_utils.py"
F_MATH_UTILS = "vllm/utils/math_utils.py"

STUBS_COMMON = [
    "vllm.platforms: current_platform (CUDA, not ROCm/XPU, not FNUZ; fp8_dtype() = torch.float8_e4m3fn; "
    "device capability read from torch.cuda)",
    "vllm.triton_utils: the installed triton and triton.language (vLLM's import shim)",
    "vllm.model_executor.layers.quantization.utils.quant_utils: FP8_DTYPE = torch.float8_e4m3fn and "
    "get_fp8_min_max() = finfo(float8_e4m3fn) (-448, 448), what it returns on a non-FNUZ CUDA platform",
]
STUBS_FLASH = STUBS_COMMON + [
    "vllm.v1.kv_cache_interface: KVQuantMode (the enum's values 0..4 as in the wheel) and "
    "is_quantized_kv_cache (True for fp8/fp8_e4m3/fp8_e5m2, False for auto/bf16/fp16/fp32): dtype-string dispatch",
]
STUBS_CACHE_UTILS = STUBS_COMMON + [
    "vllm.model_executor.warmup.jit_warmup: VllmJitKernel/_WarmupInputRows/zip_inputs (JIT warmup registry, "
    "used only by an unrelated index kernel)",
    "vllm.model_executor.warmup.jit_warmup_triton_helper: TritonPointerInputVariant/TritonWarmupTensor (warmup)",
    "vllm.transformers_utils.deepseek_v4_utils: get_compress_ratios (HF config reader, warmup only)",
    "vllm.utils.import_utils: has_cutedsl() = False (optional-package probe; gathers only)",
]


class StageError(RuntimeError):
    """A producer could not set up or run the engine's function."""


# --- stubs ------------------------------------------------------------------------------------

def _install_stubs(ctx):
    torch = ctx.torch
    try:
        import triton
        import triton.language as tl
    except ImportError as e:  # pragma: no cover - only on a machine without triton
        raise StageError("triton is required for the vLLM Triton producers: %s" % e)

    class _Platform:
        """Only the queries these two files make."""

        def is_rocm(self):
            return False

        def is_xpu(self):
            return False

        def is_cuda(self):
            return True

        def is_fp8_fnuz(self):
            return False

        def fp8_dtype(self):
            return torch.float8_e4m3fn

        def _cap(self):
            major, minor = torch.cuda.get_device_capability()
            return major * 10 + minor

        def has_device_capability(self, capability, device_id=0):
            if isinstance(capability, tuple):
                capability = capability[0] * 10 + capability[1]
            return self._cap() >= capability

        def is_device_capability_family(self, capability, device_id=0):
            return self._cap() // 10 == capability // 10

    if "vllm.platforms" not in sys.modules or not hasattr(sys.modules["vllm.platforms"], "current_platform"):
        module("vllm.platforms", current_platform=_Platform())
    module("vllm.triton_utils", tl=tl, triton=triton, HAS_TRITON=True)

    def get_fp8_min_max():
        fi = torch.finfo(torch.float8_e4m3fn)
        return float(fi.min), float(fi.max)

    module("vllm.model_executor.layers.quantization.utils.quant_utils",
           FP8_DTYPE=torch.float8_e4m3fn, get_fp8_min_max=get_fp8_min_max)

    class KVQuantMode(enum.IntEnum):  # the wheel's values (v1/kv_cache_interface.py)
        NONE = 0
        FP8_PER_TENSOR = 1
        INT8_PER_TOKEN_HEAD = 2
        FP8_PER_TOKEN_HEAD = 3
        INT4_PER_TOKEN_HEAD = 4

    def is_quantized_kv_cache(kv_cache_dtype):
        if kv_cache_dtype in ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_per_token_head", "int8_per_token_head"):
            return True
        if kv_cache_dtype in ("auto", "float16", "bfloat16", "float32", "half", "float"):
            return False
        raise StageError("stub is_quantized_kv_cache: unexpected kv_cache_dtype %r" % (kv_cache_dtype,))

    if not hasattr(sys.modules.get("vllm.v1.kv_cache_interface"), "KVQuantMode"):
        module("vllm.v1.kv_cache_interface", KVQuantMode=KVQuantMode, is_quantized_kv_cache=is_quantized_kv_cache)

    T = typing.TypeVar("T")

    class VllmJitKernel(typing.Generic[T]):
        def __init__(self, *args, **kwargs):
            pass

    class _WarmupInputRows(tuple):
        pass

    def zip_inputs(*rows):
        return _WarmupInputRows(rows)

    class TritonPointerInputVariant:
        pass

    class TritonWarmupTensor:
        pass

    module("vllm.model_executor.warmup.jit_warmup", VllmJitKernel=VllmJitKernel,
           _WarmupInputRows=_WarmupInputRows, zip_inputs=zip_inputs)
    module("vllm.model_executor.warmup.jit_warmup_triton_helper",
           TritonPointerInputVariant=TritonPointerInputVariant, TritonWarmupTensor=TritonWarmupTensor)
    module("vllm.transformers_utils.deepseek_v4_utils", get_compress_ratios=lambda hf_config: [])
    module("vllm.utils.import_utils", has_cutedsl=lambda: False)


def _load_flash(ctx):
    _install_stubs(ctx)
    mod = load_file(ctx, F_FLASH)
    for name in ("triton_reshape_and_cache_flash", "triton_reshape_and_cache_flash_per_token_head_quant"):
        if not hasattr(mod, name):
            raise StageError("%s has no %s" % (F_FLASH, name))
    return mod


def _load_cache_utils(ctx):
    _install_stubs(ctx)
    load_file(ctx, F_MATH_UTILS)  # pure helpers (cdiv, next_power_of_2), the real file
    mod = load_file(ctx, F_CACHE_UTILS)
    if not hasattr(mod, "quantize_and_insert_k_cache"):
        raise StageError("%s has no quantize_and_insert_k_cache" % F_CACHE_UTILS)
    return mod


# --- helpers -----------------------------------------------------------------------------------

def _np(t):
    return t.detach().cpu().contiguous().numpy()


def _bits(torch, t):
    """Bit patterns of a 16/32-bit float tensor as numpy (uint16 / uint32)."""
    t = t.detach().cpu().contiguous()
    if t.element_size() == 2:
        return t.view(torch.int16).numpy().view("uint16")
    if t.element_size() == 4:
        return t.view(torch.int32).numpy().view("uint32")
    raise StageError("no bit view for %s" % t.dtype)


def _check_input(ctx, x, cols=512, dtypes=None):
    torch = ctx.torch
    if x.dim() != 2 or x.shape[1] != cols:
        raise StageError("x must be [rows, %d], got %s" % (cols, tuple(x.shape)))
    if dtypes and x.dtype not in dtypes:
        raise StageError("x dtype %s not in %s" % (x.dtype, dtypes))
    if x.device.type != "cuda":
        raise StageError("the vLLM Triton producers need a CUDA device (got %s)" % x.device)
    if not torch.cuda.is_available():
        raise StageError("CUDA is not available")
    return x.contiguous()


def _slot_mapping(torch, rows, total_slots, seed, pad_every=7, pad_at=3):
    """A scattered slot per token (distinct, shuffled), every pad_every-th token padding (-1)."""
    if total_slots < rows:
        raise StageError("cache too small: %d slots for %d tokens" % (total_slots, rows))
    g = torch.Generator(device="cpu").manual_seed(seed)
    slots = torch.randperm(total_slots, generator=g)[:rows].to(torch.int64)
    pad = (torch.arange(rows) % pad_every) == pad_at
    slots[pad] = -1
    return slots  # CPU


def _finite_amax(torch, t):
    f = t.float()
    f = f[torch.isfinite(f)]
    a = float(f.abs().max()) if f.numel() else 0.0
    return a if a > 0 else 1.0


def _untouched_check(np, description, flat_bytes, written_mask):
    rest = flat_bytes[~written_mask]
    return (description, np.full(rest.shape, POISON, dtype=np.uint8), rest.astype(np.uint8))


# --- 1. triton_reshape_and_cache_flash, FP8 per-tensor ------------------------------------------

H, D, BS = 4, 128, 16  # heads, head_size, block_size of the paged-store producers


def _e4m3_ties(torch, scale):
    """x values whose x / scale is exactly an E4M3 rounding midpoint (normal range), where
    representable in the input dtypes (checked by the caller against bf16)."""
    vals = []
    for e in range(-6, 9):
        for k in range(8, 16):
            m = (k + 0.5) / 8.0 * 2.0 ** e
            if m < 448:
                vals.append(m)
                vals.append(-m)
    t = torch.tensor(vals, dtype=torch.float64) * scale
    keep = t.to(torch.bfloat16).double() == t
    return t[keep].float()


def _run_flash(ctx, mod, x, k_scale_value, v_scale_value, label, seed):
    torch = ctx.torch
    import numpy as np

    rows = x.shape[0]
    dev = x.device
    num_blocks = (rows * 3 // 2 + BS - 1) // BS + 1
    slots_cpu = _slot_mapping(torch, rows, num_blocks * BS, seed)
    slot_mapping = slots_cpu.to(dev)
    key = x.reshape(rows, H, D)
    value = x.flip(1).contiguous().reshape(rows, H, D)  # the same values, other columns
    key_cache = torch.full((num_blocks, BS, H, D), POISON, dtype=torch.uint8, device=dev)
    value_cache = torch.full((num_blocks, BS, H, D), POISON, dtype=torch.uint8, device=dev)
    k_scale = torch.tensor([k_scale_value], dtype=torch.float32, device=dev)
    v_scale = torch.tensor([v_scale_value], dtype=torch.float32, device=dev)
    # The backend passes the caches viewed as the platform fp8 dtype; the wrapper views uint8
    # caches itself (same bytes).
    mod.triton_reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, "fp8", k_scale, v_scale)
    torch.cuda.synchronize()

    valid = slots_cpu >= 0
    s_valid = slots_cpu[valid]
    kc = key_cache.cpu().reshape(num_blocks * BS, H * D)
    vc = value_cache.cpu().reshape(num_blocks * BS, H * D)
    addressed = np.zeros(num_blocks * BS, dtype=bool)
    addressed[s_valid.numpy()] = True
    kc_np, vc_np = kc.numpy(), vc.numpy()
    checks = [
        _untouched_check(np, "key_cache rows of slots no token addresses keep 0xA5 (padding tokens write nothing)",
                         kc_np, np.broadcast_to(addressed[:, None], kc_np.shape)),
        _untouched_check(np, "value_cache rows of slots no token addresses keep 0xA5",
                         vc_np, np.broadcast_to(addressed[:, None], vc_np.shape)),
    ]
    raw = {"key": key, "value": value, "slot_mapping": slot_mapping, "key_cache": key_cache,
           "value_cache": value_cache, "k_scale": k_scale, "v_scale": v_scale}
    common = dict(global_scale_role="input", global_scale_convention="decode")
    xk = x.cpu()[valid]
    xv = value.reshape(rows, H * D).cpu()[valid]
    return [
        dict(recipe="fp8-e4m3-tensor-triton", label=label + "/key", x=xk, codes=kc[s_valid], global_scale=k_scale.cpu(),
             exact_checks=checks, raw=raw,
             paged=dict(key=key, value=value, slot_mapping=slot_mapping, key_cache=key_cache, value_cache=value_cache,
                        k_scale=k_scale, v_scale=v_scale, poison=POISON), **common),
        dict(recipe="fp8-e4m3-tensor-triton", label=label + "/value", x=xv, codes=vc[s_valid], global_scale=v_scale.cpu(),
             exact_checks=[], **common),
    ]


def run_flash_fp8(ctx, x):
    torch = ctx.torch
    x = _check_input(ctx, x, dtypes=(torch.bfloat16, torch.float16, torch.float32))
    mod = _load_flash(ctx)
    out = []
    amax = _finite_amax(torch, x)
    s = amax / 448.0
    out += _run_flash(ctx, mod, x, s, s, "calibrated", 101)
    # A static scale four times too small: every |x| > 112 s overflows E4M3 before the store.
    out += _run_flash(ctx, mod, x, s / 4.0, s / 8.0, "overflow", 102)
    # Scale 3 (not a power of two): x / 3 lands exactly on E4M3 midpoints in the first rows, where
    # an approximate division (Triton fp32 `/` = div.full.f32) can round the other way.
    ties = _e4m3_ties(torch, 3.0).to(x.dtype).to(x.device)
    xt = x.clone()
    n = min(ties.numel(), xt.shape[0] * xt.shape[1] // 2)
    xt.view(-1)[:n] = ties[:n]
    out += _run_flash(ctx, mod, xt, 3.0, 3.0, "ties-scale-3", 103)
    # Specials (NaN, +-inf, -0, subnormal-range values) in the second half of row 0..1.
    xs = x.clone()
    if xs.shape[0] >= 2:
        specials = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1e-30, -1e-30, 3e-38],
                                dtype=torch.float32).to(x.dtype).to(x.device)
        xs[1, 256:256 + specials.numel()] = specials
    out += _run_flash(ctx, mod, xs, s, s, "specials", 104)
    return out


# --- 2. per-token-head FP8 ----------------------------------------------------------------------

def run_per_token_head_fp8(ctx, x):
    torch = ctx.torch
    import numpy as np

    x = _check_input(ctx, x, dtypes=(torch.bfloat16, torch.float16, torch.float32))
    mod = _load_flash(ctx)
    mode = sys.modules["vllm.v1.kv_cache_interface"].KVQuantMode.FP8_PER_TOKEN_HEAD
    # Rows with small / zero heads, so the 1e-6 scale floor shows: head 1 of row 0 all zero,
    # head 2 of row 0 scaled to max 1e-4 (amax/448 < 1e-6), head 3 a -0 head.
    x = x.clone()
    if x.shape[0] >= 1:
        x[0, 128:256] = 0
        h = x[0, 256:384].float()
        x[0, 256:384] = (h / h.abs().max().clamp_min(1e-30) * 1e-4).to(x.dtype)
        x[0, 384:512] = -0.0
    rows = x.shape[0]
    dev = x.device
    num_blocks = (rows * 3 // 2 + BS - 1) // BS + 1
    slots_cpu = _slot_mapping(torch, rows, num_blocks * BS, 201)
    slot_mapping = slots_cpu.to(dev)
    key = x.reshape(rows, H, D)
    value = x.flip(1).contiguous().reshape(rows, H, D)
    kc_u8 = torch.full((num_blocks, BS, H, D), POISON, dtype=torch.uint8, device=dev)
    vc_u8 = torch.full((num_blocks, BS, H, D), POISON, dtype=torch.uint8, device=dev)
    ks_u8 = torch.full((num_blocks, BS, H, 4), POISON, dtype=torch.uint8, device=dev)
    vs_u8 = torch.full((num_blocks, BS, H, 4), POISON, dtype=torch.uint8, device=dev)
    key_cache, value_cache = kc_u8.view(torch.float8_e4m3fn), vc_u8.view(torch.float8_e4m3fn)
    k_scale_cache = ks_u8.view(torch.float32).reshape(num_blocks, BS, H)
    v_scale_cache = vs_u8.view(torch.float32).reshape(num_blocks, BS, H)
    mod.triton_reshape_and_cache_flash_per_token_head_quant(key, value, key_cache, value_cache, k_scale_cache,
                                                            v_scale_cache, slot_mapping, kv_quant_mode=mode)
    torch.cuda.synchronize()

    valid = slots_cpu >= 0
    s_valid = slots_cpu[valid]
    kc = kc_u8.cpu().reshape(num_blocks * BS, H * D)
    vc = vc_u8.cpu().reshape(num_blocks * BS, H * D)
    ks = k_scale_cache.cpu().reshape(num_blocks * BS, H)
    vs = v_scale_cache.cpu().reshape(num_blocks * BS, H)
    addressed = np.zeros(num_blocks * BS, dtype=bool)
    addressed[s_valid.numpy()] = True
    checks = []
    for name, t in (("key_cache", kc_u8), ("value_cache", vc_u8), ("k_scale_cache", ks_u8), ("v_scale_cache", vs_u8)):
        a = t.cpu().reshape(num_blocks * BS, -1).numpy()
        checks.append(_untouched_check(np, "%s bytes of slots no token addresses keep 0xA5" % name, a,
                                       np.broadcast_to(addressed[:, None], a.shape)))
    raw = {"key": key, "value": value, "slot_mapping": slot_mapping, "key_cache": kc_u8, "value_cache": vc_u8,
           "k_scale_cache": k_scale_cache, "v_scale_cache": v_scale_cache}
    xk = x.cpu()[valid]
    xv = value.reshape(rows, H * D).cpu()[valid]
    # No kvq recipe models a per-(token, head) FP32 scale yet (a proposal: "fp8-e4m3-token-head",
    # scale = max(amax/448, 1e-6) stored FP32, elements x * (1/scale), clamp, E4M3 RN satfinite), and kvq
    # reads FP32 block scales only as powers of two: the dumps are kept with recipe None.
    note = ("kvq has no FP32 tile-scale recipe yet: one FP32 scale per (token, head) of 128, "
            "max(amax/448, 1e-6), not a power of two (proposed name fp8-e4m3-token-head); each (token, head) "
            "of the first tokens is also dumped as fp8-e4m3-tensor-rcp")
    out = [
        dict(recipe=None, note=note, label="key", x=xk, codes=kc[s_valid], block_scales=ks[s_valid].contiguous(),
             block=D, exact_checks=checks, raw=raw,
             # the whole call, layout-aware (kvq verify paged-store with the scale caches)
             paged=dict(key=key, value=value, slot_mapping=slot_mapping, key_cache=kc_u8, value_cache=vc_u8,
                        k_scale_cache=k_scale_cache, v_scale_cache=v_scale_cache, poison=POISON),
             paged_recipe="fp8-e4m3-token-head-triton"),
        dict(recipe=None, note=note, label="value", x=xv, codes=vc[s_valid],
             block_scales=vs[s_valid].contiguous(), block=D, exact_checks=[]),
    ]
    # The same, one (token, head) at a time as the per-tensor reciprocal recipe, with the scale the
    # kernel stored as the tensor decode scale (role output): the first 4 valid tokens.
    for i in range(min(4, int(valid.sum()))):
        for h in range(H):
            out.append(dict(recipe="fp8-e4m3-token-head-triton", label="key/token%d/head%d" % (i, h),
                            x=xk[i:i + 1, h * D:(h + 1) * D].contiguous(),
                            codes=kc[s_valid][i:i + 1, h * D:(h + 1) * D].contiguous(),
                            global_scale=ks[s_valid][i, h].reshape(1).contiguous(),
                            global_scale_role="output", global_scale_convention="decode"))
    return out


# --- 3. DeepSeek V4 MODEL1 (584 B) and V4.1 MXFP8 (528 B) ------------------------------------------

MLA_BS = 64  # the paged cache block size the model uses


def _round_up(a, b):
    return (a + b - 1) // b * b


def _mla_special_rows(torch, x):
    """x with tiles that show the scale rules: per 64-dim tile of row 0 (and 32-dim tiles inside
    them): zero, max 0.01, max 448*2^k for k = -8..-3, -0, and NaN / inf tiles in row 1."""
    x = x.clone()
    if x.shape[0] < 2:
        return x
    r = x[0].float()
    r[0:64] = 0.0
    r[64:128] = r[64:128] / r[64:128].abs().max().clamp_min(1e-30) * 0.01
    for j, k in enumerate(range(-8, -3)):  # tiles 2..6 (dims 128..447): max exactly 448 * 2^k
        lo = 128 + 64 * j
        t = r[lo:lo + 64].clamp(-1, 1) * (448.0 * 2.0 ** k) * 0.5
        t[5] = 448.0 * 2.0 ** k
        r[lo:lo + 64] = t
    r[448:480] = -0.0  # a -0 tile (V4.1 tile 14; V4 rope)
    x[0] = r.to(x.dtype)
    r1 = x[1].float()
    r1[3] = float("nan")           # tile 0 (V4 and V4.1): one NaN
    r1[64 + 7] = float("inf")      # V4 tile 1 / V4.1 tile 2: +inf
    r1[160 + 1] = float("-inf")    # V4 tile 2 / V4.1 tile 5: -inf
    x[1] = r1.to(x.dtype)
    return x


def _run_mla(ctx, mod, x, v41, label, seed):
    torch = ctx.torch
    import numpy as np

    rows = x.shape[0]
    dev = x.device
    if v41:
        per_token, align = mod.V41_BYTES_PER_TOKEN, 512
        data_bytes, scale_bytes, tile = 512, 16, 32
    else:
        per_token, align = mod.V4_BYTES_PER_TOKEN, 576
        data_bytes, scale_bytes, tile = 576, 8, 64
    block_stride = _round_up(MLA_BS * per_token, align)  # the page alignment the attention layer asks for
    num_blocks = (rows * 5 // 4 + MLA_BS - 1) // MLA_BS + 1
    slots_cpu = _slot_mapping(torch, rows, num_blocks * MLA_BS, seed)
    slot_mapping = slots_cpu.to(dev)
    k_cache = torch.full((num_blocks, block_stride), POISON, dtype=torch.uint8, device=dev)
    if v41:
        mod.quantize_and_insert_k_cache(x, k_cache, slot_mapping, block_size=MLA_BS,
                                        bytes_per_token=mod.V41_BYTES_PER_TOKEN)
    else:
        mod.quantize_and_insert_k_cache(x, k_cache, slot_mapping, block_size=MLA_BS)
    torch.cuda.synchronize()

    flat = k_cache.cpu().reshape(-1).numpy()
    valid = (slots_cpu >= 0).numpy()
    s = slots_cpu.numpy()[valid]
    b, p = s // MLA_BS, s % MLA_BS
    if v41:
        data_at = b * block_stride + p * per_token
        scale_at = data_at + data_bytes
    else:
        data_at = b * block_stride + p * data_bytes
        scale_at = b * block_stride + MLA_BS * data_bytes + p * scale_bytes
    data_idx = data_at[:, None] + np.arange(data_bytes)[None, :]
    scale_idx = scale_at[:, None] + np.arange(scale_bytes)[None, :]
    data = flat[data_idx]
    scales = flat[scale_idx]
    written = np.zeros(flat.shape, dtype=bool)
    written[data_idx.reshape(-1)] = True
    written[scale_idx.reshape(-1)] = True
    checks = [_untouched_check(np, "bytes outside the addressed tokens' records (other slots, block padding) keep 0xA5",
                               flat, written)]
    xv = x.cpu()[torch.from_numpy(valid)]
    raw = {"k": x, "slot_mapping": slot_mapping, "k_cache": k_cache}
    if v41:
        nope_x, codes, block_scales = xv, data[:, :512], scales
    else:
        nope_x, codes, block_scales = xv[:, :448].contiguous(), data[:, :448], scales[:, :7]
        rope_expected = _bits(torch, xv[:, 448:512])
        rope_actual = np.ascontiguousarray(data[:, 448:576]).view(np.uint16)
        checks.append(("rope: the 64 BF16 dims stored bit for bit after the 448 E4M3 bytes", rope_expected,
                       rope_actual))
        checks.append(("scale pad byte (index 7 of each token's 8 scale bytes) is 0",
                       np.zeros(len(s), dtype=np.uint8), scales[:, 7].copy()))
    # V4 (MODEL1) is kvq's model1_fp8_sparse layout: the whole cache as `kvq verify mla-cache` reads it.
    mla = None if v41 else dict(k=x, slot_mapping=slot_mapping, k_cache=k_cache, layout="model1_fp8_sparse",
                                block_size=MLA_BS, poison=POISON)
    return dict(recipe="mla-model1-mxfp8-tile32" if v41 else "mla-model1-tile64", label=label, x=nope_x, codes=np.ascontiguousarray(codes),
                block_scales=np.ascontiguousarray(block_scales), block=tile, exact_checks=checks, raw=raw, mla=mla)


def _run_mla_all(ctx, x, v41):
    torch = ctx.torch
    x = _check_input(ctx, x, dtypes=(torch.bfloat16,))  # the wrapper asserts bf16
    mod = _load_cache_utils(ctx)
    tag = "v41-mxfp8" if v41 else "v4-model1"
    return [_run_mla(ctx, mod, x, v41, tag + "/input", 301 if v41 else 311),
            _run_mla(ctx, mod, _mla_special_rows(torch, x), v41, tag + "/special-tiles", 302 if v41 else 312)]


def run_model1(ctx, x):
    return _run_mla_all(ctx, x, v41=False)


def run_mxfp8(ctx, x):
    return _run_mla_all(ctx, x, v41=True)


# --- the list -----------------------------------------------------------------------------------

def producers(ctx):
    return [
        Producer(name="vllm-triton-reshape-and-cache-flash-fp8", library=LIBRARY,
                 function=F_FLASH + ":triton_reshape_and_cache_flash",
                 run=run_flash_fp8, files=[F_FLASH], stubs=list(STUBS_FLASH),
                 dtypes=("bfloat16", "float16", "float32")),
        Producer(name="vllm-triton-per-token-head-fp8", library=LIBRARY,
                 function=F_FLASH + ":triton_reshape_and_cache_flash_per_token_head_quant",
                 run=run_per_token_head_fp8, files=[F_FLASH], stubs=list(STUBS_FLASH),
                 dtypes=("bfloat16", "float16", "float32")),
        Producer(name="vllm-dsv4-model1-quantize-insert", library=LIBRARY,
                 function=F_CACHE_UTILS + ":quantize_and_insert_k_cache (quantize_and_insert_k_kernel, 584 B)",
                 run=run_model1, files=[F_CACHE_UTILS, F_MATH_UTILS], stubs=list(STUBS_CACHE_UTILS),
                 dtypes=("bfloat16",)),
        Producer(name="vllm-dsv41-mxfp8-quantize-insert", library=LIBRARY,
                 function=F_CACHE_UTILS + ":quantize_and_insert_k_cache (_quantize_and_insert_k_mxfp8_kernel, 528 B)",
                 run=run_mxfp8, files=[F_CACHE_UTILS, F_MATH_UTILS], stubs=list(STUBS_CACHE_UTILS),
                 dtypes=("bfloat16",)),
    ]
