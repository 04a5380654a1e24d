"""The layout-aware kinds from tensors (docs/python.md "Whole calls"): a paged store, a fused RoPE call,
an MLA cache writer, requantizer or dequantizer, a prefill workspace, checked by the command line's
own readers and verdicts (`kvq verify` / `kvq identify`, docs/ports.md), the manifest built from the
arguments instead of read from a file."""
import json
import struct

from ._kvq import _port_call, _tensor_type


class CallReport:
    """kvq.verify_call's or kvq.identify_call's verdict: `exact` (also the truth value), `status` (the
    command's exit status, 0 or 1), `text` (its report, also str()) and, for verify_call,
    `differences`: the report's first differences as dicts (docs/python.md "Records")."""

    def __init__(self, status, text, differences=()):
        self.status, self.text, self.exact = status, text, status == 0
        self.differences = list(differences)

    def __bool__(self):
        return self.exact

    def __str__(self):
        return self.text

    def __repr__(self):
        return "<kvq.CallReport %s>" % ("exact" if self.exact else "mismatch")


# The parameters that are float32 values (docs/ports.md): passed as their bits, so any Python float
# is taken as the float32 nearest to it (what the port's float32 argument holds).
_FP32_PARAMETERS = ("quant_scale_q", "quant_scale_kv", "k_workspace_scale", "v_workspace_scale")


def _bits(value):
    return "0x%08x" % struct.unpack("<I", struct.pack("<f", float(value)))[0]


def _manifest(kind, tensors, parameters, layout, poison, before, recipe, dtypes):
    specs, arrays = {}, {}
    for role, value in tensors.items():
        if value is None:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            specs[role] = {"bits": _bits(value)}  # a float32 scalar (k_scale, v_scale, ...)
            continue
        descr, dtype = _tensor_type(value, role)
        specs[role] = {"file": role}
        if dtype:
            specs[role]["dtype"] = dtype
        arrays[role] = value
    for role, name in (dtypes or {}).items():
        if role not in specs or "file" not in specs[role]:
            raise ValueError("dtypes: %s is not one of the tensors passed" % role)
        specs[role]["dtype"] = name  # 16-bit bits (uint16) read as bfloat16 or float16
    for role, byte in (poison or {}).items():
        if role not in specs:
            raise ValueError("poison: %s is not one of the tensors passed" % role)
        specs[role]["poison"] = "0x%02X" % int(byte)
    for role, value in (before or {}).items():
        if role not in specs:
            raise ValueError("before: %s is not one of the tensors passed" % role)
        specs[role]["before"] = {"file": role + ".before"}
        arrays[role + ".before"] = value
    manifest = {"kvq_port_manifest": 1, "kind": kind, "tensors": specs}
    if parameters:
        manifest["parameters"] = {k: (_bits(v) if isinstance(v, float) and k in _FP32_PARAMETERS else v)
                                  for k, v in parameters.items()}
    if layout:
        manifest["layout"] = layout
    if recipe:
        manifest["recipe"] = recipe
    return json.dumps(manifest), arrays


def _call(verify, what, kind, tensors, parameters, layout, poison, before, recipe, show, changes, dtypes):
    text, arrays = _manifest(kind, tensors, parameters, layout, poison, before, recipe, dtypes)
    status, out, err, records = _port_call(verify, what, text, arrays, show, changes)
    if status == 2:
        raise ValueError(err.strip().replace("kvq verify: ", "").replace("kvq identify: ", ""))
    return CallReport(status, out, records)


def verify_call(kind, tensors, *, recipe=None, parameters=None, layout=None, poison=None, before=None, show=8,
                dtypes=None):
    """`kvq verify` of one call of a port: kind "paged-store", "rope-quantize", "rope-append",
    "mla-cache", "mla-requant", "mla-dequant", "workspace" or "quantize"; tensors maps the kind's roles
    (the engine's argument names, docs/ports.md) to tensors, float scalars for the float32 roles;
    recipe: the recipe the port claims (paged-store, quantize; an MLA cache's tile rule); parameters
    and layout: the manifest's; poison / before: what each output held before the call (a byte, or a
    tensor); dtypes: a role's 16-bit bits (uint16) named "bfloat16" or "float16"."""
    what = recipe or kind
    if kind in ("paged-store", "quantize") and not recipe:
        raise ValueError("recipe: a %s call is checked against the recipe the port claims" % kind)
    return _call(True, what, kind, tensors, parameters, layout, poison, before, None, show, 2, dtypes)


def identify_call(kind, tensors, *, parameters=None, layout=None, poison=None, before=None, changes=1, show=5,
                  dtypes=None):
    """`kvq identify` of one call of a port (the arguments as kvq.verify_call's)."""
    return _call(False, "", kind, tensors, parameters, layout, poison, before, None, show, changes, dtypes)
