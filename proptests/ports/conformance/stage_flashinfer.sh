#!/usr/bin/env bash
# Stage a trimmed FlashInfer for the conformance run: only what `import flashinfer.rope` and
# `import flashinfer.quantization.fp4_quantization` and the JIT builds of their modules ("rope",
# "fp4_quantization_90": SGLang's SM90 NVFP4 KV quantize) need on sm_90.
#
#   stage_flashinfer.sh FLASHINFER_WHEEL DEST [TVM_FFI_WHEEL]
#
# DEST/flashinfer            the package: flashinfer/__init__.py replaced by a stub (the real one imports
#                            every submodule and their third-party deps); the Python files kept are the
#                            closure of module-level imports of flashinfer.rope and of the JIT driver
#                            (jit.core, jit.cpp_ext, jit.env, utils, compilation_context).
# DEST/flashinfer/data       csrc/{rope.cu,flashinfer_rope_binding.cu,tvm_ffi_utils.h} and the sources of
#                            the fp4_quantization module (csrc/nv_internal), the headers reachable from
#                            them by #include (a textual, condition-blind closure: a superset), and the
#                            vendored libcudacxx whole; the other include roots the JIT passes stay as
#                            they are reached.
# DEST/flashinfer_python-*.dist-info   kept (METADATA gives the version).
# With TVM_FFI_WHEEL, that wheel is unpacked into DEST too (what `pip install --no-deps --target` does
# for a pure-layout wheel; it has no console scripts we need).
#
# Use on the GPU machine: PYTHONPATH=DEST, FLASHINFER_CUDA_ARCH_LIST=9.0, FLASHINFER_WORKSPACE_BASE=<a
# writable dir> (the JIT cache goes to $FLASHINFER_WORKSPACE_BASE/.cache/flashinfer), nvcc + ninja on PATH.
# pynvml and requests are imported at module level by flashinfer/utils.py and flashinfer/artifacts.py;
# if absent there, flashinfer_fns.py installs stubs for them (the rope path never calls them).
set -euo pipefail
WHEEL=${1:?flashinfer wheel}
DEST=${2:?destination dir}
TVM=${3:-}
rm -rf "$DEST"
mkdir -p "$DEST"
python3 - "$WHEEL" "$DEST" "$TVM" <<'PY'
import ast, os, re, shutil, sys, zipfile

wheel, dest, tvm = sys.argv[1], sys.argv[2], sys.argv[3]
zipfile.ZipFile(wheel).extractall(dest)
if tvm:
    zipfile.ZipFile(tvm).extractall(dest)
pkg = os.path.join(dest, "flashinfer")
data = os.path.join(pkg, "data")

# ---- Python: module-level import closure (the stubbed flashinfer/__init__ is not followed) ----
def modfile(mod):
    p = os.path.join(dest, *mod.split("."))
    if os.path.isfile(os.path.join(p, "__init__.py")):
        return os.path.join(p, "__init__.py")
    return p + ".py" if os.path.isfile(p + ".py") else None

keep_py = set()
def module_level(tree):
    out, q = [], list(tree.body)
    while q:
        n = q.pop()
        if isinstance(n, (ast.Try, ast.If, ast.With)):
            for fld in ("body", "orelse", "finalbody"):
                q.extend(getattr(n, fld, []) or [])
            for h in getattr(n, "handlers", []) or []:
                q.extend(h.body)
        else:
            out.append(n)
    return out

def visit(mod):
    f = modfile(mod)
    if f is None or f in keep_py or mod == "flashinfer":
        return
    keep_py.add(f)
    parts = mod.split(".")
    for i in range(2, len(parts)):
        visit(".".join(parts[:i]))
    is_pkg = f.endswith("__init__.py")
    for n in module_level(ast.parse(open(f).read())):
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name.startswith("flashinfer."):
                    visit(a.name)
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - (n.level - 1)] + ([n.module] if n.module else [])
                base = ".".join(base)
            else:
                base = n.module or ""
            if base == "flashinfer" or base.startswith("flashinfer."):
                visit(base)
                for a in n.names:
                    visit(base + "." + a.name)

for m in ("flashinfer.rope", "flashinfer.jit.rope", "flashinfer.jit.core", "flashinfer.jit.cpp_ext",
          "flashinfer.jit.env", "flashinfer.utils", "flashinfer.compilation_context", "flashinfer.version",
          "flashinfer.quantization.fp4_quantization"):
    visit(m)

# ---- C++/CUDA: #include closure of the rope module's sources ----
inc_roots = [os.path.join(data, d) for d in ("include", "csrc", "csrc/nv_internal", "csrc/nv_internal/include",
                                             "cccl/libcudacxx/include", "cccl/cub", "cccl/thrust",
                                             "cutlass/include", "cutlass/tools/util/include", "spdlog/include")]
pat = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)
keep_c = set()
def walk(f):
    if f in keep_c:
        return
    keep_c.add(f)
    for m in pat.finditer(open(f, errors="replace").read()):
        for d in [os.path.dirname(f)] + inc_roots:
            p = os.path.normpath(os.path.join(d, m.group(1)))
            if os.path.isfile(p):
                walk(p)
                break
# the rope module, and the fp4_quantization_90 module (SGLang's SM90 NVFP4 KV quantize: fp4_quantize)
for s in ("csrc/rope.cu", "csrc/flashinfer_rope_binding.cu", "csrc/nv_internal/tensorrt_llm/thop/fp4Quantize.cpp",
          "csrc/nv_internal/tensorrt_llm/thop/fp4Op.cpp", "csrc/nv_internal/cpp/kernels/quantization.cu",
          "csrc/nv_internal/cpp/common/envUtils.cpp", "csrc/nv_internal/cpp/common/logger.cpp",
          "csrc/nv_internal/cpp/common/stringUtils.cpp", "csrc/nv_internal/cpp/common/tllmException.cpp"):
    walk(os.path.join(data, s))
# The vendored libcudacxx whole: the toolkit's own headers (cooperative_groups, reached from the fp4
# module) include <cuda/std/...>, which must resolve to the vendored copy (it is first on the include
# path) rather than mix with the toolkit's (a textual closure cannot follow includes made from there).
for root, _, files in os.walk(os.path.join(data, "cccl/libcudacxx/include")):
    keep_c.update(os.path.join(root, f) for f in files)
cut = [r for r in keep_c if "/cutlass/" in r or "/spdlog/" in r]
if cut:
    print("note: the rope sources reach cutlass/spdlog headers:", len(cut), file=sys.stderr)

# ---- delete everything else under flashinfer/ ----
for root, dirs, files in os.walk(pkg, topdown=False):
    for fn in files:
        p = os.path.join(root, fn)
        if p not in keep_py and p not in keep_c:
            os.remove(p)
    for d in dirs:
        p = os.path.join(root, d)
        if not os.listdir(p):
            os.rmdir(p)
for d in ("include", "csrc", "cccl/libcudacxx/include", "cccl/cub", "cccl/thrust", "cutlass/include",
          "cutlass/tools/util/include", "spdlog/include", "aot"):
    os.makedirs(os.path.join(data, d), exist_ok=True)

ver = "unknown"
meta = open(os.path.join(pkg, "_build_meta.py")).read() if os.path.isfile(os.path.join(pkg, "_build_meta.py")) else ""
m = re.search(r'__version__\s*=\s*"([^"]+)"', meta)
if m:
    ver = m.group(1)
with open(os.path.join(pkg, "__init__.py"), "w") as f:
    f.write('"""Stub written by kvq stage_flashinfer.sh: the real __init__ imports every FlashInfer submodule.\n'
            'Import submodules explicitly (import flashinfer.rope)."""\n'
            f'__version__ = "{ver}"\n')
print(f"kept {len(keep_py)} Python files, {len(keep_c)} C/C++/CUDA files", file=sys.stderr)
PY
find "$DEST" -name __pycache__ -prune -exec rm -rf {} +
# Wheel-level extras the rope build never reads: other top-level packages of the flashinfer wheel, its
# 1.4 MB RECORD, and tvm_ffi's build-from-source material (libbacktrace sources, cython/src trees);
# nothing else (core*.so links lib/libtvm_ffi_testing.so, so it stays). tvm_ffi keeps include/ (tvm/ffi and dlpack headers), lib/libtvm_ffi.so, core*.so.
rm -rf "$DEST"/b12x "$DEST"/build_backend.py "$DEST"/build_utils.py "$DEST"/flashinfer_python-*.dist-info/RECORD
if [ -d "$DEST/tvm_ffi" ]; then
  rm -rf "$DEST"/tvm_ffi/3rdparty/libbacktrace "$DEST"/tvm_ffi/cython \
         "$DEST"/tvm_ffi/src
fi
du -sb "$DEST" | awk '{printf "staged %s: %d bytes (%.2f MiB)\n", $2, $1, $1/1048576}'
du -sh "$DEST"/* | sed 's/^/  /'
