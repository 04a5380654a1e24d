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
written in numpy float32 arithmetic, its input and outputs (docs/ports.md walks through it).
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", metavar="DIR", required=True, help="write the worked example under DIR/in, DIR/out")
    parser.add_argument("--ties-up", action="store_true", help="the example port rounds ties away from zero")
    args = parser.parse_args()
    print(json.dumps(demo(args.demo, args.ties_up), indent=2))
