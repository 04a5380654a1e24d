"""kvq: bit-exact low-precision formats, KV-cache quantization recipes and port verification.

The functions are kvq's C++ library (formats, recipes, CPU kernels, `kvq verify` / `kvq identify`)
bound with nanobind; docs/python.md says what each takes and returns. Tensors: numpy arrays, torch
tensors, anything with DLPack or the buffer protocol. kvq.verify compares CUDA tensors on their GPU;
the other functions copy a CUDA tensor to the host.
"""
from ._kvq import (Identification, Quantized, Report, _dequantize, conventions, cuda_available, decode, encode, formats, identify,
                   pack_e2m1, quantize, recipes, unpack_e2m1)
from .streams import verify
from . import testing
from .calls import CallReport, identify_call, verify_call

__all__ = ["formats", "conventions", "recipes", "encode", "decode", "pack_e2m1", "unpack_e2m1", "quantize",
           "dequantize", "verify", "identify", "verify_call", "identify_call", "Quantized", "Report", "Identification",
           "CallReport", "testing", "cuda_available"]


def dequantize(q, scales=None, global_scale=None, *, recipe=None, shape=None, dtype="float32", block=None):
    """Values of quantized codes with kvq's CPU kernel: `dequantize(kvq.quantize(x, "nvfp4"))`, or
    `dequantize(codes, scales, g, recipe="nvfp4", shape=x.shape)`. dtype: "float32", "float16" or
    "bfloat16" (BF16 values returned as float32, exactly)."""
    if isinstance(q, Quantized):
        if scales is not None or global_scale is not None or recipe is not None or shape is not None:
            raise TypeError("dequantize: a Quantized carries its scales, global scale, recipe and shape; pass no others")
        return _dequantize(q.recipe, q.codes, q.scales, q.global_scale, q.shape, dtype, block)
    if recipe is None or shape is None:
        raise TypeError("dequantize: codes need recipe= and shape= (or pass a kvq.Quantized)")
    return _dequantize(recipe, q, scales, 1.0 if global_scale is None else float(global_scale), list(shape), dtype, block)
