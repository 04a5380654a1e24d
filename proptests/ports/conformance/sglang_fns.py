"""SGLang 0.5.23 KV-cache quantizers, run from the wheel's own files (see /work/notes/sglang.md).

Producers:
  sglang-blockfp4-quantize-compiled   FP4MXBlock16KVQuantizeUtil.batched_quantize (torch.compile, as shipped)
  sglang-blockfp4-quantize-eager      the same function body without torch.compile
  sglang-nvfp4-dequantize-sm90        NVFP4KVQuantizeUtil.dequantize, its pure-PyTorch (SM90) branch
  sglang-nvfp4-fp8-workspace          NVFP4KVCacheMethod.dequantize_prev_kv (FP4 -> BF16 -> E4M3 workspace)
  sglang-mla-656-quantize             quantize_k_cache / quantize_k_cache_separate (Triton, 656 B records)
  sglang-mla-656-dequantize           dequantize_k_cache (Triton, 656 B -> BF16)
  sglang-mla-656-to-576-requantize    gather_dequant_requant_fp8_paged_dsa (Triton, 656 B -> 576 B FP8)
  sglang-mla-576-store-cast           the 576 B FP8 MLA store: one torch cast (memory_pool.py cannot be loaded)

  sglang-nvfp4-quantize-sm90          NVFP4KVQuantizeUtil.quantize, its SM90 branch: flashinfer fp4_quantize
                                      (FlashInfer's JIT module fp4_quantization_90, built from the wheel)
  sglang-nvfp4-pool-store             store_nvfp4_kv_cache (Triton): codes and linear scales scattered into
                                      the pool (k_buffer, k_scale_buffer, v_buffer, v_scale_buffer)

Skipped (SM100/SM120 only): NVFP4 quantize's nvfp4_kv_quantize, the fused nvfp4_store_kv_index JIT
kernel, nvfp4_kv_dequantize. SGLang has no 576 -> 656 conversion of an FP8 cache.

NVFP4 codes for the dequantize/workspace producers come from kvq's own worked-example port
(kvq_dump.nvfp4_numpy_port, the nvfp4 recipe in numpy), because SGLang ships no NVFP4 quantizer
outside flashinfer; only the dequantized values / workspace bytes are SGLang's.

Scale layout for NVFP4KVQuantizeUtil.dequantize's SM90 branch (kvfp4_tensor.py:271-282): it multiplies
E2M1 values viewed [B, M*N/16, 16] by block_scales.float().unsqueeze(-1), so only 2-D block scales
[B, M*N/16] broadcast per block. The pool's 3-D [T, H, D/16] scales (get_raw_kv_buffer, what
dequantize_prev_kv passes) broadcast to [T, T, ...] and fail the final view for T > 1 (the run-8
error "shape '[128, 1, 512]' is invalid for input of size 8388608"): on SM90 that path works only one
token at a time (NVFP4KVCacheMethod documents SM100/SM120 only; the SM100 kernel path reshapes the
scales to [B*M, -1] and takes either). The producers therefore pass the same bytes as [rows, 32]
(codes [rows, 1, 256], global scale a [1] FP32 tensor, as dequantize_prev_kv slices it), and the
dequantize producer checks that a 1-token call with the pool's 3-D layout gives the same bits.
"""
import os
import sys

import numpy as np

try:
    from .common import Producer, load_file, module
except ImportError:  # loaded as a top-level module with this folder on sys.path
    from common import Producer, load_file, module

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import kvq_dump  # noqa: E402  (proptests/ports/kvq_dump.py)

F_KVFP4 = "sglang/srt/layers/quantization/kvfp4_tensor.py"
F_METHOD = "sglang/srt/layers/quantization/fp4_kv_cache_quant_method.py"
F_NVFP4_STORE = "sglang/srt/layers/quantization/nvfp4_kv_cache.py"
F_MLA_Q = "sglang/kernels/ops/quantization/dsa_quant_k_cache.py"
F_MLA_DQ = "sglang/kernels/ops/attention/dsa/dequant_k_cache.py"

STUB_PLATFORM = ("sglang.srt.runtime_context: get_platform() returning an object with is_sm90=True, "
                 "is_sm100=False, is_sm120=False (platform query only; selects the pure-PyTorch "
                 "NVFP4 dequantize branch and the non-SM100 k_scale handling)")

MLA_NOPE, MLA_ROPE, MLA_TILE = 512, 64, 128
MLA_RECORD = MLA_NOPE + 4 * (MLA_NOPE // MLA_TILE) + 2 * MLA_ROPE  # 656
# SGLang's 656 B record stores each tile's scale as the FP32 amax/448 (Triton's `/`), not a power of
# two: the flat kind reads FP32 block scales only as power-of-two (E8M0) values, so the flat record
# dumps stay unverified (recipe None); each tile is dumped as fp8-e4m3-tensor-rcp-triton with its
# stored scale, and the whole records as an MLA cache (`kvq verify mla-cache`, the record's own rule).
NOTE_FP32_TILE = ("the flat kind reads FP32 tile scales only as powers of two: the 656 B record's scales are FP32 "
                  "amax/448; each tile is dumped as fp8-e4m3-tensor-rcp-triton and the whole records as an "
                  "mla-cache call")


# --- helpers -------------------------------------------------------------------------------

class _Platform:
    is_sm90 = True
    is_sm100 = False
    is_sm120 = False
    is_sm103 = False
    is_cuda = True
    is_hip = False


def _stub_platform():
    module("sglang.srt.runtime_context", get_platform=lambda: _Platform())


def _load(ctx, relpath):
    if not os.path.isfile(ctx.path(relpath)):
        raise FileNotFoundError("wheel file not staged: %s (root %s)" % (relpath, ctx.root))
    return load_file(ctx, relpath)


def _kvfp4(ctx):
    _stub_platform()
    return _load(ctx, F_KVFP4)


def _check_x(x, cols=512):
    if x.dim() != 2 or x.shape[1] != cols:
        raise ValueError("expected x of shape [rows, %d], got %s" % (cols, tuple(x.shape)))
    if x.shape[0] < 2:
        raise ValueError("need at least 2 rows, got %d" % x.shape[0])


def _np_u8(t):
    """A torch tensor's bytes as a numpy uint8 array of shape [..., nbytes_last]."""
    t = t.detach().contiguous().cpu()
    import torch

    return t.view(torch.uint8).numpy().copy()


def _eager_fn(fn):
    """The function under a torch.compile wrapper, or a clear error."""
    orig = getattr(fn, "_torchdynamo_orig_callable", None) or getattr(fn, "__wrapped__", None)
    if orig is None or orig is fn:
        raise RuntimeError("cannot find the eager body of the torch.compile'd function %r" % (fn,))
    return orig


_E4M3_TABLE = np.array([kvq_dump._e4m3_value(c) for c in range(0x7F)], dtype=np.float64)


def _e4m3_bytes_from_f64(v, saturate):
    """E4M3FN bytes of float64 values, rounded once (RNE). saturate: cvt.rn.satfinite (|q| > 448 -> 448,
    NaN -> 0x7F); else torch's c10 cast (a magnitude rounding above 448 -> 0x7F | sign)."""
    v = np.asarray(v, dtype=np.float64)
    a = np.abs(v)
    nan = np.isnan(a)
    a0 = np.where(nan | np.isinf(a), 0.0, a)
    _, e = np.frexp(np.maximum(a0, 2.0 ** -6))
    step = np.ldexp(1.0, (e - 1 - 3).astype(np.int64))
    q = np.round(a0 / step) * step
    over = (q > 448.0) | np.isinf(a)
    q = np.minimum(q, 448.0)
    code = np.searchsorted(_E4M3_TABLE, q).astype(np.uint8)
    if saturate:
        code = np.where(nan, np.uint8(0x7F), code)
    else:
        code = np.where(over | nan, np.uint8(0x7F), code)
    sign = np.signbit(v) & ~(nan & saturate)
    return (code | np.where(sign, 0x80, 0).astype(np.uint8)).astype(np.uint8)


def _bf16_rne(f32):
    """float32 array -> float32 array holding the BF16 RNE rounding (no NaN expected)."""
    u = np.ascontiguousarray(f32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def _unpack_e2m1(packed):
    lo = packed & 0x0F
    hi = packed >> 4
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), dtype=np.uint8)
    out[..., 0::2] = lo
    out[..., 1::2] = hi
    return out


# --- BlockFP4 (E8M0, block 16) -------------------------------------------------------------

def _blockfp4_special(torch, x):
    """x with hand-picked blocks in row 0 (only values the dtype represents exactly):
    blocks 0-1: ceil(log2) traps (log2 rounded to the working precision), 2: all zero, 3: all -0,
    4: every E2M1 tie at scale 2^-1, 5: a max of exactly 6 * 2^3."""
    y = x.clone()
    dt = x.dtype
    picks = {
        torch.bfloat16: [24.125, 24.125 * 2.0 ** 20],
        torch.float16: [1537.0, 24.125],
        torch.float32: [6291457.5, float(np.float32(6 * 2.0 ** -20 * (1 + 2.0 ** -22)))],
    }[dt]
    for b, v in enumerate(picks):
        blk = torch.full((16,), 0.0, dtype=torch.float32)
        blk[0] = v
        blk[1:] = torch.linspace(-1.0, 1.0, 15) * (v / 8.0)
        t = blk.to(dt)
        if float(t[0]) != v:
            raise AssertionError("special value %r is not exact in %s" % (v, dt))
        y[0, 16 * b:16 * (b + 1)] = t.to(y.device)
    y[0, 32:48] = 0.0
    y[0, 48:64] = -0.0
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25, -2.5, -5, 6, 0, 1, 2, 3, 4]) * 0.5
    y[0, 64:80] = ties.to(dt).to(y.device)
    y[0, 80:96] = (torch.linspace(-1.0, 1.0, 16) * 48.0).to(dt).to(y.device)
    return y


def _blockfp4_run(ctx, x, compiled):
    torch = ctx.torch
    _check_x(x)
    mod = _kvfp4(ctx)
    util = mod.FP4MXBlock16KVQuantizeUtil
    q = util.batched_quantize
    dq = util.batched_dequantize
    if not compiled:
        q, dq = _eager_fn(q), _eager_fn(dq)
    results = []
    for label, xin in (("random", x), ("special", _blockfp4_special(torch, x))):
        rows = xin.shape[0]
        packed, sf = q(xin.contiguous().view(rows, 1, 512))
        if packed.dtype != torch.uint8 or sf.dtype != torch.uint8:
            raise TypeError("unexpected output dtypes %s %s" % (packed.dtype, sf.dtype))
        deq = dq(packed, sf, dtype=torch.bfloat16)
        packed2 = packed.reshape(rows, 256)
        sf2 = sf.reshape(rows, 32)
        # exact check: dequantized == E2M1 value * 2^(byte-127) rounded once to BF16 (from the outputs'
        # own codes: the dequantize rule, not the quantizer)
        codes = _unpack_e2m1(_np_u8(packed2))
        sbytes = _np_u8(sf2).astype(np.int64)
        scale = np.ldexp(1.0, np.repeat(sbytes - 127, 16, axis=1))
        expect = _bf16_rne((_E2M1[codes].astype(np.float64) * scale).astype(np.float32))
        expect_bytes = (expect.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(rows, -1)
        results.append(dict(
            recipe="blockfp4-e8m0-ceil", label="%s-%s" % ("compiled" if compiled else "eager", label),
            x=xin, codes=packed2, block_scales=sf2, dequantized=deq.reshape(rows, 512),
            nibble_order="low_first", block=16,
            exact_checks=[("batched_dequantize == bf16(e2m1(code) * 2^(scale byte - 127)) (from the codes)",
                           expect_bytes,
                           _np_u8(deq.reshape(rows, 512)))],
            raw={"packed": packed, "scale_factors": sf, "dequantized_bf16": deq}))
    return results


# --- NVFP4 dequantize (SM90 PyTorch branch) and the FP8 prefill workspace --------------------

def _nvfp4_codes(torch, x):
    """kvq's reference NVFP4 port (numpy) on x: packed codes [rows, 256], E4M3 bytes [rows, 32], g."""
    xf = x.detach().float().cpu().numpy()
    packed, scales, g = kvq_dump.nvfp4_numpy_port(xf)
    return packed, scales, np.float32(g)


def _fp4_outputs_after_poison(ctx, mod, x3, gs, poison):
    """NVFP4KVQuantizeUtil.quantize(x3, gs) right after blocks of its outputs' sizes were filled with
    `poison` and freed (the caching allocator hands the same blocks back to its torch.empty): the codes
    and scale bytes it returns, as numpy uint8."""
    torch = ctx.torch
    rows = x3.shape[0] * x3.shape[1]
    sizes = (rows * x3.shape[2] // 2, (rows + 15) // 16 * 16 * x3.shape[2] // 16)
    held = [torch.full((n,), poison, dtype=torch.uint8, device=ctx.device) for n in sizes]
    torch.cuda.synchronize()
    del held
    q, s, _ = mod.NVFP4KVQuantizeUtil.quantize(x3, gs)
    torch.cuda.synchronize()
    return _np_u8(q.reshape(rows, -1)), _np_u8(s.reshape(rows, -1))


def _nvfp4_quantize_sm90_run(ctx, x):
    torch = ctx.torch
    _check_x(x)
    if x.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError("fp4_quantize takes BF16/FP16 input, got %s" % x.dtype)
    mod = _kvfp4(ctx)
    try:
        from .flashinfer_fns import flashinfer_module
    except ImportError:
        from flashinfer_fns import flashinfer_module
    fp4 = flashinfer_module(ctx, "flashinfer.quantization.fp4_quantization")
    sys.modules["flashinfer"].fp4_quantize = fp4.fp4_quantize  # SGLang's `from flashinfer import fp4_quantize`
    rows = x.shape[0]
    # the tensor decode scale g = amax / (6 * 448), FP32 (SGLang's KV scales are decode scales; its
    # SM90 branch passes 1 / g, the encode scale, as fp4_quantize's global_scale)
    amax = x.float().abs().amax()
    gs = (amax / 2688.0).reshape(1).to(torch.float32)
    g = np.float32(gs.item())
    if not (g > 0):
        gs, g = torch.ones(1, dtype=torch.float32, device=ctx.device), np.float32(1.0)
    x3 = x.contiguous().view(rows, 1, 512)
    codes_a, scales_a = _fp4_outputs_after_poison(ctx, mod, x3, gs, 0xA5)
    codes_b, scales_b = _fp4_outputs_after_poison(ctx, mod, x3, gs, 0x5A)
    return dict(
        recipe="nvfp4-vllm", label="sm90-fp4_quantize", x=x, codes=codes_a, block_scales=scales_a,
        global_scale=g, global_scale_role="input", global_scale_convention="decode", nibble_order="low_first",
        block=16,
        exact_checks=[
            ("codes the same whatever the allocator held before the call (the kernel writes them)", codes_a, codes_b),
            ("scales the same whatever the allocator held before the call", scales_a, scales_b),
        ],
        raw={"codes_after_0xA5": codes_a, "codes_after_0x5A": codes_b, "scales_after_0xA5": scales_a,
             "scales_after_0x5A": scales_b})


def _nvfp4_pool_store_run(ctx, x):
    """store_nvfp4_kv_cache (Triton) scattering K/V codes and linear scales into SGLang's NVFP4 pool:
    the codes come from kvq's reference port (SGLang's SM90 quantize writes nothing, its SM100 one
    cannot run here), so the verdict is on the store's placement of every byte."""
    torch = ctx.torch
    _check_x(x)
    mod = _load(ctx, F_NVFP4_STORE)
    rows, heads, dim = x.shape[0], 4, 128
    k = x.view(rows, heads, dim)
    v = x.flip(1).contiguous().view(rows, heads, dim)
    kc, ks, kg = _nvfp4_codes(torch, k.reshape(rows, heads * dim))
    vc, vs, vg = _nvfp4_codes(torch, v.reshape(rows, heads * dim))
    slots = rows * 3 // 2
    gen = torch.Generator().manual_seed(2026)
    loc = torch.randperm(slots, generator=gen)[:rows].to(torch.int64)
    dev = ctx.device
    pool = {name: torch.full((slots, heads, width), 0xA5, dtype=torch.uint8, device=dev)
            for name, width in (("k_buffer", dim // 2), ("v_buffer", dim // 2), ("k_scale_buffer", dim // 16),
                                ("v_scale_buffer", dim // 16))}
    src = lambda a, width: torch.from_numpy(np.ascontiguousarray(a)).to(dev).view(rows, heads, width)
    mod.store_nvfp4_kv_cache(src(kc, dim // 2), src(vc, dim // 2), src(ks, dim // 16), src(vs, dim // 16), loc.to(dev),
                             pool["k_buffer"], pool["v_buffer"], pool["k_scale_buffer"], pool["v_scale_buffer"],
                             None, None, page_size=16)
    torch.cuda.synchronize()
    # kvq's store model takes g > 0: an all-zero tensor's g (0) is given as 1, which no byte depends on
    # (every block max is 0: scale 0, codes 0 under either)
    kg, vg = (g if g > 0 else np.float32(1.0) for g in (kg, vg))
    return dict(label="pool-store(codes-from-kvq-port)", exact_checks=[], raw={}, paged_recipe="nvfp4",
                paged=dict(key=k, value=v, slot_mapping=loc, k_scale=kg, v_scale=vg, poison=0xA5,
                           pool={name: _np_u8(t) for name, t in pool.items()}))


def _nvfp4_dequant_run(ctx, x):
    torch = ctx.torch
    _check_x(x)
    mod = _kvfp4(ctx)
    packed, scales, g = _nvfp4_codes(torch, x)
    rows = x.shape[0]
    q = torch.from_numpy(packed).to(ctx.device).view(rows, 1, 256)
    # 2-D scales [B, M*N/16]: the layout the SM90 branch broadcasts per block (module docstring)
    s = torch.from_numpy(scales).to(ctx.device).view(rows, 32).view(torch.float8_e4m3fn)
    s3 = s.view(rows, 1, 32)  # the pool's layout [T, H, D/16]: correct on SM90 only for one token
    gs = torch.tensor([float(g)], dtype=torch.float32, device=ctx.device)
    out = []
    for dt in (torch.bfloat16, torch.float16):
        y = mod.NVFP4KVQuantizeUtil.dequantize(q, s, gs, dtype=dt)
        if y.dtype != dt or tuple(y.shape) != (rows, 1, 512):
            raise TypeError("unexpected dequantize output %s %s" % (y.dtype, tuple(y.shape)))
        y1 = mod.NVFP4KVQuantizeUtil.dequantize(q[:1], s3[:1], gs, dtype=dt)
        out.append(dict(
            recipe="nvfp4", label="sm90-torch-dequant-%s(codes-from-kvq-port)" % str(dt).split(".")[-1],
            x=x, codes=packed, block_scales=scales, global_scale=g, global_scale_role="input",
            global_scale_convention="decode", dequantized=y.reshape(rows, 512), nibble_order="low_first", block=16,
            exact_checks=[("token 0 with the pool's 3-D scales [1, 1, 32] == token 0 with 2-D scales [rows, 32]",
                           _np_u8(y[:1]), _np_u8(y1))],
            raw={"dequantized": y}))
    return out


def _nvfp4_workspace_run(ctx, x):
    torch = ctx.torch
    _check_x(x)
    _kvfp4(ctx)
    meth = _load(ctx, F_METHOD)
    packed, scales, g = _nvfp4_codes(torch, x)
    rows = x.shape[0]
    m = meth.NVFP4KVCacheMethod(num_layers=1, device=ctx.device, page_size=16, native_scale_layout=False)
    m.k_scales_gpu.fill_(float(g))
    m.v_scales_gpu.fill_(float(g))
    q = torch.from_numpy(packed).to(ctx.device).view(rows, 1, 256)
    # The same bytes as get_raw_kv_buffer's [T, H, D/16] E4M3 view, passed 2-D [T, H*D/16]: the 3-D view
    # makes the SM90 dequantize broadcast [T, T, ...] and fail for T > 1 (module docstring).
    s = torch.from_numpy(scales).to(ctx.device).view(rows, 32).view(torch.float8_e4m3fn)
    k8, v8 = m.dequantize_prev_kv(q, s, q, s, 0)
    if k8.dtype != torch.float8_e4m3fn:
        raise TypeError("workspace dtype %s" % k8.dtype)
    actual = _np_u8(k8.reshape(rows, 512))
    # expectations from the input (via kvq's port codes): v * sf exact, * g
    v = _E2M1[_unpack_e2m1(packed)].astype(np.float64)
    sf = np.repeat(np.array([kvq_dump._e4m3_value(int(c)) for c in range(256)], dtype=np.float64)[scales], 16, axis=1)
    single = _e4m3_bytes_from_f64(v * sf * np.float64(g), saturate=True)  # kvq requantize_e4m3, factor = g
    p32 = (v * sf).astype(np.float32) * np.float32(g)                       # SGLang: FP32 (v*sf)*g
    double = _e4m3_bytes_from_f64(_bf16_rne(p32).astype(np.float64), saturate=False)  # -> BF16 -> torch E4M3 cast
    return dict(
        recipe="nvfp4", label="fp8-workspace(codes-from-kvq-port)",
        x=x, codes=packed, block_scales=scales, global_scale=g, global_scale_role="input",
        global_scale_convention="decode", nibble_order="low_first", block=16,
        exact_checks=[
            ("workspace == e4m3 satfinite of the exact e2m1*sf*g, rounded once (kvq requantize_e4m3, factor g)",
             single, actual),
            ("workspace == torch e4m3 cast (non-saturating) of BF16(FP32((e2m1*sf)*g)) (double rounding)",
             double, actual),
            ("V workspace == K workspace (same inputs)", actual, _np_u8(v8.reshape(rows, 512))),
        ],
        raw={"workspace_k": k8, "workspace_v": v8},
        # the whole call as kvq's workspace kind: SGLang's [T, 1, 256] codes and [T, 32] scales are the
        # two halves of one vLLM NVFP4 page side (block_size T, one head, head_dim 512), K and V alike
        workspace=dict(kv_cache=_workspace_page(packed, scales), block_tables=np.zeros((1, 1), dtype=np.int32),
                       cu_seq_lens=np.array([0, rows], dtype=np.int32), k_scale=g, v_scale=g,
                       k_workspace=_np_u8(k8.reshape(rows, 1, 512)), v_workspace=_np_u8(v8.reshape(rows, 1, 512))))


def _workspace_page(packed, scales):
    """One vLLM NVFP4 page of block_size rows, one head: each side [rows x 256 data | rows x 32 scales]."""
    side = np.concatenate([np.ascontiguousarray(packed).reshape(-1), np.ascontiguousarray(scales).reshape(-1)])
    rows = packed.shape[0]
    return np.stack([side, side]).reshape(1, 2, rows, 1, 288)


# --- MLA 656 / 576 ---------------------------------------------------------------------------

def _mla_special(torch, x):
    """Row 0: tile 0 all zero, tile 1 all -0, tile 2 a single 450 (rest 0), tile 3 a single -2^-5."""
    y = x.clone()
    y[0, 0:128] = 0.0
    y[0, 128:256] = -0.0
    y[0, 256:384] = 0.0
    y[0, 256] = 450.0
    y[0, 384:512] = 0.0
    y[0, 384] = -(2.0 ** -5)
    return y


def _mla_inputs(torch, x):
    if x.dtype != torch.bfloat16:
        raise TypeError("the MLA writers take BF16 only (they assert it), got %s" % x.dtype)
    rope = x[:, :MLA_ROPE].contiguous()  # the RoPE part: taken from the input itself
    return x.contiguous(), rope


def _split_656(torch, rec):
    u8 = rec.contiguous().view(torch.uint8).reshape(-1, MLA_RECORD)
    nope = u8[:, :MLA_NOPE].contiguous()
    scales = u8[:, MLA_NOPE:MLA_NOPE + 16].contiguous().view(torch.float32)  # little-endian FP32
    rope = u8[:, MLA_NOPE + 16:].contiguous()
    return u8, nope, scales, rope


def _mla_quantize(ctx, xin):
    torch = ctx.torch
    qmod = _load(ctx, F_MLA_Q)
    nope, rope = _mla_inputs(torch, xin)
    rows = nope.shape[0]
    cache = torch.cat([nope, rope], dim=-1).view(rows, 1, 1, MLA_NOPE + MLA_ROPE)
    rec = qmod.quantize_k_cache(cache)
    if rec.dtype != torch.float8_e4m3fn or rec.shape[-1] != MLA_RECORD:
        raise TypeError("unexpected 656 record %s %s" % (rec.dtype, tuple(rec.shape)))
    nope_part, rope_part = qmod.quantize_k_cache_separate(nope, rope)
    return rec.reshape(rows, MLA_RECORD), nope_part.reshape(rows, -1), rope_part.reshape(rows, -1), nope, rope


def _mla_quantize_run(ctx, x):
    torch = ctx.torch
    _check_x(x)
    out = []
    for label, xin in (("random", x), ("special-tiles", _mla_special(torch, x))):
        rec, nope_part, rope_part, nope, rope = _mla_quantize(ctx, xin)
        rows = rec.shape[0]
        u8, codes, scales, rope_bytes = _split_656(torch, rec)
        amax = nope.float().abs().reshape(rows, 4, MLA_TILE).amax(dim=-1).cpu().numpy().astype(np.float32)
        ieee = (amax / np.float32(448.0)).astype(np.float32)
        tiles = [dict(recipe="fp8-e4m3-tensor-rcp-triton", label="%s-tile(%d,%d)-as-tensor" % (label, r, t),
                      x=nope[r:r + 1, t * MLA_TILE:(t + 1) * MLA_TILE], codes=codes[r:r + 1, t * MLA_TILE:(t + 1) * MLA_TILE],
                      global_scale=scales[r, t:t + 1].clone(), global_scale_role="output",
                      global_scale_convention="decode")
                 for r in range(2) for t in range(4)]
        out.append(dict(
            recipe=None, note=NOTE_FP32_TILE, label=label + "-nope", x=nope, codes=codes, block_scales=scales,
            nibble_order="low_first", block=MLA_TILE,
            exact_checks=[
                ("656 rope bytes [528:656] == the BF16 input bits", _np_u8(rope).reshape(rows, -1), _np_u8(rope_bytes)),
                ("656 tile scales == IEEE FP32 amax/448 (input tile max)", ieee.view(np.uint8).reshape(rows, -1),
                 _np_u8(scales).reshape(rows, -1)),
                ("quantize_k_cache_separate nope part == quantize_k_cache bytes [0:528]",
                 _np_u8(u8[:, :528]), _np_u8(nope_part)),
                ("quantize_k_cache_separate rope part == quantize_k_cache bytes [528:656]",
                 _np_u8(u8[:, 528:]), _np_u8(rope_part)),
            ],
            raw={"record_656": u8, "nope_part_separate": nope_part, "rope_part_separate": rope_part},
            # the records as an MLA cache (one block, token i at slot i), under the layout's own tile rule
            mla=dict(k=torch.cat([nope, rope], dim=-1).contiguous(), k_cache=rec, layout="fp8_nope_with_block_scale_bf16_rope",
                     block_size=rows)))
        out.extend(tiles)
    return out


def _mla_dequant_run(ctx, x):
    torch = ctx.torch
    _check_x(x)
    dmod = _load(ctx, F_MLA_DQ)
    out = []
    for label, xin in (("random", x), ("special-tiles", _mla_special(torch, x))):
        rec, _, _, nope, rope = _mla_quantize(ctx, xin)
        rows = rec.shape[0]
        u8, codes, scales, _ = _split_656(torch, rec)
        y = dmod.dequantize_k_cache(rec.view(rows, 1, 1, MLA_RECORD)).reshape(rows, MLA_NOPE + MLA_ROPE)
        table = torch.arange(rows, dtype=torch.int32, device=rec.device)
        yp = dmod.dequantize_k_cache_paged_dsa(rec.view(rows, 1, MLA_RECORD), table.flip(0)).reshape(rows, -1)
        # FP32 code * tile scale, rounded once to BF16 (from the record, the function's input)
        cv = np.array([kvq_dump._e4m3_value(c & 0x7F) * (-1 if c & 0x80 else 1) if (c & 0x7F) != 0x7F else np.nan
                       for c in range(256)], dtype=np.float32)
        prod = (cv[_np_u8(codes)] * np.repeat(scales.cpu().numpy(), MLA_TILE, axis=1)).astype(np.float32)
        expect = _bf16_rne(np.nan_to_num(prod, nan=0.0)).view(np.uint32) >> 16
        finite = np.isfinite(prod)
        got = _np_u8(y[:, :MLA_NOPE]).view(np.uint16)
        out.append(dict(
            recipe=None, note=NOTE_FP32_TILE, label=label + "-dequantize", x=nope, codes=codes, block_scales=scales,
            dequantized=y[:, :MLA_NOPE], nibble_order="low_first", block=MLA_TILE,
            exact_checks=[
                ("dequantized rope == BF16 input bits", _np_u8(rope).reshape(rows, -1), _np_u8(y[:, MLA_NOPE:])),
                ("dequantized nope == bf16(FP32 code*scale) where finite (from the 656 record)",
                 np.where(finite, expect, 0).astype(np.uint16).view(np.uint8),
                 np.where(finite, got, 0).astype(np.uint16).view(np.uint8)),
                ("dequantize_k_cache_paged_dsa (rows gathered in reverse) == dequantize_k_cache reversed",
                 _np_u8(y.flip(0)), _np_u8(yp)),
            ],
            raw={"record_656": u8, "dequantized": y, "dequantized_paged": yp},
            # whole calls: every record read back (dequantize_k_cache), and gathered by the table
            mla_dequant=dict(k_cache=rec, output=y, layout="fp8_nope_with_block_scale_bf16_rope", block_size=rows),
            mla_dequant_paged=dict(k_cache=rec, output=yp, indices=table.flip(0),
                                   layout="fp8_nope_with_block_scale_bf16_rope", block_size=rows)))
    return out


def _mla_requant_run(ctx, x):
    torch = ctx.torch
    _check_x(x)
    dmod = _load(ctx, F_MLA_DQ)
    out = []
    for label, xin in (("random", x), ("special-tiles", _mla_special(torch, x))):
        rec, _, _, nope, rope = _mla_quantize(ctx, xin)
        rows = rec.shape[0]
        u8, codes, scales, _ = _split_656(torch, rec)
        table = torch.arange(rows, dtype=torch.int32, device=rec.device)
        r576 = dmod.gather_dequant_requant_fp8_paged_dsa(rec.view(rows, 1, MLA_RECORD), table, extra_rows=1)
        if r576.dtype != torch.float8_e4m3fn:
            raise TypeError("576 output dtype %s" % r576.dtype)
        r576 = r576.reshape(rows + 1, MLA_NOPE + MLA_ROPE)
        got = _np_u8(r576[:rows])
        cv = np.array([kvq_dump._e4m3_value(c & 0x7F) * (-1 if c & 0x80 else 1) if (c & 0x7F) != 0x7F else np.nan
                       for c in range(256)], dtype=np.float64)
        sc = np.repeat(scales.cpu().numpy().astype(np.float64), MLA_TILE, axis=1)
        exact = cv[_np_u8(codes)] * sc                                     # exact in FP64
        via32 = exact.astype(np.float32).astype(np.float64)               # the kernel's FP32 product
        rope_f = rope.float().cpu().numpy().astype(np.float64)
        xhat = torch.from_numpy(via32.astype(np.float32)).to(rec.device)  # what the requant quantizes
        out.append(dict(
            recipe="fp8-e4m3-tensor", label=label + "-656to576-nope(scale1)", x=xhat, codes=r576[:rows, :MLA_NOPE],
            global_scale=np.float32(1.0), global_scale_role="input", global_scale_convention="decode",
            exact_checks=[
                ("576 nope == e4m3 satfinite(FP32(code*tile scale)) (656 record is the input)",
                 _e4m3_bytes_from_f64(via32, True), got[:, :MLA_NOPE]),
                ("576 nope == e4m3 satfinite(exact code*tile scale), rounded once",
                 _e4m3_bytes_from_f64(exact, True), got[:, :MLA_NOPE]),
                ("576 rope == e4m3 satfinite(BF16 rope input)", _e4m3_bytes_from_f64(rope_f, True), got[:, MLA_NOPE:]),
                ("576 pad row (extra_rows=1) == 0x00", np.zeros((1, MLA_NOPE + MLA_ROPE), np.uint8), _np_u8(r576[rows:])),
            ],
            raw={"record_656": u8, "record_576": r576}))
        out.append(dict(
            recipe="fp8-e4m3-tensor", label=label + "-656to576-rope(scale1)", x=rope, codes=r576[:rows, MLA_NOPE:],
            global_scale=np.float32(1.0), global_scale_role="input", global_scale_convention="decode"))
    return out


def _mla_576_cast_run(ctx, x):
    """memory_pool.py:5016 (MLATokenToKVPool._write_mla_kv_buffer) and :4971 store an FP8 MLA cache as
    cache_k.to(float8_e4m3fn): no k_scale. The file imports the whole engine, so the one op is run here."""
    torch = ctx.torch
    _check_x(x)
    nope, rope = _mla_inputs(torch, x)
    out = []
    for label, xin in (("random", nope), ("x64", nope * 64)):
        c = xin.to(torch.float8_e4m3fn)
        rows = xin.shape[0]
        nonsat = _e4m3_bytes_from_f64(xin.float().cpu().numpy().astype(np.float64), saturate=False)
        out.append(dict(recipe="fp8-e4m3-tensor-torch", label="576-store-cast-" + label, x=xin, codes=c,
                        global_scale=np.float32(1.0), global_scale_role="input", global_scale_convention="decode",
                        exact_checks=[("cast == RNE, magnitudes rounding above 448 -> 0x7F (non-saturating)",
                                       nonsat, _np_u8(c).reshape(rows, -1))],
                        raw={"codes_576_nope": c}))
    return out


# --- the list --------------------------------------------------------------------------------

def producers(ctx):
    q = "sglang/srt/layers/quantization/kvfp4_tensor.py"
    return [
        Producer("sglang-blockfp4-quantize-compiled", "sglang",
                 q + ":58 FP4MXBlock16KVQuantizeUtil.batched_quantize (+ :101 batched_dequantize), torch.compile as shipped",
                 lambda c, x: _blockfp4_run(c, x, True), files=[F_KVFP4], stubs=[STUB_PLATFORM]),
        Producer("sglang-blockfp4-quantize-eager", "sglang",
                 q + ":58 FP4MXBlock16KVQuantizeUtil.batched_quantize (+ :101), eager body (_torchdynamo_orig_callable)",
                 lambda c, x: _blockfp4_run(c, x, False), files=[F_KVFP4], stubs=[STUB_PLATFORM]),
        Producer("sglang-nvfp4-quantize-sm90", "sglang",
                 q + ":153 NVFP4KVQuantizeUtil.quantize, SM90 branch :199-210 (flashinfer fp4_quantize, JIT fp4_quantization_90)",
                 _nvfp4_quantize_sm90_run, files=[F_KVFP4], dtypes=("bfloat16", "float16"),
                 stubs=[STUB_PLATFORM, "flashinfer: package __init__ not run; fp4_quantize set on the namespace "
                                      "from flashinfer.quantization.fp4_quantization (what SGLang imports)"]),
        Producer("sglang-nvfp4-pool-store", "sglang",
                 F_NVFP4_STORE + ":131 store_nvfp4_kv_cache (Triton _store_nvfp4_kv_kernel :57), linear scales",
                 _nvfp4_pool_store_run, files=[F_NVFP4_STORE], dtypes=("bfloat16", "float16")),
        Producer("sglang-nvfp4-dequantize-sm90", "sglang",
                 q + ":220 NVFP4KVQuantizeUtil.dequantize (pure-PyTorch branch :266-282)",
                 _nvfp4_dequant_run, files=[F_KVFP4], stubs=[STUB_PLATFORM]),
        Producer("sglang-nvfp4-fp8-workspace", "sglang",
                 F_METHOD + ":723 NVFP4KVCacheMethod.dequantize_prev_kv (-> kvfp4_tensor.py:220)",
                 _nvfp4_workspace_run, files=[F_KVFP4, F_METHOD], stubs=[STUB_PLATFORM]),
        Producer("sglang-mla-656-quantize", "sglang",
                 F_MLA_Q + ":6 quantize_k_cache, :10 quantize_k_cache_separate (kernel :237)",
                 _mla_quantize_run, files=[F_MLA_Q], dtypes=("bfloat16",)),
        Producer("sglang-mla-656-dequantize", "sglang",
                 F_MLA_DQ + ":20 dequantize_k_cache (kernel :96), :144 dequantize_k_cache_paged_dsa",
                 _mla_dequant_run, files=[F_MLA_Q, F_MLA_DQ], dtypes=("bfloat16",)),
        Producer("sglang-mla-656-to-576-requantize", "sglang",
                 F_MLA_DQ + ":265 gather_dequant_requant_fp8_paged_dsa (kernel :366)",
                 _mla_requant_run, files=[F_MLA_Q, F_MLA_DQ], dtypes=("bfloat16",)),
        Producer("sglang-mla-576-store-cast", "sglang",
                 "sglang/srt/mem_cache/memory_pool.py:5016 MLATokenToKVPool._write_mla_kv_buffer (cache_k_nope.to(fp8)); "
                 "replicated op, file not loadable",
                 _mla_576_cast_run, files=[], dtypes=("bfloat16",)),
    ]
