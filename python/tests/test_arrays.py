"""Arrays of other frameworks than numpy and torch, through DLPack: JAX arrays on the CPU (read in
place) and on a CUDA device, CuPy arrays on their current stream. Each framework's test is skipped,
and counted, where it is not installed (or, for the device tests, where there is no GPU or no CUDA
build of kvq). The expected differences are planted by the test."""
import os

import numpy as np
import pytest

import kvq

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX beside torch: take memory as needed


def port(rows=256, cols=128, seed=11):
    """x (float32) and kvq's CPU NVFP4 quantize of it as a port's outputs, with one flipped nibble."""
    x = (np.random.default_rng(seed).standard_normal((rows, cols)) * 4).astype(np.float32)
    q = kvq.quantize(x, "nvfp4")
    wrong = q.codes.copy()
    wrong[rows - 1, 5] ^= 0x10
    return x, q.codes, wrong, q.scales, q.global_scale


def test_jax_arrays_on_the_cpu_are_read_in_place():
    jax = pytest.importorskip("jax")
    cpu = jax.devices("cpu")[0]
    x, codes, wrong, scales, g = port()
    xj, cj, wj, sj = (jax.device_put(a, cpu) for a in (x, codes, wrong, scales))
    assert kvq._kvq._read_in_place(xj) and kvq._kvq._read_in_place(cj)
    assert kvq.verify("nvfp4", xj, cj, sj, global_scale=g).exact
    report = kvq.verify("nvfp4", xj, wj, sj, global_scale=g)
    expected = kvq.verify("nvfp4", x, wrong, scales, global_scale=g)
    assert (report.code_mismatches, report.differences, str(report)) == (1, expected.differences, str(expected))


def cuda_ready():
    if not kvq.cuda_available():
        pytest.skip("this kvq was built without CUDA kernels, or no CUDA device")


def test_jax_arrays_on_a_gpu_are_compared_there():
    jax = pytest.importorskip("jax")
    cuda_ready()
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU backend here")
    x, codes, wrong, scales, g = port()
    xj, cj, wj, sj = (jax.device_put(a, gpu) for a in (x, codes, wrong, scales))
    exact = kvq.verify("nvfp4", xj, cj, sj, global_scale=g)
    assert exact.exact and "compared on cuda:" in str(exact)
    report = kvq.verify("nvfp4", xj, wj, sj, global_scale=g)
    expected = kvq.verify("nvfp4", x, wrong, scales, global_scale=g)
    assert report.code_mismatches == 1 and report.differences == expected.differences


def test_cupy_arrays_on_their_current_stream():
    cupy = pytest.importorskip("cupy")
    cuda_ready()
    x, codes, wrong, scales, g = port()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        xc, cc, wc, sc = (cupy.asarray(a) for a in (x, codes, wrong, scales))
        assert kvq.verify("nvfp4", xc, cc, sc, global_scale=g).exact  # on `stream`, cupy's current
        report = kvq.verify("nvfp4", xc, wc, sc, global_scale=g)
    assert report.code_mismatches == 1
    assert report.differences == kvq.verify("nvfp4", x, wrong, scales, global_scale=g).differences
    assert kvq.verify("nvfp4", xc, wc, sc, global_scale=g, stream=stream).code_mismatches == 1
