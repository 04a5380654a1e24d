"""Where torch.compile's NVFP4 reference (kernels/bench_torch_peers.py) departs from eager's bytes.

On a GPU with PyTorch: draws the bench's input (seeded), runs the reference eagerly and compiled,
and compares, stage by stage, the global scale g = amax / 2688 (eager's is RN(amax / 2688); also
printed: RN(amax * RN(1 / 2688))), the block scales and the codes. Then the
same reference with every `/` of the block scale and of the elements computed as PTX div.full.f32
(Triton's FP32 `/`, docs/recipes.md "Engine arithmetic"; CuPy inline PTX) against the compiled
bytes, with the scale's `/ 6.0` as a division or as a multiplication by RN(1/6).

    python3 experiments/probes/torch_compile_nvfp4.py [--mib 256] [--seeds 0,1,2,...] [--dump DIR]

--dump DIR writes, for each seed, the compiled and the eager outputs as port tensors for `kvq
identify` / `kvq verify nvfp4` (docs/ports.md): DIR/seedS/in/x.npy (BF16 bits) and
DIR/seedS/{compiled,eager}/{codes.npy, scales.npy, manifest.json} (g given, eager's).
"""
import argparse
import json
import os
import sys

import cupy as cp
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels"))
from bench_torch_peers import e2m1_packed, e2m1_thresholds, nvfp4_eager  # noqa: E402


def global_scale(x):
    return x.float().reshape(-1, 16).abs().amax() / 2688.0


_div_full = cp.ElementwiseKernel("float32 a, float32 b", "float32 q",
                                 'asm("div.full.f32 %0, %1, %2;" : "=f"(q) : "f"(a), "f"(b));', "div_full")


def div_full(a, b):
    """PTX div.full.f32 of two float32 CUDA tensors (broadcast)."""
    return torch.from_dlpack(_div_full(cp.from_dlpack(a.contiguous()), cp.from_dlpack(b.contiguous())))


def nvfp4_div_full(x, thresholds, sixth_by_reciprocal):
    """nvfp4_eager with its block-scale and element `/` as div.full.f32 (g as eager's)."""
    xf = x.float().reshape(-1, 16)
    g = xf.abs().amax() / 2688.0
    bmax = xf.abs().amax(dim=1, keepdim=True)
    sixth = bmax * (1.0 / 6.0) if sixth_by_reciprocal else div_full(bmax, torch.full_like(bmax, 6.0))
    sf = div_full(sixth, g.expand_as(sixth)).to(torch.float8_e4m3fn)
    return e2m1_packed(div_full(xf, (sf.float() * g).expand_as(xf)), thresholds), sf


def dump(folder, x, g, outputs):
    """x (BF16 bits) and each output's codes and scales, with a manifest naming g (decode, given)."""
    import numpy as np
    os.makedirs(os.path.join(folder, "in"), exist_ok=True)
    np.save(os.path.join(folder, "in", "x.npy"), x.view(torch.int16).cpu().numpy().view(np.uint16))
    for name, (codes, sf) in outputs.items():
        out = os.path.join(folder, name)
        os.makedirs(out, exist_ok=True)
        np.save(os.path.join(out, "codes.npy"), codes.cpu().numpy())
        np.save(os.path.join(out, "scales.npy"), sf.view(torch.uint8).reshape(-1).cpu().numpy())
        manifest = {"kvq_port_manifest": 1, "recipe": "nvfp4", "tensors": {
            "x": {"file": "x.npy", "dtype": "bfloat16"}, "codes": {"file": "codes.npy"},
            "block_scales": {"file": "scales.npy"},
            "global_scale": {"bits": hex(g.view(torch.int32).item() & 0xFFFFFFFF), "convention": "decode"}},
            "layout": {"nibble_order": "low_first", "block": 16}}
        with open(os.path.join(out, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--cols", type=int, default=128)
    ap.add_argument("--seeds", default="0,1,2,3,4,5,6,7")
    ap.add_argument("--dump")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIPPED: no CUDA device", file=sys.stderr)
        return 77
    compiled = torch.compile(nvfp4_eager, fullgraph=True)
    compiled_g = torch.compile(global_scale, fullgraph=True)
    thresholds = e2m1_thresholds("cuda")
    count = args.mib * 1024 * 1024 // 2
    for seed in (int(s) for s in args.seeds.split(",")):
        torch.manual_seed(seed)
        x = (torch.randn(count // args.cols, args.cols, device="cuda") *
             torch.rand(count // args.cols, 1, device="cuda") * 4).to(torch.bfloat16)
        (codes_e, sf_e), (codes_c, sf_c) = nvfp4_eager(x, thresholds), compiled(x, thresholds)
        amax = x.float().abs().amax()
        g_rcp = amax * (torch.tensor(1.0, device="cuda") / 2688.0)
        g_e, g_c = global_scale(x), compiled_g(x)
        bits = lambda t: hex(t.view(torch.int32).item() & 0xFFFFFFFF)
        print(f"seed {seed}: amax {bits(amax)}  g eager {bits(g_e)} compiled {bits(g_c)}  "
              f"RN(amax*RN(1/2688)) {bits(g_rcp)}  "
              f"scale bytes differing {int((sf_e.view(torch.uint8) != sf_c.view(torch.uint8)).sum())}  "
              f"code bytes differing {int((codes_e != codes_c).sum())}")
        if args.dump:
            dump(os.path.join(args.dump, f"seed{seed}"), x, g_e, {"compiled": (codes_c, sf_c), "eager": (codes_e, sf_e)})
        for by_rcp in (False, True):
            codes_m, sf_m = nvfp4_div_full(x, thresholds, by_rcp)
            print(f"  div.full model (/6 {'by RN(1/6)' if by_rcp else 'div.full'}) against compiled: scale bytes "
                  f"differing {int((sf_m.view(torch.uint8) != sf_c.view(torch.uint8)).sum())}, code bytes "
                  f"differing {int((codes_m != codes_c).sum())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
