"""CUDA tensors: kvq.verify compares them on their GPU (kvq's quantize kernel and the device
comparator), and its counts and first differences are the host comparison's on the same tensors.
The expected differences are planted by the test (a flipped code nibble, a changed scale byte), so
their counts are known without kvq. Skipped, and counted, without torch, a GPU or kvq's CUDA build."""
import numpy as np
import pytest

import kvq
import kvq.testing

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch", allow_module_level=True)
if not kvq.cuda_available():
    pytest.skip("this kvq was built without CUDA kernels", allow_module_level=True)

CUDA = torch.device("cuda")


def tensors(rows=1000, cols=128, dtype=torch.bfloat16, seed=1):
    return (torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)) * 5).to(dtype)


def port_of(x, recipe, **options):
    """kvq's CPU quantize of x as the port's outputs: (codes, scales, g) as torch CPU tensors."""
    q = kvq.quantize(x, recipe, **options)
    scales = None if q.scales is None else torch.from_numpy(q.scales)
    return torch.from_numpy(q.codes), scales, q.global_scale


def on_gpu(*tensors):
    return [None if t is None else t.to(CUDA) for t in tensors]


def comparable(records):
    """Records with NaN values made comparable (NaN != NaN)."""
    return [{k: ("nan" if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in records]


def same_verdict(gpu, cpu):
    """The device report's counts and records are the host's."""
    for field in ("exact", "codes", "code_mismatches", "scales", "scale_mismatches", "dequantized_mismatches",
                  "global_scale_matches"):
        assert getattr(gpu, field) == getattr(cpu, field), field
    assert comparable(gpu.differences) == comparable(cpu.differences)
    assert "compared on cuda:" in str(gpu)


def test_exact_nvfp4_on_the_gpu():
    x = tensors()
    codes, scales, g = port_of(x, "nvfp4")
    xg, cg, sg = on_gpu(x, codes, scales)
    report = kvq.verify("nvfp4", xg, cg, sg)
    assert report.exact and report.codes == 1000 * 128 and report.scales == 1000 * 8
    assert "BIT-EXACT" in str(report) and "compared on cuda:0" in str(report)
    given = kvq.verify("nvfp4", xg, cg, sg, global_scale=g)
    assert given.exact


def test_planted_differences_are_counted_and_located():
    x = tensors()
    codes, scales, g = port_of(x, "nvfp4")
    planted = [(3, 5), (700, 40), (999, 63)]  # (row, byte)
    for row, byte in planted:
        codes[row, byte] ^= 0x1  # one element code (the low nibble) differs
    scales[500, 2] ^= 0x1
    report = kvq.verify("nvfp4", *on_gpu(x, codes, scales), show=8)
    assert report.code_mismatches == len(planted) and report.scale_mismatches == 1
    rows = sorted(d["row"] for d in report.differences if d["kind"] == "code")
    assert rows == [3, 700, 999]
    assert [(d["row"], d["block"]) for d in report.differences if d["kind"] == "scale"] == [(500, 2)]
    same_verdict(report, kvq.verify("nvfp4", x, codes, scales, show=8))


def test_many_differences_keep_the_first():
    x = tensors(rows=600)
    codes, scales, g = port_of(x, "nvfp4")
    codes[::2, :] ^= 0x11  # every even row: every element code differs
    report = kvq.verify("nvfp4", *on_gpu(x, codes, scales), show=5)
    assert report.code_mismatches == 300 * 128
    same_verdict(report, kvq.verify("nvfp4", x, codes, scales, show=5))


# Kernels of every kind: per-tensor spans, fixed and generic blocks, 16-bit input (compared as the
# kernel quantizes) and FP32, the generic kernel and the lane-split quantizers (mxfp4-floor from FP32,
# mla-fp8-tile128), which compare in a second pass.
@pytest.mark.parametrize("recipe,dtype", [("fp8-e4m3-tensor", torch.float32), ("fp8-e4m3-tensor", torch.bfloat16),
                                          ("mxfp4-rceil", torch.float16),
                                          ("mxfp8-e4m3-even", torch.bfloat16), ("nvfp4-torchao", torch.float32),
                                          ("mxfp4-floor", torch.float32), ("mla-fp8-tile128", torch.bfloat16),
                                          ("nvfp4", torch.float16)])
def test_recipes_and_input_types(recipe, dtype):
    x = tensors(rows=300, cols=128, dtype=dtype, seed=7)
    codes, scales, g = port_of(x, recipe)
    flat = codes.view(-1)
    flat[[0, 1000, flat.numel() - 1]] ^= 0x1
    options = dict(global_scale=g) if recipe.startswith("fp8") else {}
    report = kvq.verify(recipe, *on_gpu(x, codes, scales), **options)
    assert report.code_mismatches == 3
    same_verdict(report, kvq.verify(recipe, x, codes, scales, **options))


def test_port_layouts_high_nibble_first_and_token_group4():
    x = tensors(rows=512, cols=64, seed=3)
    codes, scales, g = port_of(x, "nvfp4")
    high_first = ((codes & 0x0F) << 4) | (codes >> 4)
    rows, per_row = scales.shape
    grouped = scales.view(rows // 4, 4, per_row).transpose(1, 2).contiguous().view(rows, per_row)  # (row/4, block, row%4)
    options = dict(nibble_order="high_first", scale_layout="token_group4")
    assert kvq.verify("nvfp4", *on_gpu(x, high_first, grouped), **options).exact
    high_first[10, 3] ^= 0x10
    grouped[40, 1] ^= 0x2
    report = kvq.verify("nvfp4", *on_gpu(x, high_first, grouped), **options)
    assert report.code_mismatches == 1 and report.scale_mismatches == 1
    same_verdict(report, kvq.verify("nvfp4", x, high_first, grouped, **options))


def test_one_code_a_byte_and_the_ports_dequantize():
    x = tensors(rows=260, cols=64, seed=4)
    codes, scales, g = port_of(x, "nvfp4")
    unpacked = torch.from_numpy(kvq.unpack_e2m1(codes.numpy()))
    values = kvq.dequantize(codes.numpy(), scales.numpy(), g, recipe="nvfp4", shape=x.shape, dtype="bfloat16")
    dequantized = torch.from_numpy(values).to(torch.bfloat16)
    options = dict(global_scale=g, dequantized=dequantized)
    assert kvq.verify("nvfp4", *on_gpu(x, unpacked, scales), **{**options, "dequantized": dequantized.to(CUDA)}).exact
    dequantized[259, 63] = dequantized[259, 63] * 2 + 1
    dequantized[0, 0] = float("nan")
    report = kvq.verify("nvfp4", *on_gpu(x, unpacked, scales), **{**options, "dequantized": dequantized.to(CUDA)})
    cpu = kvq.verify("nvfp4", x, unpacked, scales, **options)
    assert report.dequantized_mismatches == cpu.dequantized_mismatches >= 1
    same_verdict(report, cpu)


def test_the_ports_global_scale_as_an_output():
    x = tensors(rows=256, seed=5)
    codes, scales, g = port_of(x, "nvfp4")
    wrong = np.nextafter(np.float32(g), np.float32(1))
    for value in (g, wrong):
        scale = torch.tensor([value], dtype=torch.float32)
        options = dict(global_scale_role="output")
        report = kvq.verify("nvfp4", *on_gpu(x, codes, scales), global_scale=scale.to(CUDA), **options)
        same_verdict(report, kvq.verify("nvfp4", x, codes, scales, global_scale=scale, **options))
        assert report.global_scale_matches == (value == g)


def test_streams():
    x = tensors(rows=256, seed=6)
    codes, scales, g = port_of(x, "nvfp4")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        xg, cg, sg = on_gpu(x, codes, scales)
        assert kvq.verify("nvfp4", xg, cg, sg).exact  # torch's current stream: `side`
    assert kvq.verify("nvfp4", xg, cg, sg, stream=side).exact
    assert kvq.verify("nvfp4", xg, cg, sg, stream=side.cuda_stream).exact
    with pytest.raises(TypeError, match="stream"):
        kvq.verify("nvfp4", xg, cg, sg, stream="side")


def test_bad_tensors_name_the_argument():
    x = tensors(rows=8, cols=32)
    codes, scales, g = port_of(x, "nvfp4")
    xg, cg, sg = on_gpu(x, codes, scales)
    with pytest.raises(TypeError, match="codes: a CPU tensor"):
        kvq.verify("nvfp4", xg, codes, sg)
    with pytest.raises(TypeError, match="x: a CPU tensor"):
        kvq.verify("nvfp4", x, cg, sg)
    with pytest.raises(TypeError, match="scales: .*contiguous"):
        kvq.verify("nvfp4", xg, cg, sg.t().contiguous().t())
    with pytest.raises(ValueError, match="codes: "):
        kvq.verify("nvfp4", xg, cg[:4], sg)


def test_assert_matches_and_identify_with_cuda_tensors():
    x = tensors(rows=64, cols=64, dtype=torch.float32, seed=8)
    codes, scales, g = port_of(x, "mxfp4-floor")
    xg, cg, sg = on_gpu(x, codes, scales)
    kvq.testing.assert_matches("mxfp4-floor", xg, cg, sg)
    with pytest.raises(AssertionError, match="follows mxfp4-floor"):
        kvq.testing.assert_matches("mxfp4-ceil", xg, cg, sg)
    assert "mxfp4-floor" in kvq.identify(xg, cg, sg).exact[0]


def test_each_call_counts_afresh():
    """The device counters are reused between calls: a call after a mismatch (or after an error)
    starts from zero, and a mismatch is counted once, not added to the last call's."""
    x = tensors(rows=512, seed=9)
    codes, scales, g = port_of(x, "nvfp4")
    wrong = codes.clone()
    wrong[100, 3] ^= 0x10
    xg, cg, sg, wg = on_gpu(x, codes, scales, wrong)
    for _ in range(2):
        assert kvq.verify("nvfp4", xg, wg, sg).code_mismatches == 1
        assert kvq.verify("nvfp4", xg, cg, sg).exact
    with pytest.raises(ValueError):
        kvq.verify("nvfp4", xg, wg[:8], sg)
    assert kvq.verify("nvfp4", xg, cg, sg).exact
    assert kvq.verify("nvfp4", xg, wg, sg, show=0).code_mismatches == 1
    assert kvq.verify("nvfp4", xg, cg, sg).exact


def test_empty_tensors_give_the_hosts_verdict():
    """Nothing to compare launches nothing: the report is the host's (zero counts, exact)."""
    x = tensors(rows=4)[:0]
    codes, scales, g = port_of(tensors(rows=4), "nvfp4")
    codes, scales = codes[:0], scales[:0]
    xg, cg, sg = on_gpu(x, codes, scales)
    for options in ({"global_scale": g}, {}):  # g given; g from the (empty) tensor's amax
        gpu = kvq.verify("nvfp4", xg, cg, sg, **options)
        same_verdict(gpu, kvq.verify("nvfp4", x, codes, scales, **options))
        assert gpu.exact and gpu.codes == 0
