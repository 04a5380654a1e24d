#!/usr/bin/env python3
"""Dump third-party quantizers' tensors for kvq verify / identify (issue 7, run where torch is):
PyTorch casts (eager and torch.compile), torchao's NVFP4/MX quantizers, the CUDA intrinsics (a
port compiled by NVRTC through CuPy) and ml_dtypes.

For each producer this writes DIR/<name>/in and DIR/<name>/out (kvq_dump.py's layout) and prints
the kvq commands to check it. A producer whose library or API is missing is reported and skipped:
nothing here is required by CI. Written without torch at hand: the torchao calls follow its
public API (NVFP4Tensor.to_nvfp4, MXTensor.to_mx) and may need adjusting to the installed version.

    python3 proptests/ports/dump_torch_ports.py --out /tmp/ports [--device cuda] [--rows 256 --cols 128]
"""
import argparse
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kvq_dump import dump  # noqa: E402


def inputs(torch, rows, cols, device):
    g = torch.Generator(device="cpu").manual_seed(20261122)
    x = torch.randn(rows, cols, generator=g, dtype=torch.float32)
    # E2M1/E4M3 ties at power-of-two scales in the first rows, and an all-zero block.
    x[0, :16] = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25, -2.5, -5, 6, 0, 1, 2, 3, 4]) * 0.5
    x[1, 16:32] = 0
    return x.to(device)


def fp8_tensor(torch, x, compiled, shrink=1.0):
    """PyTorch per-tensor FP8 the way vLLM's store does it: divide by the decode scale, then cast.
    shrink > 1: a static scale that small values would have calibrated (elements overflow)."""
    s = x.abs().amax() / 448.0 / shrink
    f = lambda x, s: (x / s).to(torch.float8_e4m3fn)  # noqa: E731
    if compiled:
        f = torch.compile(f)
    return dict(recipe="fp8-e4m3-tensor", x=x, codes=f(x, s), global_scale=s.float(), global_scale_role="input")


def fp8_tensor_bf16(torch, x, compiled):
    xb = x.to(torch.bfloat16)
    s = xb.float().abs().amax() / 448.0
    f = lambda x, s: (x.float() * (1.0 / s)).to(torch.float8_e4m3fn)  # noqa: E731
    if compiled:
        f = torch.compile(f)
    return dict(recipe="fp8-e4m3-tensor-rcp", x=xb, codes=f(xb, s), global_scale=s.float(), global_scale_role="input")


def torchao_nvfp4(torch, x):
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

    g = per_tensor_amax_to_scale(x.abs().amax())
    q = NVFP4Tensor.to_nvfp4(x, per_tensor_scale=g)
    scale = q.get_hp_scales() if getattr(q, "is_swizzled_scales", False) else q.scale
    return dict(recipe="nvfp4-torchao", x=x, codes=q.qdata, block_scales=scale.contiguous(),
                global_scale=g.float(), global_scale_role="input")


def torchao_mxfp4(torch, x):
    from torchao.prototype.mx_formats.mx_tensor import MXTensor

    q = MXTensor.to_mx(x, torch.float4_e2m1fn_x2, block_size=32)
    return dict(recipe="mxfp4-floor", x=x, codes=q.qdata, block_scales=q.scale.contiguous())


def torchao_mxfp8(torch, x):
    from torchao.prototype.mx_formats.mx_tensor import MXTensor

    q = MXTensor.to_mx(x, torch.float8_e4m3fn, block_size=32)
    return dict(recipe="mxfp8-e4m3-floor", x=x, codes=q.qdata, block_scales=q.scale.contiguous())


# A port written with the CUDA 13 conversion intrinsics (cuda_fp8.h / cuda_fp4.h), compiled by NVRTC
# through CuPy on the GPU machine: per-tensor FP8 (x * (1/s), satfinite or nosat) and NVFP4 (the
# reference recipe: E4M3 block scale of (bmax/6)/g, elements x / (sf*g) through the FP4 intrinsic,
# which on sm_90 is the header's software path). One thread per 16-element block.
CUDA_INTRINSIC_PORT = r"""
#include <cuda_fp8.h>
#include <cuda_fp4.h>
extern "C" __global__ void fp8_tensor(const float* x, float inv_s, unsigned char* out, int n, int sat) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __nv_cvt_float_to_fp8(__fmul_rn(x[i], inv_s), sat ? __NV_SATFINITE : __NV_NOSAT, __NV_E4M3);
}
extern "C" __global__ void nvfp4(const float* x, float g, unsigned char* codes, unsigned char* scales, int blocks) {
  int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= blocks) return;
  const float* v = x + 16 * b;
  float bmax = 0.0f;
  for (int i = 0; i < 16; ++i) bmax = fmaxf(bmax, fabsf(v[i]));
  unsigned char sf8 = bmax == 0.0f ? 0 : __nv_cvt_float_to_fp8(__fdiv_rn(__fdiv_rn(bmax, 6.0f), g), __NV_SATFINITE, __NV_E4M3);
  __half_raw h = __nv_cvt_fp8_to_halfraw(sf8, __NV_E4M3);
  float d = __fmul_rn(__half2float(__half(h)), g);
  scales[b] = sf8;
  for (int i = 0; i < 8; ++i) {
    float lo = d == 0.0f ? 0.0f * v[2 * i] : __fdiv_rn(v[2 * i], d);
    float hi = d == 0.0f ? 0.0f * v[2 * i + 1] : __fdiv_rn(v[2 * i + 1], d);
    codes[8 * b + i] = __nv_cvt_float2_to_fp4x2(make_float2(lo, hi), __NV_E2M1, cudaRoundNearest);
  }
}
"""


def cuda_intrinsics(x_np, which):
    import cupy as cp

    module = cp.RawModule(code=CUDA_INTRINSIC_PORT, options=("--std=c++17", "--fmad=false"))
    x = cp.asarray(np.ascontiguousarray(x_np, dtype=np.float32))
    amax = np.float32(np.max(np.abs(x_np)))
    if which.startswith("fp8"):
        s = np.float32(amax / np.float32(448) / np.float32(4.0 if "static" in which else 1.0))
        out = cp.empty(x.shape, dtype=cp.uint8)
        n = x.size
        module.get_function("fp8_tensor")(((n + 255) // 256,), (256,), (x, np.float32(np.float32(1) / s), out, np.int32(n), np.int32("nosat" not in which)))
        return dict(recipe="fp8-e4m3-tensor-rcp", x=x_np, codes=cp.asnumpy(out), global_scale=s, global_scale_role="input")
    g = np.float32(amax / np.float32(448 * 6))
    blocks = x.size // 16
    codes = cp.empty((x.shape[0], x.shape[1] // 2), dtype=cp.uint8)
    scales = cp.empty((x.shape[0], x.shape[1] // 16), dtype=cp.uint8)
    module.get_function("nvfp4")(((blocks + 127) // 128,), (128,), (x, g, codes, scales, np.int32(blocks)))
    return dict(recipe="nvfp4", x=x_np, codes=cp.asnumpy(codes), block_scales=cp.asnumpy(scales), global_scale=g,
                global_scale_role="input")


def ml_dtypes_fp8(x_np, shrink=1.0):
    import ml_dtypes

    s = np.float32(np.max(np.abs(x_np)) / np.float32(448) / np.float32(shrink))
    codes = (x_np / s).astype(ml_dtypes.float8_e4m3fn)
    return dict(recipe="fp8-e4m3-tensor", x=x_np, codes=codes, global_scale=s, global_scale_role="input")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--cols", type=int, default=128)
    a = p.parse_args()
    producers = []
    try:
        import torch

        x = inputs(torch, a.rows, a.cols, a.device)
        producers += [
            ("torch-fp8-eager", lambda: fp8_tensor(torch, x, False)),
            ("torch-fp8-compile", lambda: fp8_tensor(torch, x, True)),
            ("torch-fp8-static-scale-eager", lambda: fp8_tensor(torch, x, False, 4.0)),
            ("torch-fp8-static-scale-compile", lambda: fp8_tensor(torch, x, True, 4.0)),
            ("torch-fp8-bf16-rcp-eager", lambda: fp8_tensor_bf16(torch, x, False)),
            ("torch-fp8-bf16-rcp-compile", lambda: fp8_tensor_bf16(torch, x, True)),
            ("torchao-nvfp4", lambda: torchao_nvfp4(torch, x)),
            ("torchao-mxfp4", lambda: torchao_mxfp4(torch, x)),
            ("torchao-mxfp8", lambda: torchao_mxfp8(torch, x)),
        ]
        x_np = x.float().cpu().numpy()
    except Exception:  # no torch: ml_dtypes alone
        x_np = np.random.default_rng(20261122).standard_normal((a.rows, a.cols)).astype(np.float32)
    for which in ("fp8-satfinite", "fp8-static-scale-satfinite", "fp8-static-scale-nosat", "nvfp4"):
        producers.append(("cuda-intrinsics-" + which, lambda which=which: cuda_intrinsics(x_np, which)))
    producers.append(("ml_dtypes-fp8", lambda: ml_dtypes_fp8(x_np)))
    producers.append(("ml_dtypes-fp8-static-scale", lambda: ml_dtypes_fp8(x_np, 4.0)))
    for name, produce in producers:
        try:
            t = produce()
            recipe = t.pop("recipe")
            d = os.path.join(a.out, name)
            dump(os.path.join(d, "in"), os.path.join(d, "out"), recipe=recipe, **t)
            print(f"{name}: kvq verify {recipe} --inputs {d}/in --outputs {d}/out ; kvq identify --inputs {d}/in --outputs {d}/out")
        except Exception as e:
            print(f"{name}: SKIPPED ({type(e).__name__}: {e})")
            traceback.print_exc(limit=1, file=sys.stderr)


if __name__ == "__main__":
    main()
