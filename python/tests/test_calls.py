"""kvq.verify_call / identify_call: the layout-aware kinds from tensors, through the command line's own
readers. The ports are kvq_dump.py's numpy ones (their own rounding and placement), and the same
ports with one bug; the hand-worked RoPE call of proptests/tests/test_ports_rope.cpp."""
import numpy as np
import pytest

import kvq
from kvq_dump import fp8_paged_numpy_port


def paged_call(stray=False):
    rng = np.random.default_rng(20261126)
    key = (rng.standard_normal((6, 2, 32)) * 3).astype(np.float32)
    value = (rng.standard_normal((6, 2, 32)) * 0.5).astype(np.float32)
    slots = np.array([5, 9, -1, 2, 11, 7], dtype=np.int64)  # slot 0 is no token's; token 2 is padding
    key_cache, value_cache = fp8_paged_numpy_port(key, value, slots, 0.5, 0.25, 3, 4, 0xA5, stray)
    return dict(key=key, value=value, slot_mapping=slots, key_cache=key_cache, value_cache=value_cache,
                k_scale=0.5, v_scale=0.25)


def test_paged_store_bit_exact_and_a_stray_write_located():
    poison = {"key_cache": 0xA5, "value_cache": 0xA5}
    report = kvq.verify_call("paged-store", paged_call(), recipe="fp8-e4m3-tensor", poison=poison)
    assert report.exact and "paged-store fp8-e4m3-tensor: BIT-EXACT" in str(report)
    report = kvq.verify_call("paged-store", paged_call(stray=True), recipe="fp8-e4m3-tensor", poison=poison)
    assert not report and "value_cache: 0 bytes differ in the slots the tokens address, 1 changed outside them" in str(report)
    found = kvq.identify_call("paged-store", paged_call(), poison=poison)
    assert "exact: this port follows fp8-e4m3-tensor\n" in str(found)


def test_rope_quantize_worked_out_by_hand():
    # docs: one token, rope_dim 2; cos_sin row (0.5, 0.25); Q (1, 2) -> (0, 1.25) * 2 = codes 0x00, 0x42;
    # K (4, -1) -> (2.25, 0.5) = codes 0x41, 0x30 (proptests/tests/test_ports_rope.cpp)
    tensors = dict(q_rope=np.array([[[1, 2]]], np.float32), k_rope=np.array([[[4, -1]]], np.float32),
                   cos_sin_cache=np.array([[0.5, 0.25]], np.float32), pos_ids=np.array([0], np.int32),
                   q_rope_out=np.array([[[0x00, 0x42]]], np.uint8), k_rope_out=np.array([[[0x41, 0x30]]], np.uint8))
    parameters = {"is_neox": True, "quant_scale_q": 2.0, "quant_scale_kv": 1.0}
    assert kvq.verify_call("rope-quantize", tensors, parameters=parameters).exact
    tensors["q_rope_out"] = np.array([[[0x00, 0x43]]], np.uint8)
    report = kvq.verify_call("rope-quantize", tensors, parameters=parameters)
    assert "q_rope_out byte 1: token 0, head 0, dim 1" in str(report)


def test_bad_calls_raise_naming_the_argument():
    with pytest.raises(ValueError, match="recipe: a paged-store call is checked against the recipe"):
        kvq.verify_call("paged-store", paged_call())
    call = paged_call()
    call["slot_mapping"] = call["slot_mapping"].astype(np.float32)
    with pytest.raises(ValueError, match="slot_mapping: argument slot_mapping holds <f4"):
        kvq.verify_call("paged-store", call, recipe="fp8-e4m3-tensor")
    with pytest.raises(ValueError, match="poison: key_buffer is not one of the tensors passed"):
        kvq.verify_call("paged-store", paged_call(), recipe="fp8-e4m3-tensor", poison={"key_buffer": 0})
    with pytest.raises(ValueError, match="kind"):
        kvq.verify_call("paged-stores", paged_call(), recipe="fp8-e4m3-tensor")
