"""kvq.verify / identify / testing.assert_matches on an independent port: kvq_dump.py's numpy NVFP4
quantizer (its own rounding, written in numpy), and the same port with ties rounded away from zero."""
import numpy as np
import pytest

import kvq
import kvq.testing
from kvq_dump import nvfp4_numpy_port


def port(x, ties_up=False):
    codes, scales, g = nvfp4_numpy_port(x, ties_up)
    return codes, scales, g


def test_numpy_port_is_bit_exact():
    x = (np.random.default_rng(1).standard_normal((8, 64)) * 3).astype(np.float32)
    codes, scales, g = port(x)
    report = kvq.testing.assert_matches("nvfp4", x, codes, scales, global_scale=g)
    assert report.code_mismatches == 0 and report.codes == 8 * 64


def tie_tensor(seed):
    """Random values, one 2688 (so g = 2688 / (6 * 448) = 1 exactly) and a block of max 6 (scale 1)
    holding E2M1 midpoints: each element's scaled value is itself, a tie."""
    x = (np.random.default_rng(seed).standard_normal((8, 64)) * 3).astype(np.float32)
    x[-1, 0] = 2688.0
    x[0, :16] = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0] * 2
    return x


def test_ties_up_port_fails_with_the_report_and_the_variant():
    x = tie_tensor(2)
    codes, scales, g = port(x, ties_up=True)
    with pytest.raises(AssertionError) as failure:
        kvq.testing.assert_matches("nvfp4", x, codes, scales, global_scale=g)
    message = str(failure.value)
    assert "kvq verify nvfp4: MISMATCH" in message
    assert "first code differences" in message
    assert "kvq identify: the port follows nvfp4 except ties round up (away from zero)" in message


def test_a_changed_last_block_scale_is_located():
    x = (np.random.default_rng(3).standard_normal((4, 64))).astype(np.float32)
    codes, scales, g = port(x)
    scales = scales.copy()
    scales[-1, -1] ^= 0x01
    report = kvq.verify("nvfp4", x, codes, scales, global_scale=g)
    assert not report.exact and report.scale_mismatches == 1
    first = [d for d in report.differences if d["kind"] == "scale"][0]
    assert (first["row"], first["block"]) == (3, 3)
    found = kvq.identify(x, codes, scales, global_scale=g)
    assert found.exact == [] and found.nearest and "mismatches" in str(found)


def test_identify_names_the_recipe():
    x = (np.random.default_rng(4).standard_normal((4, 32))).astype(np.float32)
    codes, scales, g = port(x)
    found = kvq.identify(x, codes, scales, global_scale=g, changes=0)
    assert "nvfp4" in found.exact and found.tried > 1


def test_bad_arguments_name_the_argument():
    x = np.zeros((2, 32), np.float32)
    codes, scales, g = port(x)
    with pytest.raises(ValueError, match="^codes: 3 bytes, expected 32"):
        kvq.verify("nvfp4", x, np.zeros(3, np.uint8), scales, global_scale=1.0)
    with pytest.raises(ValueError, match="global_scale_role: 'input' or 'output'"):
        kvq.verify("nvfp4", x, codes, scales, global_scale=1.0, global_scale_role="in")
    with pytest.raises(TypeError, match="^codes: float32; give one byte an element"):
        kvq.verify("nvfp4", x, np.zeros(32, np.float32), scales)
    with pytest.raises(ValueError, match="nibble_order"):
        kvq.verify("nvfp4", x, codes, scales, nibble_order="middle")
    with pytest.raises(TypeError, match="^global_scale: a float or a one-element tensor, got str"):
        kvq.verify("nvfp4", x, codes, scales, global_scale="1.0")
    with pytest.raises(ValueError, match="^global_scale: one value, got 2"):
        kvq.verify("nvfp4", x, codes, scales, global_scale=np.ones(2, np.float32))
    # empty and reversed (negative-stride) views are read where they lie
    assert kvq.encode(np.zeros((0, 4), np.float32), "e4m3fn").shape == (0, 4)
    assert kvq.encode(np.array([1.0, 2.0], np.float32)[::-1], "e4m3fn", convention="cuda-satfinite").tolist() == [0x40, 0x38]


def test_cpu_tensors_are_read_in_place_unless_they_must_be_gathered():
    """A C-order, aligned CPU array is compared where it lies (no copy); transposed, strided and
    unaligned views are gathered into C order first, with the same verdict."""
    x = (np.random.default_rng(5).standard_normal((8, 64)) * 3).astype(np.float32)
    codes, scales, g = port(x)
    assert kvq._kvq._read_in_place(x) and kvq._kvq._read_in_place(codes) and kvq._kvq._read_in_place(x[2:5])
    transposed = np.ascontiguousarray(x.T).T  # the same values, column-major
    strided = np.repeat(x, 2, axis=1)[:, ::2]
    raw = np.zeros(x.size * 4 + 1, np.uint8)
    unaligned = raw[1:].view(np.float32).reshape(x.shape)
    unaligned[...] = x
    assert not kvq._kvq._read_in_place(transposed) and not kvq._kvq._read_in_place(strided)
    assert not unaligned.flags.aligned and not kvq._kvq._read_in_place(unaligned)
    wrong = codes.copy()
    wrong[3, 7] ^= 0x01
    expected = kvq.verify("nvfp4", x, wrong, scales, global_scale=g)
    assert expected.code_mismatches == 1
    for view in (transposed, strided, unaligned):
        assert np.array_equal(view, x)
        report = kvq.verify("nvfp4", view, wrong, scales, global_scale=g)
        assert (report.code_mismatches, report.differences) == (1, expected.differences)
        assert str(report) == str(expected)
