"""kvq.quantize / dequantize on blocks worked out by hand (docs/recipes.md), and bad input."""
import numpy as np
import pytest

import kvq


def test_nvfp4_block_by_hand():
    # one row of 16: amax 2688 gives g = 2688 / (6 * 448) = 1; the block scale (2688 / 6) / 1 = 448
    # (E4M3 0x7E); 2688 / 448 = 6 is E2M1 code 7, the zeros code 0; packed low nibble first
    x = np.zeros((1, 16), dtype=np.float32)
    x[0, 0] = 2688.0
    q = kvq.quantize(x, "nvfp4")
    assert q.global_scale == 1.0
    assert q.codes.tolist() == [[0x07] + [0] * 7]
    assert q.scales.tolist() == [[0x7E]]
    assert kvq.dequantize(q).tolist() == x.tolist()


def test_fp8_tensor_per_tensor_scale_by_hand():
    # fp8-e4m3-tensor: g = amax / 448 = 2; 896 / 2 = 448 (0x7E), -3 / 2 = -1.5 (0xBC); no block scales
    x = np.array([[896.0, -3.0] + [0.0] * 14], dtype=np.float32)
    q = kvq.quantize(x, "fp8-e4m3-tensor")
    assert q.global_scale == 2.0 and q.scales is None
    assert q.codes[0, :2].tolist() == [0x7E, 0xBC]
    y = kvq.dequantize(q.codes, None, q.global_scale, recipe="fp8-e4m3-tensor", shape=x.shape, dtype="bfloat16")
    assert y.tolist() == x.tolist()


def test_quantize_then_verify_and_a_given_global_scale():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    q = kvq.quantize(x, "nvfp4", global_scale=0.001)
    assert q.global_scale == np.float32(0.001)
    report = kvq.verify("nvfp4", x, q.codes, q.scales, global_scale=q.global_scale)
    assert report.exact and bool(report) and "BIT-EXACT" in str(report)


def test_bad_arguments_name_the_argument():
    x = np.zeros((2, 16), np.float32)
    with pytest.raises(ValueError, match="recipe: unknown recipe 'nvfp5'"):
        kvq.quantize(x, "nvfp5")
    with pytest.raises(ValueError, match="^x: .*multiple of"):
        kvq.quantize(np.zeros((2, 17), np.float32), "nvfp4")
    with pytest.raises(TypeError, match="^x: float64"):
        kvq.quantize(np.zeros((2, 16)), "nvfp4")
    with pytest.raises(ValueError, match="global_scale: a finite decode scale > 0"):
        kvq.quantize(x, "nvfp4", global_scale=-1.0)
    with pytest.raises(ValueError, match="^codes: 3 bytes"):
        kvq.dequantize(np.zeros(3, np.uint8), np.zeros(2, np.uint8), 1.0, recipe="nvfp4", shape=(2, 16))
    with pytest.raises(TypeError, match="recipe= and shape="):
        kvq.dequantize(np.zeros(16, np.uint8))
