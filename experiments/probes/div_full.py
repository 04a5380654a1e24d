#!/usr/bin/env python3
"""What Triton's FP32 `/` computes on this GPU (docs/recipes.md "Engine arithmetic"):
1. Triton's a / b against PTX div.full.f32, div.rn.f32 and mul.rn(a, rcp.approx.ftz(b)) (CuPy
   inline PTX), on random FP32 pairs over the normal range and on pairs near the ends of the range;
2. Triton's tl.math.div_rn against div.rn.f32;
3. subnormal divisors: div.full.f32 against both operands scaled by 2^24 first (the model);
4. the SASS that div.full.f32 compiles to (nvcc -cubin, cuobjdump -sass), where both tools exist.
Prints, for each pair of computations, the fraction of bit-equal results."""
import os
import shutil
import subprocess
import tempfile
import cupy as cp
import numpy as np
import torch
import triton
import triton.language as tl

SRC = r'''
extern "C" __global__ void ops(const float* a, const float* b, float* full, float* rn, float* rcpmul, float* fullftz,
                               float* scaled, float* sub24, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = a[i], y = b[i], f, r, q, c, g;
  asm("div.full.f32 %0, %1, %2;" : "=f"(f) : "f"(x), "f"(y));
  asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(y));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(c) : "f"(y));
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(q) : "f"(x), "f"(c));
  asm("div.full.ftz.f32 %0, %1, %2;" : "=f"(g) : "f"(x), "f"(y));
  float x4, y4, c4, s;
  asm("mul.rn.f32 %0, %1, 0f3E800000;" : "=f"(x4) : "f"(x));
  asm("mul.rn.f32 %0, %1, 0f3E800000;" : "=f"(y4) : "f"(y));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(c4) : "f"(y4));
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(s) : "f"(x4), "f"(c4));
  // kvq's model (formats/reciprocal.hpp div_full_model): scaled by 2^-2 where |y| >= 2^126
  scaled[i] = ((__float_as_uint(y) >> 23) & 0xFF) >= 253 && ((__float_as_uint(y) >> 23) & 0xFF) != 255 ? s : q;
  full[i] = f; rn[i] = r; rcpmul[i] = q; fullftz[i] = g;
  // subnormal |y|: both operands times 2^24 (exact for y), then the usual x * rcp.approx(y)
  float x24, y24, c24, t;
  asm("mul.rn.f32 %0, %1, 0f4B800000;" : "=f"(x24) : "f"(x));
  asm("mul.rn.f32 %0, %1, 0f4B800000;" : "=f"(y24) : "f"(y));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(c24) : "f"(y24));
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(t) : "f"(x24), "f"(c24));
  sub24[i] = ((__float_as_uint(y) >> 23) & 0xFF) == 0 ? t : scaled[i];
}
extern "C" __global__ void full_only(const float* a, const float* b, float* o) {
  float f;
  asm("div.full.f32 %0, %1, %2;" : "=f"(f) : "f"(a[threadIdx.x]), "f"(b[threadIdx.x]));
  o[threadIdx.x] = f;
}
'''


@triton.jit
def tdiv(a_ptr, b_ptr, o_ptr, r_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    a = tl.load(a_ptr + i, mask=m)
    b = tl.load(b_ptr + i, mask=m)
    tl.store(o_ptr + i, a / b, mask=m)
    tl.store(r_ptr + i, tl.math.div_rn(a, b), mask=m)


def pairs(rng, n, lo, hi):
    e1 = rng.integers(lo, hi, n)
    e2 = rng.integers(lo, hi, n)
    m1 = rng.integers(0, 1 << 23, n)
    m2 = rng.integers(0, 1 << 23, n)
    a = ((e1 << 23) | m1).astype(np.uint32).view(np.float32)
    b = ((e2 << 23) | m2).astype(np.uint32).view(np.float32)
    return a, b


def main():
    mod = cp.RawModule(code=SRC, options=("--fmad=false",))
    ops = mod.get_function("ops")
    rng = np.random.default_rng(7)
    n = 1 << 22
    for name, (lo, hi) in (("normal", (64, 190)), ("wide", (1, 254)), ("small-b", (1, 20)), ("large-b", (230, 254)),
                           ("subnormal-b", (0, 1)), ("subnormal-b-wide-a", (1, 254))):
        a, b = pairs(rng, n, lo if name != "small-b" else 100, hi if name != "small-b" else 150)
        if name in ("small-b", "subnormal-b"):  # any a; b in the low binades (field 0: subnormal)
            b = pairs(rng, n, lo, hi)[1]
        if name == "subnormal-b-wide-a":
            b = pairs(rng, n, 0, 1)[1]
        if name == "large-b":
            a = pairs(rng, n, 100, 150)[0]
            b = pairs(rng, n, lo, hi)[1]
        da, db = cp.asarray(a), cp.asarray(b)
        out = [cp.empty(n, cp.float32) for _ in range(6)]
        ops((n // 256 + 1,), (256,), (da, db, *out, np.int64(n)))
        ta, tb = torch.as_tensor(da, device="cuda"), torch.as_tensor(db, device="cuda")
        to, tr = torch.empty_like(ta), torch.empty_like(ta)
        tdiv[(n // 1024 + 1,)](ta, tb, to, tr, n, BLOCK=1024)
        torch.cuda.synchronize()
        res = {"full": out[0], "rn": out[1], "mul-rcp": out[2], "full.ftz": out[3],
               "kvq-model": out[4], "scaled-2^24": out[5], "triton/": cp.asarray(to), "triton-div_rn": cp.asarray(tr)}
        bits = {k: cp.asnumpy(v).view(np.uint32) for k, v in res.items()}
        for x, y in (("triton/", "full"), ("triton/", "full.ftz"), ("triton/", "rn"), ("triton/", "mul-rcp"),
                     ("full", "mul-rcp"), ("full", "kvq-model"), ("full", "scaled-2^24"), ("full.ftz", "mul-rcp"), ("triton-div_rn", "rn")):
            eq = np.mean(bits[x] == bits[y])
            print("%-8s %-14s == %-10s %.7f" % (name, x, y, eq))
            if x == "full" and y in ("mul-rcp", "scaled-2^24") and eq < 1:
                k = np.nonzero(bits[x] != bits[y])[0][:3]
                for j in k:
                    print("   a=%08x b=%08x full=%08x %s=%08x" % (a.view(np.uint32)[j], b.view(np.uint32)[j], bits[x][j], y,
                                                            bits[y][j]))
    sass()


def sass():
    """Print the SASS of the kernel that holds div.full.f32 alone."""
    if not (shutil.which("nvcc") and shutil.which("cuobjdump")):
        print("sass: nvcc or cuobjdump not found")
        return
    with tempfile.TemporaryDirectory() as d:
        src, cubin = os.path.join(d, "k.cu"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(SRC)
        subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "--fmad=false", "-o", cubin, src], check=True)
        text = subprocess.run(["cuobjdump", "-sass", "-fun", "full_only", cubin], capture_output=True, text=True).stdout
        print(text)


if __name__ == "__main__":
    main()
