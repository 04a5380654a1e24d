#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus, proptests/fuzz/corpus/TARGET/ (python3, no packages).

The files are committed; this script documents how each was made and remakes them:
    python3 proptests/fuzz/make_corpus.py
valid-* files are read without error and give libFuzzer the grammar; regress-* are the inputs of
the "Hostile input" issue, which the readers once mishandled; bad-* are other malformed inputs.
Every file stays under 4 KB, so libFuzzer's default input length stays small.
"""
import json
import pathlib
import shutil
import struct

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
LIMIT = 4096


def write(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    assert len(data) < LIMIT, f"{target}/{name} is {len(data)} bytes"
    (CORPUS / target).mkdir(parents=True, exist_ok=True)
    (CORPUS / target / name).write_bytes(data)


# --- .npy: magic, version, header length, a Python dict padded with spaces to 64 bytes, data.
def npy(header_dict, data=b"", version=1, length=None):
    header = header_dict.encode()
    prefix = 10 if version == 1 else 12
    header += b" " * ((64 - (prefix + len(header) + 1) % 64) % 64) + b"\n"
    n = len(header) if length is None else length
    size = struct.pack("<H", n) if version == 1 else struct.pack("<I", n)
    return b"\x93NUMPY" + bytes([version, 0]) + size + header + data


def dict_of(descr, shape, fortran="False"):
    return "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


def floats(n):  # a spread of values with the specials: -0, inf, nan, a subnormal
    special = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, 3.4028235e38]
    return struct.pack("<%df" % n, *[(special[i] if i < len(special) else (i - n / 2) / 16) for i in range(n)])


def npy_corpus():
    t = "npy"
    write(t, "valid-f4-4x64.npy", npy(dict_of("<f4", "(4, 64)"), floats(256)))
    write(t, "valid-f4-8.npy", npy(dict_of("<f4", "(8,)"), floats(8)))
    write(t, "valid-f4-scalar.npy", npy(dict_of("<f4", "()"), struct.pack("<f", 1.5)))
    write(t, "valid-u1-4x64.npy", npy(dict_of("|u1", "(4, 64)"), bytes(range(256))))
    write(t, "valid-u1-8.npy", npy(dict_of("|u1", "(8,)"), bytes(range(8))))
    write(t, "valid-u1-scalar.npy", npy(dict_of("|u1", "()"), b"\x7e"))
    write(t, "valid-u1-as-lt.npy", npy(dict_of("<u1", "(2,)"), b"\x01\x02"))
    write(t, "valid-i1-8.npy", npy(dict_of("|i1", "(8,)"), bytes(range(8))))
    write(t, "valid-u2-v2-2x4.npy", npy(dict_of("<u2", "(2, 4)"), struct.pack("<8H", *range(0x3f80, 0x3f88)), version=2))
    write(t, "valid-f2-v3-4.npy", npy(dict_of("<f2", "(4,)"), struct.pack("<4H", 0x3c00, 0x8000, 0x7c00, 0x7e00), version=3))
    write(t, "valid-f4-empty-0x64.npy", npy(dict_of("<f4", "(0, 64)")))
    write(t, "valid-f4-spaced-shape.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': ( 2 , 2 ), }", floats(4)))
    # The regressions: dimensions out of int64, a shape past the file, signs, floats, wrap-around.
    write(t, "regress-dim-above-int64.npy", npy(dict_of("<f4", "(99999999999999999999, 64)"), bytes(16)))
    big = npy(dict_of("<f4", "(1000000000, 1000)"))
    write(t, "regress-shape-past-file.npy", big + bytes(200 - len(big)))
    write(t, "regress-negative-dim.npy", npy(dict_of("<f4", "(-4, 64)"), floats(256)))
    write(t, "regress-float-dim.npy", npy(dict_of("<f4", "(4.0, 64)"), floats(256)))
    # 2^32 * 2^32 * 16 * 4 bytes wraps to 0 in 64 bits: a wrapping reader would accept no data.
    write(t, "regress-product-wraps.npy", npy(dict_of("<f4", "(4294967296, 4294967296, 16)")))
    write(t, "regress-product-wraps-64.npy", npy(dict_of("<f4", "(4294967296, 4294967296, 16)"), bytes(64)))
    write(t, "regress-bytes-wrap.npy", npy(dict_of("<f4", "(4611686018427387904,)")))  # 2^62 * 4 = 2^64
    write(t, "bad-data-short.npy", npy(dict_of("<f4", "(4, 64)"), floats(255)))
    write(t, "bad-data-long.npy", npy(dict_of("<f4", "(8,)"), floats(9)))
    write(t, "bad-1d-no-comma.npy", npy(dict_of("<f4", "(8)"), floats(8)))
    write(t, "bad-plus-dim.npy", npy(dict_of("<f4", "(+8,)"), floats(8)))
    write(t, "bad-hex-dim.npy", npy(dict_of("<f4", "(0x8,)"), floats(8)))
    write(t, "bad-nested-shape.npy", npy(dict_of("<f4", "((2,), 4)"), floats(8)))
    write(t, "bad-unbalanced-shape.npy", npy(dict_of("<f4", "(2, 4"), floats(8)))
    write(t, "bad-fortran.npy", npy(dict_of("<f4", "(8,)", "True"), floats(8)))
    write(t, "bad-f8.npy", npy(dict_of("<f8", "(4,)"), bytes(32)))
    write(t, "bad-big-endian.npy", npy(dict_of(">f4", "(8,)"), floats(8)))
    write(t, "bad-no-descr.npy", npy("{'fortran_order': False, 'shape': (8,), }", floats(8)))
    write(t, "bad-no-shape.npy", npy("{'descr': '<f4', 'fortran_order': False, }", floats(8)))
    write(t, "bad-header-length-past-end-v1.npy", npy(dict_of("<f4", "(8,)"), floats(8), length=0xFFFF))
    write(t, "bad-header-length-past-end-v2.npy", npy(dict_of("<f4", "(8,)"), floats(8), version=2, length=0xFFFFFFFF))
    write(t, "bad-header-length-zero.npy", npy(dict_of("<f4", "(8,)"), floats(8), length=0))
    write(t, "bad-version-0.npy", npy(dict_of("<f4", "(8,)"), floats(8)).replace(b"NUMPY\x01", b"NUMPY\x00", 1))
    write(t, "bad-version-255.npy", npy(dict_of("<f4", "(8,)"), floats(8)).replace(b"NUMPY\x01", b"NUMPY\xff", 1))
    write(t, "bad-magic.npy", b"\x93NUMPZ\x01\x00" + npy(dict_of("<f4", "(8,)"), floats(8))[8:])
    write(t, "bad-magic-only.npy", b"\x93NUMPY\x01\x00")
    write(t, "bad-truncated-v2-length.npy", b"\x93NUMPY\x02\x00\x40")
    write(t, "bad-empty.npy", b"")


# --- .safetensors: 8-byte little-endian header length, a JSON header, the data.
def st(header, data=b"", length=None):
    text = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    text = text.encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def st_corpus():
    t = "safetensors"
    one = {"x": {"dtype": "F32", "shape": [4, 8], "data_offsets": [0, 128]}}
    write(t, "valid-one-tensor.safetensors", st(one, floats(32)))
    write(t, "valid-metadata-bf16.safetensors",
          st({"__metadata__": {"format": "pt"}, "x": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]}}, bytes(16)))
    write(t, "valid-two-tensors.safetensors",  # "x" is readable by name, "" (the only tensor) is not
          st({"x": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
              "k_scale": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [4, 6]}}, bytes(range(6))))
    write(t, "valid-other-name.safetensors", st({"k_fp4": {"dtype": "U8", "shape": [2, 2], "data_offsets": [0, 4]}}, bytes(4)))
    write(t, "valid-scalar-f16.safetensors", st({"x": {"dtype": "F16", "shape": [], "data_offsets": [0, 2]}}, b"\x00\x3c"))
    write(t, "valid-empty-tensor.safetensors", st({"x": {"dtype": "F32", "shape": [0, 4], "data_offsets": [0, 0]}}))
    write(t, "valid-offset-data.safetensors", st({"x": {"dtype": "I8", "shape": [8], "data_offsets": [8, 16]}}, bytes(16)))
    # The regressions: a shape of 1e30, negative offsets, a shape whose product wraps.
    write(t, "regress-shape-1e30.safetensors", st('{"x":{"dtype":"F32","shape":[1e30],"data_offsets":[0,4]}}', bytes(4)))
    write(t, "regress-negative-offsets.safetensors", st({"x": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}, bytes(8)))
    write(t, "regress-product-overflow.safetensors",  # 2^32 * 2^32 * 16 * 4 bytes wraps to 0
          st({"x": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 0]}}))
    write(t, "regress-offsets-past-end.safetensors", st({"x": {"dtype": "U8", "shape": [64], "data_offsets": [0, 64]}}, bytes(8)))
    write(t, "regress-offsets-1e30.safetensors", st('{"x":{"dtype":"U8","shape":[4],"data_offsets":[1e30,1e30]}}', bytes(4)))
    write(t, "regress-header-length-huge.safetensors", st(one, floats(32), length=0xFFFFFFFFFFFFFFFF))
    write(t, "regress-header-length-past-end.safetensors", st(one, floats(32), length=1 << 20))
    write(t, "regress-deep-header.safetensors", st("[" * 2000 + "]" * 2000))
    write(t, "bad-end-before-begin.safetensors", st({"x": {"dtype": "U8", "shape": [0], "data_offsets": [8, 0]}}, bytes(8)))
    write(t, "bad-fractional-offsets.safetensors", st({"x": {"dtype": "U8", "shape": [4], "data_offsets": [0.5, 4.5]}}, bytes(8)))
    write(t, "bad-three-offsets.safetensors", st({"x": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4, 8]}}, bytes(8)))
    write(t, "bad-string-dim.safetensors", st({"x": {"dtype": "U8", "shape": ["4"], "data_offsets": [0, 4]}}, bytes(4)))
    write(t, "bad-dtype-f64.safetensors", st({"x": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}}, bytes(8)))
    write(t, "bad-no-shape.safetensors", st({"x": {"dtype": "U8", "data_offsets": [0, 4]}}, bytes(4)))
    write(t, "bad-entry-not-object.safetensors", st('{"x":5}'))
    write(t, "bad-header-array.safetensors", st('[{"dtype":"U8","shape":[1],"data_offsets":[0,1]}]', bytes(1)))
    write(t, "bad-header-not-json.safetensors", st("{\"x\": nope}", bytes(4)))
    write(t, "bad-header-length-zero.safetensors", st(one, floats(32), length=0))
    write(t, "bad-no-tensors.safetensors", st({"__metadata__": {"format": "pt"}}))
    write(t, "bad-comma-name.safetensors", st({"a,b": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\x01"))
    write(t, "bad-short.safetensors", b"\x10\x00\x00")


# --- JSON: manifests and quant.json as kvq writes and reads them, and hostile text.
PORT_MANIFEST = """{
  "kvq_port_manifest": 1,
  "recipe": "nvfp4",
  "tensors": {
    "x":            {"file": "x.npy", "dtype": "bfloat16"},
    "codes":        {"file": "out.safetensors", "key": "k_fp4"},
    "block_scales": {"file": "out.safetensors", "key": "k_scale"},
    "global_scale": {"file": "global_scale.npy", "convention": "decode", "role": "input"},
    "dequantized":  {"file": "dequantized.npy"}
  },
  "layout": {"nibble_order": "low_first", "block": 16}
}
"""

STUDY_MANIFEST = """{
  "study": "qsnr",
  "commit": "c739425",
  "device": "cpu",
  "seed": 1,
  "samples_requested": 2048,
  "shard": "0/1",
  "jobs": 2,
  "configurations": 12,
  "rows": 12,
  "seconds": 0.25,
  "config_rows": "",
  "head_dim": 128,
  "rotate": false,
  "distributions": ["gaussian", "laplace"],
  "recipes": [
    {"name": "nvfp4", "element": "e2m1", "default_block": 16, "scales": "e4m3 block scales, decode convention"}
  ],
  "csv": "qsnr.csv"
}
"""


def quant_json(recipe="nvfp4", element="e2m1", block=16, rows=4, cols=64, bits='"0x3b124925"', scale="0.00223214296",
               scales="e4m3 block scales", extra=""):
    return ('{\n  "recipe": "%s",\n  "element": "%s",\n  "block": %s,\n  "rows": %s,\n  "cols": %s,\n'
            '  "input_dtype": "fp32",\n  "tensor_scale_bits": %s,\n  "tensor_scale": %s,\n  "scales": "%s",\n'
            '  "packing": "two E2M1 per byte, element 2i in the low nibble",\n  "device": "cpu"%s\n}\n'
            % (recipe, element, block, rows, cols, bits, scale, scales, extra))


def json_corpus():
    t = "json"
    write(t, "valid-port-manifest.json", PORT_MANIFEST)
    write(t, "valid-study-manifest.json", STUDY_MANIFEST)
    write(t, "valid-quant.json", quant_json())
    write(t, "valid-scalars.json", '[0, -0, 1.5e-3, -2E+8, 1e308, true, false, null, "", "a\\"b\\\\c\\n\\t\\u00e9\\/"]')
    write(t, "valid-empty.json", "{}")
    write(t, "valid-spaces.json", " \t\r\n[ \n{ } , [ ] ]\n ")
    write(t, "valid-depth-65.json", "[" * 65 + "]" * 65)  # the deepest nesting json.cpp accepts
    write(t, "valid-utf8-key.json", '{"\u00e9t\u00e9": "\u20ac", "dup": 1, "dup": 2}')
    # The regressions: nesting far past the bound (the was 100000 deep; the fuzz target
    # requires the bound, so 2000 levels in 4 KB catch a parser that lost it), an unterminated string.
    write(t, "regress-nested-2000.json", "[" * 2000 + "]" * 2000)
    write(t, "regress-nested-unclosed.json", "[" * 4000)
    write(t, "regress-nested-objects.json", '{"a":' * 800)
    write(t, "regress-unterminated-string.json", '{"recipe": "nvfp4')
    write(t, "regress-unterminated-escape.json", '["abc\\')
    write(t, "regress-unterminated-unicode.json", '["\\u12')
    write(t, "bad-depth-66.json", "[" * 66 + "]" * 66)
    write(t, "bad-numbers.json", "[1e99999, -1e99999, 0x10, inf, -nan, 1.5.5]")
    write(t, "bad-trailing.json", "{} x")
    write(t, "bad-empty.json", "")
    write(t, "valid-nul-in-key.json", '{"a\x00b": 1}')  # raw control bytes in strings are let through
    write(t, "bad-missing-colon.json", '{"a" 1}')
    write(t, "bad-literals.json", "[tru, nul, falsey]")


def quant_json_corpus():
    t = "quant_json"
    write(t, "valid-nvfp4.json", quant_json())
    write(t, "valid-mxfp4.json", quant_json("mxfp4", block=32, rows=8, cols=128, bits='"0x3f800000"', scale="1",
                                            scales="e8m0 block scales"))
    write(t, "valid-fp8-tensor.json", quant_json("fp8-e4m3", "e4m3", block=128, bits='"0x7f800000"', scale='"inf"',
                                                 scales="none"))
    write(t, "valid-nan-scale.json", quant_json(bits='"0X7FC00000"', scale='"nan"'))
    write(t, "valid-zero-rows.json", quant_json(rows=0))
    write(t, "valid-minimal.json", '{"recipe":"nvfp4","rows":1,"cols":16,"block":16,"tensor_scale_bits":"0x00000000"}')
    # The regressions: huge and overflowing sizes, a 33-bit and a non-hex tensor scale.
    write(t, "regress-rows-1e30.json", quant_json(rows="1e30"))
    # Each in range, so the reader accepts it: kernels::validate rejects the product (> 2^63) before dequant sizes anything.
    write(t, "regress-rows-cols-overflow.json", quant_json(rows=3037000500, cols=3037000500))
    write(t, "regress-block-1e30.json", quant_json(block="1e30"))
    write(t, "regress-scale-bits-33.json", quant_json(bits='"0x1ffffffff"'))
    write(t, "regress-scale-bits-garbage.json", quant_json(bits='"garbage"'))
    write(t, "bad-scale-bits-sign.json", quant_json(bits='"0x-1234567"'))
    write(t, "bad-scale-bits-number.json", quant_json(bits="1065353216"))
    write(t, "bad-block-0.json", quant_json(block=0))
    write(t, "bad-block-129.json", quant_json(block=129))
    write(t, "bad-block-fraction.json", quant_json(block=16.5))
    write(t, "bad-cols-0.json", quant_json(cols=0))
    write(t, "bad-rows-negative.json", quant_json(rows=-1))
    write(t, "bad-rows-2p53-plus-2.json", quant_json(rows=9007199254740994))
    write(t, "bad-rows-string.json", quant_json(rows='"4"'))
    write(t, "bad-rows-nan.json", quant_json(rows="nan"))
    write(t, "bad-no-recipe.json", '{"rows":1,"cols":16,"block":16,"tensor_scale_bits":"0x00000000"}')
    write(t, "bad-array.json", "[]")
    write(t, "bad-truncated.json", quant_json()[:60])


def encode_lines_corpus():
    t = "encode_lines"
    write(t, "valid-fp32.txt", "1.5\n-0x1.8p+1\n0x3f800000\nnan\n-inf\n# a comment\n\n   2.5   \n1e-45\n3.4028235e38\n-0\n")
    write(t, "valid-codes.txt", "0x7e\n126\n0\n0xF\n15\n0xffff\n65535\n")
    write(t, "valid-crlf.txt", "1.5\r\n0x7e\r\n\r\n# c\r\n")
    write(t, "valid-no-final-newline.txt", "0x3f800000\n7")
    write(t, "valid-sizes.txt", "3037000500\n3037000500\n4294967296\n4294967296\n9223372036854775807\n1\n0\n")
    write(t, "bad-values.txt", "0x\n0x123456789\n1.5x\n+1\n0x1p\n0x1.\n0x.8p1\n1e39\n-1e39\n0x7fc00001\n 0x 1\n")
    write(t, "bad-integers.txt", "99999999999999999999\n0xffffffffffffffffff\n-9223372036854775808\n65536\n0x10000\n--1\n-\n")
    write(t, "bad-nul.txt", "1.5\x00\n0x7e\x00\n\x00\n")
    write(t, "long-decimal.txt", "0." + "1" * 3000 + "e-10\n")
    write(t, "newlines-only.txt", "\n" * 64)
    write(t, "empty.txt", "")


if __name__ == "__main__":
    shutil.rmtree(CORPUS, ignore_errors=True)
    npy_corpus()
    st_corpus()
    json_corpus()
    quant_json_corpus()
    encode_lines_corpus()
    for d in sorted(CORPUS.iterdir()):
        print(f"{d.relative_to(HERE)}: {len(list(d.iterdir()))} files")
