#!/usr/bin/env python3
"""Dump a port's tensors in the layout `kvq verify` and `kvq identify` read (docs/ports.md).

numpy only. PyTorch tensors and JAX arrays are accepted without importing either library: any
object with .detach()/.cpu() (torch) or __array__ (jax, numpy) is converted; 16-bit floats are
written as their bit patterns (uint16) with the manifest naming the dtype, 8- and 4-bit codes as
uint8.

    from kvq_dump import dump
    dump("run/in", "run/out", recipe="nvfp4", x=x, codes=packed, block_scales=sf,
         global_scale=gs, global_scale_role="input")

`python3 kvq_dump.py --demo DIR [--ties-up]` writes a worked example: a small NVFP4 "port"
written in numpy float32 arithmetic, its input and outputs (docs/ports.md walks through it);
`--paged-demo DIR [--stray]` a numpy FP8 paged store, `--rope-demo DIR [--gptj]` a numpy
rope_quantize_fp8, `--mla-demo DIR [--fp32-tile-scales]` a numpy 656-byte MLA writer,
`--requant-demo DIR [--drop-k-scale]` a numpy 576 -> 656 conversion, `--workspace-demo DIR
[--sglang-rounding]` a numpy NVFP4 page -> E4M3 prefill workspace.
"""
import argparse
import json
import os

import numpy as np

ROLES = ("x", "codes", "block_scales", "global_scale", "dequantized")


def to_numpy(t):
    """A torch tensor, JAX array or numpy array as (numpy array, manifest dtype or None)."""
    dtype_name = str(getattr(t, "dtype", ""))
    if hasattr(t, "detach"):  # torch: bfloat16 / float8 have no numpy dtype, view their bits
        t = t.detach().cpu().contiguous()
        if dtype_name == "torch.bfloat16":
            return _torch_view(t, "int16").view(np.uint16), "bfloat16"
        if dtype_name.startswith("torch.float8") or dtype_name.startswith("torch.float4"):
            return _torch_view(t, "uint8"), None
        return t.numpy(), None
    a = np.asarray(t)
    if a.dtype.name == "bfloat16":  # jax / ml_dtypes
        return a.view(np.uint16), "bfloat16"
    if a.dtype.name.startswith("float8") or a.dtype.name.startswith("float4") or a.dtype.name == "float8_e8m0fnu":
        return a.view(np.uint8), None
    return a, None


def _torch_view(t, dtype):
    import torch  # only reached with a torch tensor in hand

    return t.view(getattr(torch, dtype)).numpy()


def _save(directory, name, array):
    os.makedirs(directory, exist_ok=True)
    np.save(os.path.join(directory, name), np.ascontiguousarray(array))
    return name


def dump(inputs_dir, outputs_dir, x, codes, recipe=None, block_scales=None, global_scale=None,
         global_scale_convention="decode", global_scale_role="input", dequantized=None,
         nibble_order="low_first", block=None):
    """Writes x (inputs_dir), the outputs and manifest.json (outputs_dir); returns the manifest."""
    if global_scale_convention not in ("decode", "encode", "amax"):
        raise ValueError("global_scale_convention is 'decode', 'encode' or 'amax'")
    if global_scale_role not in ("input", "output"):
        raise ValueError("global_scale_role is 'input' or 'output'")
    if nibble_order not in ("low_first", "high_first"):
        raise ValueError("nibble_order is 'low_first' or 'high_first'")
    tensors = {}
    xa, xdtype = to_numpy(x)
    if xa.dtype not in (np.float32, np.float16, np.uint16):
        raise ValueError("x must be float32, float16 or bfloat16, got %s" % xa.dtype)
    tensors["x"] = {"file": _save(inputs_dir, "x.npy", xa)}
    if xdtype:
        tensors["x"]["dtype"] = xdtype
    ca, _ = to_numpy(codes)
    tensors["codes"] = {"file": _save(outputs_dir, "codes.npy", ca.view(np.uint8) if ca.itemsize == 1 else ca.astype(np.uint8))}
    if block_scales is not None:
        sa, _ = to_numpy(block_scales)
        sa = sa if sa.dtype == np.float32 else sa.view(np.uint8)
        tensors["block_scales"] = {"file": _save(outputs_dir, "block_scales.npy", sa)}
    if global_scale is not None:
        ga, _ = to_numpy(global_scale)
        ga = np.asarray(ga, dtype=np.float32).reshape(1)
        where = inputs_dir if global_scale_role == "input" else outputs_dir
        tensors["global_scale"] = {"file": _save(where, "global_scale.npy", ga),
                                   "convention": global_scale_convention, "role": global_scale_role}
    if dequantized is not None:
        da, ddtype = to_numpy(dequantized)
        tensors["dequantized"] = {"file": _save(outputs_dir, "dequantized.npy", da)}
        if ddtype:
            tensors["dequantized"]["dtype"] = ddtype
    manifest = {"kvq_port_manifest": 1, "tensors": tensors, "layout": {"nibble_order": nibble_order}}
    if recipe:
        manifest["recipe"] = recipe
    if block:
        manifest["layout"]["block"] = int(block)
    os.makedirs(outputs_dir, exist_ok=True)
    with open(os.path.join(outputs_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def dump_paged_store(inputs_dir, outputs_dir, key, value, slot_mapping, k_scale=None, v_scale=None, key_cache=None,
                     value_cache=None, kv_cache=None, poison=None, recipe=None, kv_layout="NHD", scale_swizzle=None,
                     k_scale_cache=None, v_scale_cache=None, pool=None):
    """A paged store's call (docs/ports.md "Paged stores"), vLLM's argument names: key, value
    [tokens, heads, head_dim], slot_mapping (int32/int64), the FP8 caches key_cache/value_cache or
    an NVFP4 kv_cache as written, the decode scales k_scale/v_scale (one, or one a head) or, for
    vLLM's per-token-head store, the scale caches k_scale_cache/v_scale_cache (float32 [num_blocks,
    block_size, heads]) as written, and the byte the caches held before the call (poison; None: the
    bytes outside the slots go unchecked); pool: instead of the caches, SGLang's NVFP4 pool buffers
    {"k_buffer": [slots, heads, D/2], "k_scale_buffer": [slots, heads, D/16], "v_buffer", "v_scale_buffer"}
    (uint8 or FP8). Inputs go to inputs_dir, the caches and manifest.json to outputs_dir; returns the
    manifest."""
    token_head = k_scale_cache is not None or v_scale_cache is not None
    if token_head == (k_scale is not None or v_scale is not None) or (token_head and (k_scale_cache is None or v_scale_cache is None)):
        raise ValueError("give k_scale and v_scale, or (per-token-head) k_scale_cache and v_scale_cache")
    if kv_layout not in ("NHD", "HND"):
        raise ValueError("kv_layout is 'NHD' or 'HND'")
    if (kv_cache is None) == (key_cache is None or value_cache is None) and pool is None:
        raise ValueError("give key_cache and value_cache (FP8), kv_cache (NVFP4), or pool (SGLang's NVFP4 buffers)")
    tensors = {}
    for role, t in (("key", key), ("value", value)):
        a, dt = to_numpy(t)
        tensors[role] = {"file": _save(inputs_dir, role + ".npy", a)}
        if dt:
            tensors[role]["dtype"] = dt
    sa, _ = to_numpy(slot_mapping)
    if sa.dtype not in (np.int32, np.int64):
        raise ValueError("slot_mapping must be int32 or int64, got %s" % sa.dtype)
    tensors["slot_mapping"] = {"file": _save(inputs_dir, "slot_mapping.npy", sa)}
    for role, t in () if token_head else (("k_scale", k_scale), ("v_scale", v_scale)):
        a, _ = to_numpy(t)
        tensors[role] = {"file": _save(inputs_dir, role + ".npy", np.asarray(a, dtype=np.float32).reshape(-1))}
    caches = (("kv_cache", kv_cache),) if kv_cache is not None else (("key_cache", key_cache), ("value_cache", value_cache))
    if pool is not None:
        caches = tuple((role, pool[role]) for role in ("k_buffer", "k_scale_buffer", "v_buffer", "v_scale_buffer"))
    if token_head:
        caches = caches + (("k_scale_cache", k_scale_cache), ("v_scale_cache", v_scale_cache))
    for role, t in caches:
        a, _ = to_numpy(t)
        if role.endswith("scale_cache") and a.dtype != np.float32:  # their bytes: [..., heads, 4]
            a = np.ascontiguousarray(a).view(np.float32).reshape(a.shape[:-1])
        tensors[role] = {"file": _save(outputs_dir, role + ".npy", a if role.endswith("scale_cache") else a.view(np.uint8))}
        if poison is not None:
            tensors[role]["poison"] = "0x%02X" % int(poison)
    manifest = {"kvq_port_manifest": 1, "kind": "paged-store", "tensors": tensors, "layout": {"kv_layout": kv_layout}}
    if scale_swizzle:
        manifest["layout"]["scale_swizzle"] = scale_swizzle
    if recipe:
        manifest["recipe"] = recipe
    os.makedirs(outputs_dir, exist_ok=True)
    with open(os.path.join(outputs_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def dump_mla_cache(inputs_dir, outputs_dir, k, k_cache, layout, block_size, slot_mapping=None, poison=None,
                   tile_recipe=None):
    """An MLA cache writer's call (docs/ports.md "MLA caches"): k (BF16 [tokens, dims of the layout]),
    slot_mapping (int32/int64; None: token i at slot i), the cache as written (uint8 bytes), the
    layout's name (`kvq layouts`: fp8_nope_with_block_scale_bf16_rope, model1_fp8_sparse) and
    block_size (tokens a block); poison: the byte the cache held before the call; tile_recipe: the
    recipe the writer applies to each tile (None: the layout's own). Returns the manifest."""
    ka, kdt = to_numpy(k)
    tensors = {"k": {"file": _save(inputs_dir, "k.npy", ka)}}
    if kdt or ka.dtype == np.uint16:  # BF16 tensors, or their bits (the writers take BF16)
        tensors["k"]["dtype"] = kdt or "bfloat16"
    if slot_mapping is not None:
        sa, _ = to_numpy(slot_mapping)
        tensors["slot_mapping"] = {"file": _save(inputs_dir, "slot_mapping.npy", sa)}
    ca, _ = to_numpy(k_cache)
    tensors["k_cache"] = {"file": _save(outputs_dir, "k_cache.npy", ca.view(np.uint8))}
    if poison is not None:
        tensors["k_cache"]["poison"] = "0x%02X" % int(poison)
    manifest = {"kvq_port_manifest": 1, "kind": "mla-cache", "tensors": tensors,
                "parameters": {"layout": layout, "block_size": int(block_size)}}
    if tile_recipe is not None:
        manifest["parameters"]["tile_recipe"] = tile_recipe
    os.makedirs(outputs_dir, exist_ok=True)
    with open(os.path.join(outputs_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def dump_mla_requant(inputs_dir, outputs_dir, src_cache, dst_cache, k_scale, block_size, k_scale_use=None,
                     poison=None):
    """A 576 -> 656 MLA cache conversion (docs/ports.md "MLA requantize"): the source cache (uint8,
    whole blocks of 576-byte records), the converted cache as written (656-byte records), the
    source's decode scale k_scale, block_size (tokens a block); k_scale_use "fold-k-scale" or
    "drop-k-scale" (None: kvq's fold); poison: the byte dst_cache held before the call."""
    sa, _ = to_numpy(src_cache)
    da, _ = to_numpy(dst_cache)
    tensors = {"src_cache": {"file": _save(inputs_dir, "src_cache.npy", sa.view(np.uint8))},
               "dst_cache": {"file": _save(outputs_dir, "dst_cache.npy", da.view(np.uint8))},
               "k_scale": {"bits": "0x%08x" % int(np.float32(k_scale).view(np.uint32))}}
    if poison is not None:
        tensors["dst_cache"]["poison"] = "0x%02X" % int(poison)
    parameters = {"from": "fp8_nope_fp8_rope", "to": "fp8_nope_with_block_scale_bf16_rope", "block_size": int(block_size)}
    if k_scale_use is not None:
        parameters["k_scale_use"] = k_scale_use
    return _write_manifest(outputs_dir, {"kvq_port_manifest": 1, "kind": "mla-requant", "tensors": tensors,
                                         "parameters": parameters})


def dump_mla_dequant(inputs_dir, outputs_dir, k_cache, output, layout, block_size, indices=None, k_scale=None):
    """An MLA cache read back as values (docs/ports.md "MLA dequantize"): the cache (uint8, whole
    blocks of the layout's records), output (BF16/FP16/FP32 [rows, dims of the layout]) as the port
    wrote it, the layout's name and block_size; indices (int32/int64): the slot each output row reads
    (None: every slot in order); k_scale: the codes' decode scale where the layout has no tile scales."""
    ca, _ = to_numpy(k_cache)
    oa, odt = to_numpy(output)
    tensors = {"k_cache": {"file": _save(inputs_dir, "k_cache.npy", ca.view(np.uint8))},
               "output": {"file": _save(outputs_dir, "output.npy", oa)}}
    if odt:
        tensors["output"]["dtype"] = odt
    if indices is not None:
        ia, _ = to_numpy(indices)
        tensors["indices"] = {"file": _save(inputs_dir, "indices.npy", ia)}
    if k_scale is not None:
        tensors["k_scale"] = {"bits": "0x%08x" % int(np.float32(k_scale).view(np.uint32))}
    return _write_manifest(outputs_dir, {"kvq_port_manifest": 1, "kind": "mla-dequant", "tensors": tensors,
                                         "parameters": {"layout": layout, "block_size": int(block_size)}})


def dump_workspace(inputs_dir, outputs_dir, kv_cache, block_tables, cu_seq_lens, k_scale, v_scale, k_workspace,
                   v_workspace, k_workspace_scale=None, v_workspace_scale=None, rounding=None, poison=None):
    """An NVFP4 paged cache -> E4M3 prefill workspace call (docs/ports.md "Workspaces"): kv_cache
    (the vLLM NVFP4 page, uint8 [num_blocks, 2, block_size, heads, head_dim/2 + head_dim/16]),
    block_tables [batch, max_blocks_per_seq] and cu_seq_lens [batch + 1] (int32/int64), the tensor
    decode scales k_scale, v_scale (g), the workspaces as written (uint8 [rows, heads, head_dim]),
    the workspace decode scales (None: 1, the factor is g), the rounding to check against (None:
    kvq's "once"); poison: the byte the workspaces held before the call."""
    tensors = {}
    for role, t, d in (("kv_cache", kv_cache, inputs_dir), ("block_tables", block_tables, inputs_dir),
                       ("cu_seq_lens", cu_seq_lens, inputs_dir), ("k_workspace", k_workspace, outputs_dir),
                       ("v_workspace", v_workspace, outputs_dir)):
        a, _ = to_numpy(t)
        if role in ("kv_cache", "k_workspace", "v_workspace"):
            a = a.view(np.uint8)
        tensors[role] = {"file": _save(d, role + ".npy", a)}
        if poison is not None and role.endswith("workspace"):
            tensors[role]["poison"] = "0x%02X" % int(poison)
    for role, v in (("k_scale", k_scale), ("v_scale", v_scale)):
        tensors[role] = {"bits": "0x%08x" % int(np.float32(v).view(np.uint32))}
    parameters = {}
    for name, v in (("k_workspace_scale", k_workspace_scale), ("v_workspace_scale", v_workspace_scale)):
        if v is not None:
            parameters[name] = "0x%08x" % int(np.float32(v).view(np.uint32))
    if rounding is not None:
        parameters["rounding"] = rounding
    return _write_manifest(outputs_dir, {"kvq_port_manifest": 1, "kind": "workspace", "tensors": tensors,
                                         "parameters": parameters})


def _write_manifest(outputs_dir, manifest):
    os.makedirs(outputs_dir, exist_ok=True)
    with open(os.path.join(outputs_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


ROPE_INPUTS = ("q_rope", "k_rope", "q_nope", "k_nope", "v", "cos_sin_cache", "pos_ids", "kv_indptr", "kv_indices",
               "batch_indices", "positions")
ROPE_OUTPUTS = ("q_rope_out", "q_nope_out", "k_rope_out", "k_nope_out", "k_cache", "v_cache", "ckv_cache", "kpe_cache")


def dump_rope(inputs_dir, outputs_dir, kind, tensors, is_neox, quant_scale_q, quant_scale_kv, page_size=None,
              kv_layout="NHD", poison=None, rope_theta=None, cos_sin=None):
    """A FlashInfer-style fused RoPE + FP8 call (docs/ports.md "RoPE"): kind "rope-quantize"
    (rope_quantize_fp8) or "rope-append" (rope_quantize_fp8_append_paged_kv_cache); tensors maps
    FlashInfer's argument names (q_rope, k_rope, q_nope, k_nope, v, cos_sin_cache, pos_ids, kv_indptr,
    kv_indices, batch_indices, positions) and outputs (q_rope_out, q_nope_out, k_rope_out, k_nope_out,
    k_cache, v_cache, ckv_cache, kpe_cache) to tensors; poison: the byte the outputs held before the
    call (None: unknown); rope_theta: the base of a port that computes cos/sin itself, and cos_sin the
    way kvq verify should model it ("computed-exact-angle", "computed-fp32-angle"; None: the cache if
    given). Returns the manifest."""
    if kind not in ("rope-quantize", "rope-append"):
        raise ValueError("kind is 'rope-quantize' or 'rope-append'")
    roles = {}
    for role, t in tensors.items():
        if t is None:
            continue
        if role not in ROPE_INPUTS + ROPE_OUTPUTS:
            raise ValueError("unknown role %r" % role)
        a, dt = to_numpy(t)
        if role in ROPE_OUTPUTS:
            roles[role] = {"file": _save(outputs_dir, role + ".npy", a.view(np.uint8))}
            if poison is not None:
                roles[role]["poison"] = "0x%02X" % int(poison)
        else:
            roles[role] = {"file": _save(inputs_dir, role + ".npy", a)}
            if dt:
                roles[role]["dtype"] = dt
    bits = lambda v: "0x%08x" % int(np.asarray(v, dtype=np.float32).reshape(1).view(np.uint32)[0])
    params = {"is_neox": bool(is_neox), "quant_scale_q": bits(quant_scale_q), "quant_scale_kv": bits(quant_scale_kv)}
    if kind == "rope-append":
        params["page_size"] = int(page_size)
        params["kv_layout"] = kv_layout
    if rope_theta is not None:
        params["rope_theta"] = float(rope_theta)
    if cos_sin is not None:
        params["cos_sin"] = cos_sin
    manifest = {"kvq_port_manifest": 1, "kind": kind, "tensors": roles, "parameters": params}
    os.makedirs(outputs_dir, exist_ok=True)
    with open(os.path.join(outputs_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


# --- the worked example: an NVFP4 port in numpy float32 arithmetic ---------------------------

E2M1_VALUES = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float32)


def _round_to_grid(m, mantissa_bits, min_exponent, max_value, ties_up):
    """|m| rounded to a float grid with that many mantissa bits (RNE, or ties away), saturated."""
    _, e = np.frexp(np.maximum(m, np.float32(2.0 ** min_exponent)))
    step = np.ldexp(np.float32(1), (e - 1 - mantissa_bits).astype(np.int32)).astype(np.float32)
    q = m / step  # exact: a power-of-two scaling
    q = np.floor(q + np.float32(0.5)) if ties_up else np.round(q)
    return np.minimum(q * step, np.float32(max_value)).astype(np.float32)


def nvfp4_numpy_port(x, ties_up=False):
    """x: float32 [rows, cols], cols % 16 == 0. Returns packed codes, E4M3 scale bytes, g."""
    x = np.asarray(x, dtype=np.float32)
    rows, cols = x.shape
    blocks = x.reshape(rows, cols // 16, 16)
    g = np.float32(np.max(np.abs(x)) / np.float32(448 * 6))
    bmax = np.max(np.abs(blocks), axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):  # an all-zero block stores scale 0 (kvq's block guard)
        s = np.where(bmax == 0, np.float32(0), (bmax / np.float32(6)) / g).astype(np.float32)
    sf = _round_to_grid(s, 3, -6, 448, ties_up=False)  # E4M3 RNE, satfinite
    d = (sf * g)[:, :, None]
    safe = np.where(d == 0, np.float32(1), d)
    v = np.where(d == 0, blocks * np.float32(0), blocks / safe).astype(np.float32)  # zero guard keeps the sign
    m = _round_to_grid(np.abs(v), 1, 0, 6, ties_up)
    code = np.searchsorted(E2M1_VALUES, m).astype(np.uint8) | np.where(np.signbit(v), 8, 0).astype(np.uint8)
    code = code.reshape(rows, cols)
    packed = (code[:, 0::2] | (code[:, 1::2] << 4)).astype(np.uint8)
    return packed, _e4m3_bytes(sf), g


def _e4m3_bytes(sf):
    """E4M3 codes of non-negative E4M3 values (by search over the 127 magnitudes)."""
    table = np.array([_e4m3_value(c) for c in range(0x7F)], dtype=np.float32)
    return np.searchsorted(table, sf).astype(np.uint8)


def _e4m3_value(c):
    e, m = c >> 3, c & 7
    return (m / 8.0) * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7)


def demo(directory, ties_up):
    rng = np.random.default_rng(20261122)
    x = np.clip(rng.standard_normal((8, 64)), -2.9, 2.9).astype(np.float32)
    # Block 0 holds every E2M1 tie at its decode scale: amax = 3 = 6 * 0.5 makes g = 3/2688,
    # sf = 448 and sf * g = 0.5 exactly, so x / (sf * g) lands on 0.25, 0.75, ... 5 exactly.
    x[0, :16] = np.float32([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25, -2.5, -5, 6, 0, 1, 2, 3, 4]) * np.float32(0.5)
    x[1, 16:32] = 0
    packed, scales, g = nvfp4_numpy_port(x, ties_up)
    return dump(os.path.join(directory, "in"), os.path.join(directory, "out"), x=x, codes=packed,
                block_scales=scales, global_scale=g, global_scale_role="output", recipe="nvfp4")


# --- a paged store in numpy: FP8 caches written at slot_mapping (docs/ports.md "Paged stores") ----

def e4m3_numpy(q):
    """E4M3 codes of float32 q: RNE on the E4M3 grid, saturating to 448 (finite q)."""
    m = _round_to_grid(np.abs(q).astype(np.float32), 3, -6, 448, ties_up=False)
    return _e4m3_bytes(m) | np.where(np.signbit(q), 0x80, 0).astype(np.uint8)


def fp8_paged_numpy_port(key, value, slot_mapping, k_scale, v_scale, num_blocks, block_size, poison, stray=False):
    """vLLM's reshape-and-cache in numpy, NHD: token t's heads at slot slot_mapping[t] (< 0: none),
    codes e4m3(x / scale). stray: also write slot 0's first byte, which no token addresses."""
    tokens, heads, dim = key.shape
    caches = []
    for x, scale in ((key, k_scale), (value, v_scale)):
        cache = np.full((num_blocks * block_size, heads, dim), poison, dtype=np.uint8)
        for t in range(tokens):
            if slot_mapping[t] >= 0:
                cache[slot_mapping[t]] = e4m3_numpy(x[t] / np.float32(scale))
        caches.append(cache.reshape(num_blocks, block_size, heads, dim))
    if stray:
        caches[1].reshape(-1)[0] = 0
    return caches


# --- a prefill workspace in numpy: an NVFP4 page requantized to E4M3 (docs/ports.md "Workspaces") ----

def _bf16_numpy(v):
    """float32 -> the float32 value of its BF16 rounding (RNE; finite v)."""
    b = np.asarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)


def workspace_numpy_port(kv_cache, g, factor, sglang):
    """The workspace rows of one request whose pages are kv_cache's blocks in order, both sides:
    E4M3 codes of element * scale * factor. sglang=False rounds the exact product once (float64:
    a 2-bit x 4-bit x 24-bit product is exact) and saturates; sglang=True computes it in float32,
    rounds to BF16 and casts like PyTorch (past 464: NaN, 0x7F with the sign)."""
    blocks, _, bs, heads, full = kv_cache.shape
    dim = full // 9 * 16
    outs = []
    for side in range(2):
        page = kv_cache[:, side].reshape(blocks, -1)
        data = page[:, :bs * heads * dim // 2].reshape(blocks * bs, heads, dim // 2)
        scales = page[:, bs * heads * dim // 2:].reshape(blocks * bs, heads, dim // 16)
        codes = np.stack([data & 0xF, data >> 4], axis=-1).reshape(blocks * bs, heads, dim)
        v = E2M1_VALUES[codes & 7] * np.where(codes & 8, -1, 1)
        sf = np.array([_e4m3_value(c & 0x7F) for c in range(256)])[np.repeat(scales, 16, axis=-1)]
        if sglang:
            p = _bf16_numpy((v.astype(np.float32) * sf.astype(np.float32)) * np.float32(factor[side])).astype(np.float64)
        else:
            p = v.astype(np.float64) * sf * np.float64(factor[side])
        m = np.abs(p)
        _, e = np.frexp(np.maximum(m, 2.0 ** -6))
        step = np.ldexp(1.0, (e - 4).astype(np.int32))
        q = np.minimum(np.round(m / step) * step, 448.0)  # RNE on the E4M3 grid, saturated
        code = _e4m3_bytes(q.astype(np.float32)) | np.where(np.signbit(p), 0x80, 0).astype(np.uint8)
        if sglang:
            code = np.where(m > 464, code | 0x7F, code)
        outs.append(code.astype(np.uint8))
    return outs


def workspace_demo(directory, sglang):
    rng = np.random.default_rng(20261126)
    blocks, bs, heads, dim = 2, 4, 2, 32
    x = np.clip(rng.standard_normal((2 * blocks * bs, heads * dim)), -2.9, 2.9).astype(np.float32)
    packed, scales, g = nvfp4_numpy_port(x)  # rows: K tokens, then V tokens
    kv = np.zeros((blocks, 2, bs, heads, dim // 2 + dim // 16), dtype=np.uint8)
    for side in range(2):
        rows = slice(side * blocks * bs, (side + 1) * blocks * bs)
        d = packed[rows].reshape(blocks, bs * heads * dim // 2)
        s = scales[rows].reshape(blocks, bs * heads * dim // 16)
        kv[:, side] = np.concatenate([d, s], axis=1).reshape(blocks, bs, heads, -1)
    ws_scale = (np.float32(1), np.float32(2.0 ** -8))  # V past 448: saturated, or NaN under PyTorch's cast
    factor = [np.float32(g / ws) for ws in ws_scale]
    k_ws, v_ws = workspace_numpy_port(kv, g, factor, sglang)
    tokens = blocks * bs
    return dump_workspace(os.path.join(directory, "in"), os.path.join(directory, "out"), kv,
                          np.arange(blocks, dtype=np.int32).reshape(1, blocks), np.array([0, tokens], dtype=np.int32),
                          g, g, k_ws, v_ws, k_workspace_scale=ws_scale[0], v_workspace_scale=ws_scale[1], poison=0xA5)


# --- FlashInfer's rope_quantize_fp8 in numpy (docs/ports.md "RoPE") ---------------------------------

def computed_cos_sin_numpy(pos, dim, theta):
    """cos/sin as a port computes them itself: an FP32 inverse frequency theta^(-2f/dim), the FP32
    angle pos * inv_freq, its cos and sin rounded to FP32 (float64 libm, then rounded)."""
    inv_freq = (float(theta) ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)).astype(np.float32)
    angle = (pos.astype(np.float32)[:, None] * inv_freq[None, :]).astype(np.float32)
    a = angle.astype(np.float64)
    return np.concatenate([np.cos(a), np.sin(a)], axis=1).astype(np.float32)


def rope_numpy_port(x, cos_sin, pos, scale, neox=True):
    """x float32 [tokens, heads, rope_dim]: each pair rotated in float32 (x*c -+ x_p*s, every product
    and sum rounded, no FMA), times scale, E4M3 codes. neox: pairs (j, j + rope_dim/2), else (2f, 2f+1)."""
    h = x.shape[-1] // 2
    c = cos_sin[pos, :h][:, None, :].astype(np.float32)
    s = cos_sin[pos, h:][:, None, :].astype(np.float32)
    first, second = (x[..., :h], x[..., h:]) if neox else (x[..., 0::2], x[..., 1::2])
    o1 = first * c - second * s
    o2 = second * c + first * s
    o = np.concatenate([o1, o2], axis=-1) if neox else np.stack([o1, o2], axis=-1).reshape(x.shape)
    return e4m3_numpy((o * np.float32(scale)).astype(np.float32))


def rope_demo(directory, gptj, computed=False):
    rng = np.random.default_rng(20261126)
    tokens, q_heads, k_heads, dim, max_pos = 5, 4, 2, 64, 4096
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, dim, 2) / dim))
    angles = np.arange(max_pos)[:, None] * inv_freq[None, :]
    cos_sin = np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    pos = np.array([0, 7, 1000, 2047, 4095], dtype=np.int64)
    q = (rng.standard_normal((tokens, q_heads, dim)) * 4).astype(np.float32)
    k = (rng.standard_normal((tokens, k_heads, dim)) * 4).astype(np.float32)
    scale_q, scale_kv = np.float32(8), np.float32(0.5)
    if computed:  # a port that takes no cache: cos/sin of FP32 angles, positions up to 10^5 (rows by token)
        tokens = 32
        pos = np.linspace(0, 100000, tokens).astype(np.int64)
        q = (rng.standard_normal((tokens, q_heads, dim)) * 4).astype(np.float32)
        k = (rng.standard_normal((tokens, k_heads, dim)) * 4).astype(np.float32)
        rows = computed_cos_sin_numpy(pos, dim, 10000.0)
        q_out = rope_numpy_port(q, rows, np.arange(tokens), scale_q, neox=not gptj)
        k_out = rope_numpy_port(k, rows, np.arange(tokens), scale_kv, neox=not gptj)
        return dump_rope(os.path.join(directory, "in"), os.path.join(directory, "out"), "rope-quantize",
                         dict(q_rope=q, k_rope=k, pos_ids=pos, q_rope_out=q_out, k_rope_out=k_out),
                         is_neox=True, quant_scale_q=scale_q, quant_scale_kv=scale_kv, rope_theta=10000.0)
    q_out = rope_numpy_port(q, cos_sin, pos, scale_q, neox=not gptj)
    k_out = rope_numpy_port(k, cos_sin, pos, scale_kv, neox=not gptj)
    return dump_rope(os.path.join(directory, "in"), os.path.join(directory, "out"), "rope-quantize",
                     dict(q_rope=q, k_rope=k, cos_sin_cache=cos_sin, pos_ids=pos, q_rope_out=q_out, k_rope_out=k_out),
                     is_neox=True, quant_scale_q=scale_q, quant_scale_kv=scale_kv)


# --- MLA caches in numpy: the 656-byte record writer and the 576 -> 656 conversion (docs/ports.md) ---

def _bf16_bits(v):
    """float32 values exactly representable in BF16 -> their BF16 bits."""
    return (np.asarray(v, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def mla_656_numpy_port(k_bf16, fp32_tile_scales=False):
    """k: BF16 bits [tokens, 576] -> 656-byte records, token i at slot i. Each 128-dim tile: FlashMLA's
    rule (mla-fp8-tile128), scale 2^ceil(log2(max(amax / 448, 1e-4))) (float32 division) and codes
    e4m3(x * 2^-e); or, fp32_tile_scales, the scale amax / 448 itself and codes e4m3(x * (1 / s))
    (IEEE division, nonzero tiles; SGLang's writer divides as Triton does)."""
    x = (k_bf16.astype(np.uint32) << 16).view(np.float32)
    tokens = x.shape[0]
    rec = np.zeros((tokens, 656), dtype=np.uint8)
    for t in range(4):
        tile = x[:, 128 * t:128 * (t + 1)]
        ratio = (np.max(np.abs(tile), axis=1) / np.float32(448)).astype(np.float32)
        if fp32_tile_scales:
            scale = ratio
            codes = e4m3_numpy(tile * (np.float32(1) / scale)[:, None])
        else:
            m, e = np.frexp(np.maximum(ratio, np.float32(1e-4)))
            e = np.where(m == 0.5, e - 1, e)  # ceil(log2): a power of two is its own
            scale = np.ldexp(np.float32(1), e.astype(np.int32)).astype(np.float32)
            codes = e4m3_numpy(tile * np.ldexp(np.float32(1), -e.astype(np.int32))[:, None].astype(np.float32))
        rec[:, 128 * t:128 * (t + 1)] = codes
        rec[:, 512 + 4 * t:516 + 4 * t] = scale.astype(np.float32).view(np.uint8).reshape(tokens, 4)
    rec[:, 528:] = k_bf16[:, 512:].astype(np.uint16).view(np.uint8).reshape(tokens, 128)
    return rec


def mla_demo(directory, fp32_tile_scales):
    rng = np.random.default_rng(20261126)
    tokens, block_size = 6, 4
    x = (rng.standard_normal((tokens, 576)) * np.array([0.01, 1, 30, 500])[rng.integers(0, 4, tokens)][:, None])
    k = _bf16_bits(_bf16_numpy(x.astype(np.float32)))
    slots = np.array([5, 0, -1, 2, 7, 3], dtype=np.int64)  # a padding token; slots 1, 4, 6 no token's
    cache = np.full((2 * block_size, 656), 0xA5, dtype=np.uint8)
    records = mla_656_numpy_port(k, fp32_tile_scales)
    for i, s in enumerate(slots):
        if s >= 0:
            cache[s] = records[i]
    return dump_mla_cache(os.path.join(directory, "in"), os.path.join(directory, "out"), k,
                          cache.reshape(2, block_size, 656), "fp8_nope_with_block_scale_bf16_rope", block_size,
                          slot_mapping=slots, poison=0xA5, tile_recipe="mla-fp8-tile128")


def mla_requant_demo(directory, drop_k_scale):
    """A 576-byte cache (random nope bytes, finite E4M3 rope codes) converted in numpy with k_scale
    0.5 folded into the tile scales (rope BF16 of code * 0.5: exact), or dropped (scales 1.0)."""
    rng = np.random.default_rng(20261126)
    blocks, block_size, k_scale = 2, 4, np.float32(0.5)
    src = rng.integers(0, 256, (blocks * block_size, 576)).astype(np.uint8)
    src[:, 512:] = np.where((src[:, 512:] & 0x7F) == 0x7F, 0x38, src[:, 512:])  # no NaN rope codes
    rope = np.array([_e4m3_value(c & 0x7F) * (-1 if c & 0x80 else 1) for c in range(256)], dtype=np.float32)[src[:, 512:]]
    scale = np.float32(1) if drop_k_scale else k_scale
    dst = np.zeros((blocks * block_size, 656), dtype=np.uint8)
    dst[:, :512] = src[:, :512]
    dst[:, 512:528] = np.tile(np.full(4, scale, dtype=np.float32).view(np.uint8), (blocks * block_size, 1))
    dst[:, 528:] = _bf16_bits(rope * scale).view(np.uint8).reshape(blocks * block_size, 128)
    return dump_mla_requant(os.path.join(directory, "in"), os.path.join(directory, "out"),
                            src.reshape(blocks, block_size, 576), dst.reshape(blocks, block_size, 656), k_scale,
                            block_size, poison=0xA5)


def paged_demo(directory, stray):
    rng = np.random.default_rng(20261126)
    tokens, heads, dim, blocks, block_size = 6, 2, 32, 3, 4
    key = (rng.standard_normal((tokens, heads, dim)) * 3).astype(np.float32)
    value = (rng.standard_normal((tokens, heads, dim)) * 0.5).astype(np.float32)
    slot_mapping = np.array([5, 9, -1, 2, 11, 7], dtype=np.int64)  # slot 0 is no token's
    k_scale, v_scale = np.float32(0.5), np.float32(0.25)
    key_cache, value_cache = fp8_paged_numpy_port(key, value, slot_mapping, k_scale, v_scale, blocks, block_size, 0xA5, stray)
    return dump_paged_store(os.path.join(directory, "in"), os.path.join(directory, "out"), key, value, slot_mapping,
                            k_scale, v_scale, key_cache=key_cache, value_cache=value_cache, poison=0xA5,
                            recipe="fp8-e4m3-tensor")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", metavar="DIR", help="write the worked example under DIR/in, DIR/out")
    parser.add_argument("--ties-up", action="store_true", help="the example port rounds ties away from zero")
    parser.add_argument("--paged-demo", metavar="DIR", help="write the numpy FP8 paged store under DIR/in, DIR/out")
    parser.add_argument("--stray", action="store_true", help="the paged store also writes a byte outside its slots")
    parser.add_argument("--rope-demo", metavar="DIR", help="write the numpy rope_quantize_fp8 under DIR/in, DIR/out")
    parser.add_argument("--gptj", action="store_true", help="the RoPE port pairs GPT-J style though the call says NeoX")
    parser.add_argument("--computed-cos-sin", action="store_true",
                        help="the RoPE port takes no cache: it computes cos/sin of FP32 angles (kvq's model: of the exact angles)")
    parser.add_argument("--mla-demo", metavar="DIR", help="write the numpy 656-byte MLA writer under DIR/in, DIR/out")
    parser.add_argument("--fp32-tile-scales", action="store_true", help="the MLA writer stores amax/448 tile scales")
    parser.add_argument("--requant-demo", metavar="DIR", help="write the numpy 576 -> 656 conversion under DIR/in, DIR/out")
    parser.add_argument("--drop-k-scale", action="store_true", help="the conversion drops k_scale (tile scales 1.0)")
    parser.add_argument("--workspace-demo", metavar="DIR", help="write the numpy NVFP4 -> E4M3 workspace under DIR/in, DIR/out")
    parser.add_argument("--sglang-rounding", action="store_true",
                        help="the workspace rounds as SGLang's: FP32 products, BF16, PyTorch's non-saturating cast")
    args = parser.parse_args()
    demos = (args.demo, args.paged_demo, args.rope_demo, args.mla_demo, args.requant_demo, args.workspace_demo)
    if sum(bool(d) for d in demos) != 1:
        parser.error("give one of --demo, --paged-demo, --rope-demo, --mla-demo, --requant-demo, --workspace-demo DIR")
    if args.demo:
        print(json.dumps(demo(args.demo, args.ties_up), indent=2))
    elif args.paged_demo:
        print(json.dumps(paged_demo(args.paged_demo, args.stray), indent=2))
    elif args.rope_demo:
        print(json.dumps(rope_demo(args.rope_demo, args.gptj, args.computed_cos_sin), indent=2))
    elif args.mla_demo:
        print(json.dumps(mla_demo(args.mla_demo, args.fp32_tile_scales), indent=2))
    elif args.requant_demo:
        print(json.dumps(mla_requant_demo(args.requant_demo, args.drop_k_scale), indent=2))
    else:
        print(json.dumps(workspace_demo(args.workspace_demo, args.sglang_rounding), indent=2))
