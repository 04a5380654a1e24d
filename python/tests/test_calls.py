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


def test_records_of_a_paged_store_and_a_rope_call():
    poison = {"key_cache": 0xA5, "value_cache": 0xA5}
    assert kvq.verify_call("paged-store", paged_call(), recipe="fp8-e4m3-tensor", poison=poison).differences == []
    report = kvq.verify_call("paged-store", paged_call(stray=True), recipe="fp8-e4m3-tensor", poison=poison)
    [stray] = report.differences
    assert stray["buffer"] == "value_cache" and stray["token"] == -1
    assert stray["before"] == stray["expected"] == 0xA5 and stray["actual"] != 0xA5
    tensors = dict(q_rope=np.array([[[1, 2]]], np.float32), k_rope=np.array([[[4, -1]]], np.float32),
                   cos_sin_cache=np.array([[0.5, 0.25]], np.float32), pos_ids=np.array([0], np.int32),
                   q_rope_out=np.array([[[0x00, 0x43]]], np.uint8), k_rope_out=np.array([[[0x41, 0x30]]], np.uint8))
    report = kvq.verify_call("rope-quantize", tensors, parameters={"is_neox": True, "quant_scale_q": 2.0,
                                                                    "quant_scale_kv": 1.0})
    [wrong] = report.differences
    assert (wrong["buffer"], wrong["offset"], wrong["expected"], wrong["actual"]) == ("q_rope_out", 1, 0x42, 0x43)
    assert (wrong["token"], wrong["head"], wrong["dim"], wrong["rotated"]) == (0, 0, 1, 1)
    assert (wrong["x"], wrong["partner"], wrong["cos"], wrong["sin"]) == (2.0, 1.0, 0.5, 0.25)


def test_records_of_an_mla_cache_and_a_workspace():
    from kvq_dump import mla_656_numpy_port, nvfp4_numpy_port, workspace_numpy_port
    rng = np.random.default_rng(7)
    k = (rng.standard_normal((3, 576)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # BF16 bits
    cache = np.full((4, 656), 0xA5, dtype=np.uint8)
    cache[[2, 0, 3]] = mla_656_numpy_port(k)
    cache[3, 600] ^= 0x01  # token 2's record at slot 3: a byte of its BF16 rope part
    tensors = dict(k=k.view(np.uint16), slot_mapping=np.array([2, 0, 3], np.int64), k_cache=cache.reshape(1, 4, 656))
    parameters = {"layout": "fp8_nope_with_block_scale_bf16_rope", "block_size": 4, "tile_recipe": "mla-fp8-tile128"}
    report = kvq.verify_call("mla-cache", tensors, parameters=parameters, poison={"k_cache": 0xA5}, dtypes={"k": "bfloat16"})
    [wrong] = report.differences
    assert (wrong["buffer"], wrong["offset"], wrong["token"], wrong["slot"], wrong["part"]) == ("k_cache", 3 * 656 + 600, 2, 3, "rope")
    assert wrong["actual"] == wrong["expected"] ^ 0x01

    blocks, bs, heads, dim = 1, 4, 1, 32
    x = np.clip(rng.standard_normal((2 * bs, heads * dim)), -2.9, 2.9).astype(np.float32)
    packed, scales, g = nvfp4_numpy_port(x)
    kv = np.zeros((blocks, 2, bs, heads, dim // 2 + dim // 16), dtype=np.uint8)
    for side in range(2):
        rows = slice(side * bs, (side + 1) * bs)
        kv[:, side] = np.concatenate([packed[rows].reshape(1, -1), scales[rows].reshape(1, -1)], axis=1).reshape(1, bs, heads, -1)
    k_ws, v_ws = workspace_numpy_port(kv, g, [np.float32(g), np.float32(g)], False)
    v_ws[2, 0, 5] ^= 0x01
    report = kvq.verify_call("workspace", dict(kv_cache=kv, block_tables=np.zeros((1, 1), np.int32),
                                               cu_seq_lens=np.array([0, bs], np.int32), k_scale=float(g), v_scale=float(g),
                                               k_workspace=k_ws, v_workspace=v_ws))
    [wrong] = report.differences
    assert (wrong["buffer"], wrong["row"], wrong["head"], wrong["dim"], wrong["request"]) == ("v_workspace", 2, 0, 5, 0)
