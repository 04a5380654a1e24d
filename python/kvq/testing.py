"""Assertions for a port's tests (pytest, unittest): kvq.testing.assert_matches."""
from ._kvq import identify
from .streams import verify


def assert_matches(recipe, x, codes, scales=None, **kwargs):
    """Raise AssertionError unless the port's codes (and scales, global scale, dequantized values)
    are bit-exact for `recipe` on x. The message is kvq verify's report (the first differences with
    input bits, expected and actual codes and values) and the variant kvq identify finds nearest.
    Keyword arguments are kvq.verify's (global_scale, global_scale_role, dequantized, ...)."""
    report = verify(recipe, x, codes, scales, **kwargs)
    if report.exact:
        return report
    kwargs.pop("show", None)
    kwargs.pop("stream", None)  # kvq identify runs on the host (a CUDA tensor is copied there)
    found = identify(x, codes, scales, **kwargs)
    if found.exact:
        nearest = "kvq identify: the port follows " + found.exact[0]
    elif found.nearest:
        nearest = "kvq identify: nothing reproduces every output; nearest " + found.nearest[0][0]
    else:
        nearest = "kvq identify: no recipe fits the port's layout"
    raise AssertionError(str(report) + nearest)
