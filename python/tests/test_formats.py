"""kvq.encode / decode / pack_e2m1 against the format tables worked out by hand (docs/formats.md)."""
import math

import numpy as np
import pytest

import kvq

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def test_names():
    assert {"e2m1", "e4m3fn", "bf16"} <= set(kvq.formats())
    assert {"cuda-satfinite", "torch", "ml_dtypes"} <= set(kvq.conventions())
    assert {"nvfp4", "mxfp4-floor", "fp8-e4m3-tensor"} <= set(kvq.recipes())


def test_e2m1_codes_by_hand():
    x = np.array(E2M1 + [-v for v in E2M1], dtype=np.float32)
    codes = kvq.encode(x, "e2m1", convention="cuda-satfinite")
    assert codes.dtype == np.uint8
    assert codes.tolist() == list(range(8)) + list(range(8, 16))
    assert kvq.decode(codes, "e2m1").tolist() == x.tolist()
    # 0.25 is the midpoint of 0 and 0.5: to even (0), or away from zero (0.5) under "rna"
    assert kvq.encode(np.array([0.25], np.float32), "e2m1", convention="ieee").tolist() == [0]
    assert kvq.encode(np.array([0.25], np.float32), "e2m1", convention="ieee", rounding="rna").tolist() == [1]


def test_e4m3_conventions_by_hand():
    x = np.array([448.0, 480.0, -1.0, 2.0 ** -9], dtype=np.float32)
    # satfinite: 480 saturates to 448 (0x7E); IEEE semantics: past the largest finite value, NaN (0x7F)
    assert kvq.encode(x, "e4m3fn", convention="cuda-satfinite").tolist() == [0x7E, 0x7E, 0xB8, 0x01]
    assert kvq.encode(x, "e4m3fn", convention="ieee").tolist() == [0x7E, 0x7F, 0xB8, 0x01]
    values = kvq.decode(np.array([0x7E, 0x01, 0x7F], dtype=np.uint8), "e4m3fn")
    assert values[0] == 448.0 and values[1] == 2.0 ** -9 and math.isnan(values[2])


def test_bf16_ties_to_even_and_shapes_kept():
    x = np.array([[1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8]], dtype=np.float32)  # both BF16 ties
    codes = kvq.encode(x, "bf16")
    assert codes.dtype == np.uint16 and codes.shape == (1, 2)
    assert codes.tolist() == [[0x3F80, 0x3F82]]
    # a strided view is read where it lies
    assert kvq.encode(np.array(E2M1, np.float32)[::2], "e2m1", convention="ocp").tolist() == [0, 2, 4, 6]


def test_packing_by_hand():
    packed = kvq.pack_e2m1(np.array([[1, 2, 15, 0]], dtype=np.uint8))
    assert packed.tolist() == [[0x21, 0x0F]]
    assert kvq.unpack_e2m1(packed).tolist() == [[1, 2, 15, 0]]


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="format: unknown format 'e9m9'"):
        kvq.encode(np.zeros(2, np.float32), "e9m9")
    with pytest.raises(ValueError, match="convention: torch has no e2m1 cast"):
        kvq.encode(np.zeros(2, np.float32), "e2m1", convention="torch")
    with pytest.raises(TypeError, match="^x: int32"):
        kvq.encode(np.zeros(2, np.int32), "e4m3fn")
    with pytest.raises(TypeError, match="^codes: integer codes"):
        kvq.decode(np.zeros(2, np.float32), "e2m1")
    with pytest.raises(ValueError, match="codes: element 1 is not a e2m1 code"):
        kvq.decode(np.array([3, 16], np.uint8), "e2m1")
    with pytest.raises(ValueError, match="codes: the last dimension must be even"):
        kvq.pack_e2m1(np.zeros(3, np.uint8))
