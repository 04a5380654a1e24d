"""What every conformance producer shares: the context, the file-by-file loader, the producer record.

An engine that will not import whole (SGLang, vLLM) is loaded one file at a time from its wheel:
`load_file` executes that file as a module, with its package parents made empty namespace modules
and any import the file makes that is not arithmetic (platform checks, logging, registries)
replaced by a stub the producer names. Stubs never replace arithmetic: a producer lists its stubs
in `Producer.stubs` so the results say which were used.
"""
import importlib.util
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Callable, List


@dataclass
class Context:
    torch: object          # the torch module
    device: str            # "cuda" (or "cpu" where a producer can run there)
    root: str              # folder holding the engines' files as laid out in their wheels
    versions: dict = field(default_factory=dict)  # package -> version, from the staged METADATA

    def path(self, relpath):
        return os.path.join(self.root, relpath)


@dataclass
class Producer:
    name: str              # e.g. "sglang-nvfp4-kv-quantize"
    library: str           # package name as on PyPI, e.g. "sglang"
    function: str          # where the code is: "sglang/srt/layers/quantization/kvfp4_tensor.py:KVFP4QuantizeUtil.batched_quantize"
    run: Callable          # run(ctx, x) -> dict or list of dicts (see run_conformance.py)
    files: List[str] = field(default_factory=list)   # files (relative to the wheel root) the producer loads
    stubs: List[str] = field(default_factory=list)   # modules replaced by stubs, each with what it stands for
    dtypes: tuple = ("bfloat16", "float16", "float32")  # input dtypes the function takes


def module(name, **attrs):
    """A stub module `name` with the given attributes, registered in sys.modules (parents too)."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        if parent not in sys.modules:
            m = types.ModuleType(parent)
            m.__path__ = []
            sys.modules[parent] = m
    m = sys.modules.get(name) or types.ModuleType(name)
    m.__path__ = getattr(m, "__path__", [])
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m
    if len(parts) > 1:
        setattr(sys.modules[".".join(parts[:-1])], parts[-1], m)
    return m


def load_file(ctx, relpath, name=None):
    """Executes ctx.root/relpath as module `name` (default: its dotted path) and returns it.
    Parent packages that are not yet in sys.modules become empty namespace modules, so the file's
    own package __init__ (which usually imports the whole engine) never runs."""
    name = name or relpath[:-3].replace("/", ".")
    if name in sys.modules and getattr(sys.modules[name], "__file__", None):
        return sys.modules[name]
    parts = name.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        if parent not in sys.modules:
            m = types.ModuleType(parent)
            m.__path__ = [os.path.join(ctx.root, *parts[:i])]
            sys.modules[parent] = m
    spec = importlib.util.spec_from_file_location(name, ctx.path(relpath))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    if len(parts) > 1:
        setattr(sys.modules[".".join(parts[:-1])], parts[-1], mod)
    return mod
