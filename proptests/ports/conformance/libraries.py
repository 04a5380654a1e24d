"""Conformance producers for the quantization libraries that define kvq's recipes.

torchao 0.18.0 (installed from its wheel: pure-Python paths only, its .so is not used), and, loaded
file by file from the staged tree (common.load_file), the Four Over Six package (fouroversix 1.0.5),
NVIDIA ModelOpt 0.47.0 and compressed-tensors 0.20.0. /work/notes/libraries.md walks through each
function's arithmetic and how it differs from the kvq recipe named here.

A producer whose library function has no kvq recipe returns recipe=None (kvq identify only).
"""
import ast
import enum
import sys

try:
    from .common import Producer, load_file, module
except ImportError:
    from common import Producer, load_file, module

FOUROVERSIX = "fouroversix-1.0.5/src/fouroversix/"
MODELOPT = "modelopt/torch/quantization/"
CT = "compressed_tensors/"


def _need(cond, msg):
    if not cond:
        raise RuntimeError(msg)


# --- torchao ----------------------------------------------------------------------------------

MX_MODES = ("FLOOR", "CEIL", "EVEN", "RCEIL")
MXFP4_RECIPES = {"FLOOR": "mxfp4-floor", "CEIL": "mxfp4-ceil", "EVEN": "mxfp4-even", "RCEIL": "mxfp4-rceil"}
# torchao's four scale modes with FP8 elements: mxfp8-e4m3-floor / -ceil / -even / -rceil.
MXFP8_RECIPES = {m: "mxfp8-e4m3-" + m.lower() for m in ("FLOOR", "CEIL", "EVEN", "RCEIL")}


def _torchao_mx(elem, mode, compiled):
    def run(ctx, x):
        torch = ctx.torch
        from torchao.prototype.mx_formats.config import ScaleCalculationMode
        from torchao.prototype.mx_formats.mx_tensor import to_mx

        elem_dtype = torch.float4_e2m1fn_x2 if elem == "fp4" else torch.float8_e4m3fn
        scaling_mode = getattr(ScaleCalculationMode, mode)
        f = lambda t: to_mx(t, elem_dtype, 32, scaling_mode, False)  # noqa: E731
        if compiled:
            torch._dynamo.reset()
            f = torch.compile(f)
        scale, data = f(x.contiguous())
        recipe = (MXFP4_RECIPES if elem == "fp4" else MXFP8_RECIPES).get(mode)
        return dict(recipe=recipe, label=("compile" if compiled else "eager") + "-" + mode.lower(), x=x,
                    codes=data, block_scales=scale.contiguous(), block=32, nibble_order="low_first")
    return run


def _torchao_nvfp4(compiled):
    def run(ctx, x):
        torch = ctx.torch
        from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale

        g = per_tensor_amax_to_scale(torch.amax(torch.abs(x)))
        f = nvfp4_quantize
        if compiled:
            torch._dynamo.reset()
            f = torch.compile(nvfp4_quantize)
        scales, data = f(x.contiguous(), 16, g)
        return dict(recipe="nvfp4-torchao", label="compile" if compiled else "eager", x=x, codes=data,
                    block_scales=scales.contiguous(), global_scale=g.float(), global_scale_role="input",
                    global_scale_convention="decode", block=16, nibble_order="low_first")
    return run


def torchao_producers():
    out = []
    for elem in ("fp4", "fp8"):
        for mode in MX_MODES:
            out.append(Producer(
                name="torchao-mx-%s-%s" % (elem, mode.lower()), library="torchao",
                function="torchao/prototype/mx_formats/mx_tensor.py:to_mx (scaling_mode=%s, eager)" % mode,
                run=_torchao_mx(elem, mode, False), dtypes=("bfloat16", "float32")))
            if mode != "EVEN":  # torchao: EVEN does not work with torch.compile (config.py)
                out.append(Producer(
                    name="torchao-mx-%s-%s-compile" % (elem, mode.lower()), library="torchao",
                    function="torchao/prototype/mx_formats/mx_tensor.py:to_mx (scaling_mode=%s, torch.compile)" % mode,
                    run=_torchao_mx(elem, mode, True), dtypes=("bfloat16", "float32")))
    out.append(Producer(
        name="torchao-nvfp4", library="torchao",
        function="torchao/prototype/mx_formats/nvfp4_tensor.py:nvfp4_quantize + per_tensor_amax_to_scale (eager)",
        run=_torchao_nvfp4(False), dtypes=("bfloat16", "float32")))
    out.append(Producer(
        name="torchao-nvfp4-compile", library="torchao",
        function="torchao/prototype/mx_formats/nvfp4_tensor.py:nvfp4_quantize (torch.compile)",
        run=_torchao_nvfp4(True), dtypes=("bfloat16", "float32")))
    return out


# --- fouroversix (PyTorch reference) ----------------------------------------------------------

FOUROVERSIX_FILES = [FOUROVERSIX + "utils.py", FOUROVERSIX + "quantize/utils.py",
                     FOUROVERSIX + "quantize/pytorch/reference.py"]


def _load_fouroversix(ctx):
    load_file(ctx, FOUROVERSIX_FILES[0], "fouroversix.utils")
    load_file(ctx, FOUROVERSIX_FILES[1], "fouroversix.quantize.utils")
    ref = load_file(ctx, FOUROVERSIX_FILES[2], "fouroversix.quantize.pytorch.reference")
    _need(hasattr(ref, "quantize_to_fp4"), "fouroversix reference.py has no quantize_to_fp4")
    return sys.modules["fouroversix.utils"], ref


def _fouroversix(rule_name):
    def run(ctx, x):
        torch = ctx.torch
        fu, ref = _load_fouroversix(ctx)
        rule = getattr(fu.ScaleRule, rule_name)
        packed, scales, amax = ref.quantize_to_fp4(
            x.contiguous(), fp4_format=fu.DataType.nvfp4, round_style=fu.RoundStyle.nearest, scale_rule=rule,
            pack_values=True, use_blackwell_scale_layout=False)
        rows, cols = x.shape
        _need(packed.shape == (rows, cols // 2), "fouroversix codes shape %s" % (tuple(packed.shape),))
        scales = scales.reshape(rows, cols // 16)
        # The package returns amax itself, the tensor parameter of its scales (kvq: convention "amax").
        recipe = "nvfp4-4over6" if rule_name == "mse" else ("nvfp4-4over6-static6" if rule_name == "static_6" else None)
        return dict(recipe=recipe, label="scale_rule=" + rule_name, x=x, codes=packed, block_scales=scales,
                    global_scale=amax.float(), global_scale_role="output", global_scale_convention="amax",
                    block=16, nibble_order="low_first")
    return run


def fouroversix_producers():
    fn = "src/fouroversix/quantize/pytorch/reference.py:quantize_to_fp4"
    return [
        Producer(name="fouroversix-reference", library="fouroversix", function=fn + " (nvfp4, scale_rule=mse)",
                 run=_fouroversix("mse"), files=list(FOUROVERSIX_FILES)),
        Producer(name="fouroversix-reference-static6", library="fouroversix",
                 function=fn + " (nvfp4, scale_rule=static_6)", run=_fouroversix("static_6"),
                 files=list(FOUROVERSIX_FILES)),
    ]


# --- NVIDIA ModelOpt --------------------------------------------------------------------------

MODELOPT_FILES = [MODELOPT + "utils/core_utils.py", MODELOPT + "utils/numeric_utils.py",
                  MODELOPT + "backends/utils.py", MODELOPT + "qtensor/base_qtensor.py",
                  MODELOPT + "qtensor/nvfp4_tensor.py", MODELOPT + "qtensor/mxfp4_tensor.py"]
MODELOPT_STUBS = [
    "modelopt.torch.quantization.config (pydantic config: QuantizerCfgEntry, a type annotation only)",
    "modelopt.torch.utils (get_unwrapped_name, print_rank_0: naming / logging)",
    "modelopt.torch.utils.network (temporarily_remove_accelerate_hook: accelerate hooks)",
    "modelopt.torch.quantization.utils (package __init__ not run: core_utils' own functions re-exported)",
]


def _load_modelopt(ctx):
    if "modelopt.torch.quantization.qtensor.mxfp4_tensor" in sys.modules:
        return (sys.modules["modelopt.torch.quantization.qtensor.nvfp4_tensor"],
                sys.modules["modelopt.torch.quantization.qtensor.mxfp4_tensor"])
    module("modelopt.torch.quantization.config", QuantizerCfgEntry=dict)
    module("modelopt.torch.utils", get_unwrapped_name=lambda name, model=None: name,
           print_rank_0=lambda *a, **k: None)
    module("modelopt.torch.utils.network", temporarily_remove_accelerate_hook=lambda *a, **k: None)
    core = load_file(ctx, MODELOPT_FILES[0])
    pkg = sys.modules["modelopt.torch.quantization.utils"]
    for name in ("reduce_amax", "reduce_block_amax", "reduce_block_padding", "fsdp2_aware_weight_update",
                 "patch_fsdp_mp_dtypes"):
        _need(hasattr(core, name), "modelopt core_utils.py has no " + name)
        setattr(pkg, name, getattr(core, name))
    for rel in MODELOPT_FILES[1:4]:
        load_file(ctx, rel)
    nv = load_file(ctx, MODELOPT_FILES[4])
    mx = load_file(ctx, MODELOPT_FILES[5])
    return nv, mx


def _modelopt_nvfp4(ctx, x):
    nv, _ = _load_modelopt(ctx)
    q, sf, g = nv.NVFP4QTensor.quantize(x.contiguous(), 16)
    return dict(recipe="nvfp4-modelopt", label="dynamic (weights_scaling_factor computed)", x=x, codes=q._quantized_data,
                block_scales=sf.contiguous(), global_scale=g.float(), global_scale_role="output",
                global_scale_convention="decode", block=16, nibble_order="low_first")


def _modelopt_mxfp4(ctx, x):
    _, mx = _load_modelopt(ctx)
    rows, cols = x.shape
    q, e8m0 = mx.MXFP4QTensor.quantize(x.contiguous(), 32)
    return dict(recipe="mxfp4-modelopt", label="block 32", x=x, codes=q._quantized_data.reshape(rows, cols // 2),
                block_scales=e8m0.reshape(rows, cols // 32).contiguous(), block=32, nibble_order="low_first")


def modelopt_producers():
    return [
        Producer(name="modelopt-nvfp4", library="nvidia-modelopt",
                 function="modelopt/torch/quantization/qtensor/nvfp4_tensor.py:NVFP4QTensor.quantize",
                 run=_modelopt_nvfp4, files=list(MODELOPT_FILES), stubs=list(MODELOPT_STUBS)),
        Producer(name="modelopt-mxfp4", library="nvidia-modelopt",
                 function="modelopt/torch/quantization/qtensor/mxfp4_tensor.py:MXFP4QTensor.quantize",
                 run=_modelopt_mxfp4, files=list(MODELOPT_FILES), stubs=list(MODELOPT_STUBS)),
    ]


# --- compressed-tensors (llm-compressor's NVFP4) ----------------------------------------------

CT_FILES = [CT + "quantization/quant_args.py", CT + "utils/triton.py",
            CT + "quantization/utils/mxfp_utils.py", CT + "quantization/utils/helpers.py",
            CT + "compressors/nvfp4/helpers.py"]
CT_STUBS = [
    "loguru (logging)",
    "compressed_tensors.utils (Aliasable, TensorStateDict: config / typing)",
    "compressed_tensors.utils.impl_backend (ImplBackend registry: decorators returned unchanged)",
    "compressed_tensors.quantization (package: QuantizationScheme, a pydantic model)",
    "compressed_tensors.quantization.quant_args: the pydantic QuantizationArgs replaced by a plain record "
    "(num_bits=4, type=float, symmetric, strategy=tensor_group, group_size=16, scale_dtype=zp_dtype="
    "float8_e4m3fn, as quant_scheme.py's NVFP4 preset) and ActivationOrdering (an Aliasable enum, GPTQ "
    "config) left out; FloatArgs, FP*_DATA, BFLOAT16/FLOAT16/FLOAT32/FLOAT64_DATA, QuantizationType/"
    "Strategy, DynamicType and round_to_quantized_type_* are the file's own definitions, executed from "
    "its source",
]
# Every top-level definition of quant_args.py except the pydantic QuantizationArgs and ActivationOrdering
# (mxfp_utils.py imports the BFLOAT16 .. FLOAT64 records; round_to_quantized_type_args' annotation names
# QuantizationArgs, so the record below is in the namespace before these are executed).
_QUANT_ARGS_DEFS = ("FloatArgs", "FP4_E2M1_DATA", "FP6_E2M3_DATA", "FP8_E4M3_DATA", "BFLOAT16_DATA",
                    "FLOAT16_DATA", "FLOAT32_DATA", "FLOAT64_DATA", "QuantizationType", "QuantizationStrategy",
                    "DynamicType", "round_to_quantized_type_dtype", "round_to_quantized_type_args")


class _Logger:
    def __getattr__(self, name):
        return lambda *a, **k: self if name in ("bind", "opt") else None


def _exec_definitions(ctx, relpath, names, namespace):
    """Executes only the named top-level classes / functions of a file (its own source) in namespace."""
    with open(ctx.path(relpath)) as f:
        tree = ast.parse(f.read(), filename=ctx.path(relpath))
    nodes = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name in names]
    found = {n.name for n in nodes}
    _need(found == set(names), "%s lacks %s" % (relpath, sorted(set(names) - found)))
    exec(compile(ast.Module(body=nodes, type_ignores=[]), ctx.path(relpath), "exec"), namespace)


def _load_ct(ctx):
    if "compressed_tensors.compressors.nvfp4.helpers" in sys.modules:
        return sys.modules["compressed_tensors.quantization.utils.helpers"], \
            sys.modules["compressed_tensors.compressors.nvfp4.helpers"], sys.modules["compressed_tensors.quantization.quant_args"]
    torch = ctx.torch
    module("loguru", logger=_Logger())
    module("compressed_tensors.utils", Aliasable=object, TensorStateDict=dict)
    module("compressed_tensors.utils.type", TorchDtype=object)

    class ImplBackend:
        @classmethod
        def register(cls, name, req, priority):
            return lambda fn: fn

        @classmethod
        def entrypoint(cls, name):
            return lambda fn: fn
    module("compressed_tensors.utils.impl_backend", ImplBackend=ImplBackend)
    module("compressed_tensors.quantization", QuantizationScheme=object)

    class QuantizationArgs:  # the pydantic model's fields this path reads, as llm-compressor's NVFP4 preset sets them
        # (pydantic's use_enum_values stores the enums' values: "float" == QuantizationType.FLOAT, a str enum)
        num_bits = 4
        type = "float"
        symmetric = True
        strategy = "tensor_group"
        group_size = 16
        scale_dtype = torch.float8_e4m3fn
        zp_dtype = torch.float8_e4m3fn
        dynamic = False
        actorder = None
        block_structure = None
        observer = None
        observer_kwargs = {}
    ns = {"torch": torch, "Enum": enum.Enum, "Any": object, "QuantizationArgs": QuantizationArgs,
          "__name__": "compressed_tensors.quantization.quant_args"}
    _exec_definitions(ctx, CT + "quantization/quant_args.py", _QUANT_ARGS_DEFS, ns)
    qa = module("compressed_tensors.quantization.quant_args", QuantizationArgs=QuantizationArgs,
                **{k: ns[k] for k in _QUANT_ARGS_DEFS})
    load_file(ctx, CT + "utils/triton.py")
    load_file(ctx, CT + "quantization/utils/mxfp_utils.py")
    helpers = load_file(ctx, CT + "quantization/utils/helpers.py")
    packer = load_file(ctx, CT + "compressors/nvfp4/helpers.py")
    _need(sys.modules["compressed_tensors.utils.triton"].HAS_TRITON, "compressed-tensors: triton did not import")
    return helpers, packer, qa


def _ct_nvfp4(observer_fp32):
    def run(ctx, x):
        torch = ctx.torch
        helpers, packer, qa = _load_ct(ctx)
        rows, cols = x.shape
        obs = x.float() if observer_fp32 else x
        blocks = obs.reshape(rows, cols // 16, 16)
        # the observer's statistics (llm-compressor's min-max observer: per tensor, then per 16-group)
        gs = helpers.generate_gparam(torch.amin(obs).reshape(1), torch.amax(obs).reshape(1))
        scale, _zp = helpers.calculate_qparams(torch.amin(blocks, dim=-1), torch.amax(blocks, dim=-1),
                                               qa.QuantizationArgs(), global_scale=gs)
        codes = packer.quantize_and_pack_fp4_triton(x.contiguous(), scale, global_scale=gs, group_size=16)
        return dict(recipe="nvfp4-compressed-tensors", label="observer " + ("fp32" if observer_fp32 else "input dtype"), x=x,
                    codes=codes, block_scales=scale.to(torch.float8_e4m3fn).contiguous(), global_scale=gs.float(),
                    global_scale_role="output", global_scale_convention="encode", block=16,
                    nibble_order="low_first")
    return run


def compressed_tensors_producers():
    fn = ("compressed_tensors/quantization/utils/helpers.py:generate_gparam + calculate_qparams, "
          "compressors/nvfp4/helpers.py:quantize_and_pack_fp4_triton")
    return [
        Producer(name="compressed-tensors-nvfp4", library="compressed-tensors", function=fn + " (fp32 observer)",
                 run=_ct_nvfp4(True), files=list(CT_FILES), stubs=list(CT_STUBS)),
        Producer(name="compressed-tensors-nvfp4-observer-input-dtype", library="compressed-tensors",
                 function=fn + " (observer statistics in the input dtype)", run=_ct_nvfp4(False),
                 files=list(CT_FILES), stubs=list(CT_STUBS)),
    ]


def producers(ctx):
    return torchao_producers() + fouroversix_producers() + modelopt_producers() + compressed_tensors_producers()
