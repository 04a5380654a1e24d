"""kvq.verify of CUDA tensors runs on a CUDA stream: the one given, else the current stream of the
framework the tensor comes from (torch, CuPy), else the legacy default stream (docs/python.md)."""
from . import _kvq


_torch_parts = None  # (torch.utils.dlpack.to_dlpack, the current stream's handle of a device index)


def _torch():
    """torch's exporter and current-stream lookup, found once (the first torch tensor imported torch)."""
    global _torch_parts
    if _torch_parts is None:
        import torch
        import torch.utils.dlpack
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # the handle without a Stream object
        _torch_parts = (torch.utils.dlpack.to_dlpack, raw or (lambda index: torch.cuda.current_stream(index).cuda_stream))
    return _torch_parts


def stream_handle(x, stream):
    """The cudaStream_t (an integer) that kvq's kernels run on for tensor x."""
    if stream is None:
        if _torch_cuda(x):
            return _torch()[1](x.get_device())
        if type(x).__module__.startswith("cupy"):
            import cupy
            return cupy.cuda.get_current_stream().ptr
        return 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise ValueError("stream: a cudaStream_t handle is >= 0, got %d" % stream)
        return stream
    for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int):
            return handle
    raise TypeError("stream: an integer cudaStream_t, a torch.cuda.Stream or a cupy.cuda.Stream, got %s"
                    % type(stream).__name__)


def _on_stream(tensor, handle):
    """A CUDA tensor exported for use on stream `handle` (DLPack: the producer orders its work before
    that stream's; the legacy default stream is 1 there), else the tensor itself."""
    device = getattr(tensor, "__dlpack_device__", None)
    if device is None or device()[0] != 2:  # kDLCUDA
        return tensor
    try:
        return tensor.__dlpack__(stream=handle if handle else 1)
    except TypeError:  # a producer without the stream argument
        return tensor


_is_torch_type = {}  # type -> whether torch defines it (asked once a type: a call passes three tensors)


def _torch_cuda(tensor):
    kind = type(tensor)
    is_torch = _is_torch_type.get(kind)
    if is_torch is None:
        is_torch = _is_torch_type[kind] = kind.__module__.startswith("torch")
    return is_torch and getattr(tensor, "is_cuda", False)


def _on_torch_stream(tensor):
    """A torch CUDA tensor exported for kvq's kernels on torch's current stream: torch's own work on it
    is queued on that stream before them, so no event is needed (torch's __dlpack__ costs ~20 us a
    tensor for that check; to_dlpack under 1 us)."""
    return _torch()[0](tensor) if _torch_cuda(tensor) else tensor


def verify(recipe, x, codes, scales=None, *, stream=None, **options):
    """A port's outputs against the recipe's model, bit for bit (kvq verify). CUDA tensors are
    compared on their GPU by kvq's kernels, on `stream` (default: the tensor's current stream);
    only counts and the rows of the first differences come back to the host."""
    handle = stream_handle(x, stream)
    if stream is None and _torch_cuda(x):  # the usual pytest call: torch tensors on torch's stream
        export = _on_torch_stream
    else:
        export = lambda t: _on_stream(t, handle)  # noqa: E731
    for role in ("dequantized", "global_scale"):
        if options.get(role) is not None:
            options[role] = export(options[role])
    return _kvq.verify(recipe, export(x), export(codes), None if scales is None else export(scales), stream=handle,
                       **options)
