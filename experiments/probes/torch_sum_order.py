#!/usr/bin/env python3
"""Which FP32 summation order torch's CUDA .sum(-1) uses over rows of n (= 16, 32) contiguous
elements: each candidate order, computed in numpy float32, against torch's bits on random rows
with magnitudes spread over 2^-20..2^20 (so orders disagree often). The quantizers that sum
squared errors with torch (docs/recipes.md, four-over-six) follow the order found here."""
import itertools
import sys

import numpy as np
import torch


def sequential(a):
    s = a[:, 0].copy()
    for i in range(1, a.shape[1]):
        s = (s + a[:, i]).astype(np.float32)
    return s


def pairwise(a):
    while a.shape[1] > 1:
        a = (a[:, 0::2] + a[:, 1::2]).astype(np.float32)
    return a[:, 0]


def strided(k, combine):
    def f(a):
        acc = [a[:, j].copy() for j in range(k)]
        for i in range(k, a.shape[1], k):
            for j in range(k):
                acc[j] = (acc[j] + a[:, i + j]).astype(np.float32)
        return combine(np.stack(acc, 1))
    return f


def halves(a):  # first half + second half, recursively (a tree folding the upper half down)
    while a.shape[1] > 1:
        h = a.shape[1] // 2
        a = (a[:, :h] + a[:, h:]).astype(np.float32)
    return a[:, 0]


def main():
    rng = np.random.default_rng(1)
    for n in (16, 32):
        a = (rng.standard_normal((1 << 16, n)) * 2.0 ** rng.integers(-20, 20, (1 << 16, n))).astype(np.float32)
        t = torch.from_numpy(a).cuda().sum(-1).cpu().numpy()
        cands = {"sequential": sequential, "pairwise": pairwise, "halves": halves}
        for k in (2, 4, 8):
            for cname, comb in (("sequential", sequential), ("pairwise", pairwise), ("halves", halves)):
                cands["strided%d+%s" % (k, cname)] = strided(k, comb)
        for name, f in cands.items():
            m = np.mean(f(a).view(np.uint32) == t.view(np.uint32))
            print("n=%d %-28s matches %.6f" % (n, name, m))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
