"""Torch CPU tensors through DLPack (BF16 included); skipped, and counted, where torch is absent."""
import numpy as np
import pytest

import kvq
import kvq.testing

torch = pytest.importorskip("torch")


def nvfp4_torch_port(x, ties_up=False):
    """A small PyTorch NVFP4 quantizer (docs/ports.md's worked example): g = amax / 2688, block scale
    E4M3(bmax / 6 / g), elements E2M1(x / (scale * g)), ties to even (or away from zero)."""
    x = x.float()
    rows, cols = x.shape
    g = x.abs().amax() / 2688.0
    blocks = x.view(rows, cols // 16, 16)
    s = (blocks.abs().amax(-1) / 6.0 / g).to(torch.float8_e4m3fn)
    d = (s.float() * g).unsqueeze(-1)
    v = torch.where(d == 0, blocks * 0, blocks / torch.where(d == 0, torch.ones_like(d), d))
    mag = v.abs().clamp(max=6.0).unsqueeze(-1)
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    down, up = (mag > mids).sum(-1), (mag >= mids).sum(-1)  # at a midpoint they differ by one
    code = up if ties_up else torch.where((down != up) & (down % 2 == 1), up, down)
    code = (code | torch.where(torch.signbit(v), 8, 0)).to(torch.uint8).view(rows, cols)
    packed = code[:, 0::2] | (code[:, 1::2] << 4)
    return packed, s.view(torch.uint8), g


def tie_tensor(seed):
    """Random values, one 2688 (g = 1) and a block of max 6 (scale 1) holding E2M1 midpoints."""
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(seed)) * 3
    x[-1, 0] = 2688.0
    x[0, :16] = torch.tensor([6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0] * 2)
    return x


def test_torch_bf16_tensors():
    x = (torch.randn(8, 64, generator=torch.Generator().manual_seed(5)) * 4).to(torch.bfloat16)
    q = kvq.quantize(x, "nvfp4")
    assert kvq.verify("nvfp4", x, q.codes, q.scales, global_scale=q.global_scale).exact


def test_pytorch_port_worked_example():
    x = tie_tensor(6)
    codes, scales, g = nvfp4_torch_port(x)
    kvq.testing.assert_matches("nvfp4", x, codes, scales, global_scale=g)
    codes, scales, g = nvfp4_torch_port(x, ties_up=True)
    with pytest.raises(AssertionError, match="ties round up"):
        kvq.testing.assert_matches("nvfp4", x, codes, scales, global_scale=g)


def test_cuda_tensors_without_kvqs_cuda_kernels_are_refused_naming_x():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if kvq.cuda_available():
        pytest.skip("this kvq compares CUDA tensors (python/tests/test_cuda.py)")
    x = torch.ones(2, 16, device="cuda")
    q = kvq.quantize(x, "nvfp4")  # copied to the host
    with pytest.raises(TypeError, match="^x: a CUDA tensor"):
        kvq.verify("nvfp4", x, torch.from_numpy(q.codes).cuda(), torch.from_numpy(q.scales).cuda())
