"""The conformance inputs: tensors that separate the variants of docs/recipes.md (numpy only).

Each case is a [rows, cols] tensor of raw bits in one input dtype (float32 as uint32, bfloat16 and
float16 as uint16), so "one ulp" is one step of that dtype's bits, not of FP32. Values are
designed in float64, every designed value exactly representable in the dtype (checked), then
moved by +-1 ulp where a case asks for it. Blocks are 16 elements (and so 32, 64, 128: every
boundary case fills whole 16-blocks and keeps its block maximum in each 16-block).

Cases (docs/results/conformance.md lists them with what each separates):
  normal        N(0, 1) draws
  ties          block maxima 6 * 2^k beside every E2M1 midpoint and every E4M3 midpoint of
                [1, 2) times 2^k; the tensor max 2688 = 448 * 6 makes the NVFP4 decode scale g = 1
                (and 448 * 6 * 2^-3 for the FP8 rows), so x / (sf * g) is exact and ties are ties
  e8m0          block maxima at {1, 1.25, 1.5, 1.75, 3, 6, 7} * 2^e and one ulp either side:
                where FLOOR, CEIL, EVEN and RCEIL change their exponent
  e4m3-scale    with g = 1: block maxima 6 * m for m every E4M3 value and midpoint in
                [2^-9, 448], and one ulp either side: where the E4M3 block scale rounds
  zeros         all-zero blocks, all -0 blocks, signed zeros among values
  zero-tensor   every element +0 (amax = 0: g = 0)
  tiny          subnormal magnitudes of the dtype in some blocks, normal values elsewhere
  tiny-tensor   every element small (g may underflow)
  huge          magnitudes near the dtype's largest finite value in some blocks
  outlier       a block with one value 1000 times its neighbours
"""
import numpy as np

DTYPES = ("float32", "bfloat16", "float16")
E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _to_bits(values, dtype):
    """float64 values -> raw bits of dtype; every value must be exact in dtype."""
    v = np.asarray(values, dtype=np.float64)
    f32 = v.astype(np.float32)
    if not np.array_equal(f32.astype(np.float64), v, equal_nan=True):
        raise ValueError("a designed value is not exact in float32")
    if dtype == "float32":
        return f32.view(np.uint32)
    if dtype == "float16":
        f16 = v.astype(np.float16)
        if not np.array_equal(f16.astype(np.float64), v, equal_nan=True):
            raise ValueError("a designed value is not exact in float16")
        return f16.view(np.uint16)
    if dtype == "bfloat16":
        b = f32.view(np.uint32)
        if np.any(b & 0xFFFF):
            raise ValueError("a designed value is not exact in bfloat16")
        return (b >> 16).astype(np.uint16)
    raise ValueError("dtype is one of %s" % (DTYPES,))


def _step(bits, ulps):
    """Moves each finite non-zero value |x| by ulps steps of its own dtype (sign kept)."""
    b = bits.astype(np.int64)
    width = 8 * bits.itemsize
    sign = (b >> (width - 1)) & 1
    mag = b & ((1 << (width - 1)) - 1)
    mag = mag + np.asarray(ulps, dtype=np.int64)
    return ((sign << (width - 1)) | mag).astype(bits.dtype)


def _limits(dtype):
    """(largest finite, smallest normal, smallest subnormal) of dtype as float64."""
    return {"float32": (float(np.finfo(np.float32).max), 2.0 ** -126, 2.0 ** -149),
            "bfloat16": (float(np.float32(3.3895313892515355e38)), 2.0 ** -126, 2.0 ** -133),
            "float16": (65504.0, 2.0 ** -14, 2.0 ** -24)}[dtype]


def _exponents(dtype):
    """Block exponents e for which 7 * 2^e and its ulps stay normal and finite in dtype."""
    return {"float32": range(-100, 100, 7), "bfloat16": range(-100, 100, 7), "float16": range(-10, 12)}[dtype]


def _fill_blocks(rows, cols, rng, make_block):
    """[rows, cols] float64 from make_block(index) -> 16 values (the block max first, shuffled)."""
    out = np.zeros((rows, cols))
    n = 0
    for r in range(rows):
        for c in range(0, cols, 16):
            block = np.asarray(make_block(n), dtype=np.float64)
            out[r, c:c + 16] = block[rng.permutation(16)]
            n += 1
    return out


def _round_down_to(dtype, x):
    """The largest dtype value <= |x| with its sign (design helper for random fillers)."""
    f = np.asarray(x, dtype=np.float64).astype(np.float32)
    if dtype == "float16":
        f16 = f.astype(np.float16)
        return f16.astype(np.float64)
    if dtype == "bfloat16":
        return (f.view(np.uint32) & 0xFFFF0000).view(np.float32).astype(np.float64)
    return f.astype(np.float64)


def _boundary_blocks(rows, cols, rng, dtype, block_max):
    """(design, moves): block n's max (and its ulp move) from block_max(n) first, the other 15 values
    uniform in (-0.9, 0.9) times it, rounded down to dtype."""
    design = np.zeros((rows, cols))
    moves = np.zeros((rows, cols), dtype=np.int64)
    n = 0
    for r in range(rows):
        for c in range(0, cols, 16):
            bmax, move = block_max(n)
            rest = _round_down_to(dtype, bmax * rng.uniform(-0.9, 0.9, 15))
            design[r, c:c + 16] = np.concatenate(([bmax], rest))
            moves[r, c] = move
            n += 1
    return design, moves


def cases(dtype, rows=128, cols=512, seed=20261125):
    """[(name, bits)] for dtype: bits is uint32 (float32) or uint16 (bfloat16, float16) [rows, cols]."""
    if cols % 128:
        raise ValueError("cols must be a multiple of 128")
    rng = np.random.default_rng(seed)
    big, normal_min, sub_min = _limits(dtype)
    exps = list(_exponents(dtype))
    out = []

    out.append(("normal", _to_bits(_round_down_to(dtype, rng.standard_normal((rows, cols))), dtype)))

    # ties: block k holds 6 * 2^k (its max), the E2M1 midpoints and values times 2^k, mixed signs;
    # rows of E4M3 midpoints of [1, 2) times 2^k beside 448 * 2^k; the tensor max 2688.
    e4m3_mid = [1 + (2 * m + 1) / 16 for m in range(8)]
    def tie_block(n):
        k = (n % 13) - 9 if dtype != "float16" else (n % 11) - 8
        s = 2.0 ** k
        if (n // 13) % 2 == 0:
            vals = [6.0] + list(E2M1_MIDPOINTS) + list(E2M1_VALUES[1:-1]) + [0.25, 5.0]
        else:
            vals = [448.0 / 64] + e4m3_mid + [1.0, 1.125, 1.875, 0.5, 0.0, 1.5, -0.0][:7]
        vals = np.asarray(vals[:16], dtype=np.float64) * s
        signs = np.where(rng.random(16) < 0.5, -1.0, 1.0)
        signs[0] = 1.0
        return vals * signs
    t = _fill_blocks(rows, cols, rng, tie_block)
    t[0, 0] = 2688.0
    out.append(("ties", _to_bits(t, dtype)))

    # e8m0: the block max m * 2^e, moved by -1, 0 or +1 ulp of dtype; the others below it.
    mantissas = (1.0, 1.25, 1.5, 1.75, 3.0, 6.0, 7.0)
    def e8m0_max(n):
        bmax = mantissas[n % len(mantissas)] * 2.0 ** exps[(n // len(mantissas)) % len(exps)]
        return bmax, ((n // (len(mantissas) * len(exps))) % 3) - 1
    design, moves = _boundary_blocks(rows, cols, rng, dtype, e8m0_max)
    out.append(("e8m0", _step(_to_bits(design, dtype), moves)))

    # e4m3-scale: g = 1 (the tensor max 2688); block max 6 * m for every E4M3 value and midpoint m
    # in [2^-9, 448] that dtype holds, -1, 0, +1 ulp; the others uniform below it.
    ms = []
    for e in range(-9, 9):
        for q in range(16):
            ms.append((1 + q / 16) * 2.0 ** e)
    ms = [m for m in ms if 2.0 ** -9 <= m <= 448 and 6 * m >= normal_min]
    def e4m3_max(n):
        bmax = 6 * ms[n % len(ms)]
        try:
            _to_bits([bmax], dtype)
        except ValueError:
            bmax = 6.0
        return bmax, ((n // len(ms)) % 3) - 1
    design, moves = _boundary_blocks(rows, cols, rng, dtype, e4m3_max)
    design[0, 0] = 2688.0
    moves[0, 0] = 0
    out.append(("e4m3-scale", _step(_to_bits(design, dtype), moves)))

    # zeros: every third block +0, every third -0, the rest values with signed zeros among them.
    z = _round_down_to(dtype, rng.standard_normal((rows, cols)))
    for r in range(rows):
        for c in range(0, cols, 16):
            kind = (r * cols // 16 + c // 16) % 3
            if kind == 0:
                z[r, c:c + 16] = 0.0
            elif kind == 1:
                z[r, c:c + 16] = -0.0
            else:
                z[r, c:c + 16:4] = np.where(rng.random(4) < 0.5, -0.0, 0.0)
    out.append(("zeros", _to_bits(z, dtype)))
    out.append(("zero-tensor", _to_bits(np.zeros((rows, cols)), dtype)))

    # tiny: half the blocks subnormal multiples of the smallest subnormal, the rest N(0, 1).
    tn = _round_down_to(dtype, rng.standard_normal((rows, cols)))
    steps = rng.integers(-40, 40, size=(rows, cols)).astype(np.float64)
    for r in range(rows):
        for c in range(0, cols, 32):
            tn[r, c:c + 16] = steps[r, c:c + 16] * sub_min
    out.append(("tiny", _to_bits(tn, dtype)))
    tiny_scale = {"float32": 2.0 ** -120, "bfloat16": 2.0 ** -120, "float16": 2.0 ** -12}[dtype]
    out.append(("tiny-tensor", _to_bits(_round_down_to(dtype, rng.standard_normal((rows, cols)) * tiny_scale), dtype)))

    # huge: every fourth block holds values up to the dtype's largest finite value.
    h = _round_down_to(dtype, rng.standard_normal((rows, cols)))
    for r in range(rows):
        for c in range(0, cols, 64):
            h[r, c:c + 16] = _round_down_to(dtype, big * rng.uniform(-1, 1, 16))
    h[0, 0] = big
    out.append(("huge", _to_bits(h, dtype)))

    # outlier: each block N(0, 1) with one element 1000 times larger.
    o = rng.standard_normal((rows, cols))
    o[:, ::16] *= 1000.0
    out.append(("outlier", _to_bits(_round_down_to(dtype, o), dtype)))
    return out


def as_torch(torch, bits, dtype, device):
    """A torch tensor of dtype from the raw bits."""
    if dtype == "float32":
        return torch.from_numpy(bits.view(np.int32).copy()).view(torch.float32).to(device)
    t = torch.from_numpy(bits.view(np.int16).copy())
    return t.view(torch.bfloat16 if dtype == "bfloat16" else torch.float16).to(device)


if __name__ == "__main__":
    for d in DTYPES:
        for name, bits in cases(d):
            print(d, name, bits.shape, bits.dtype)
