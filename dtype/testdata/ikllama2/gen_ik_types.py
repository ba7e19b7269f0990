#!/usr/bin/env python3
"""Assemble ikref's output into tensorfs's fixture: a GGUF (v3) with one
tensor per ik_llama.cpp type, its .f32ref (every tensor's dequantization by
ik_llama.cpp's own dequantize_row_*, float32 little-endian, in tensor order)
and a .json naming each tensor's type, code, shape, row size, where its
data lies and the sha256 of its bytes and of its reference.

Usage: gen_ik_types.py IKREF_OUTDIR ROWS N_PER_ROW OUT_BASENAME COMMIT [r|r2|r3|r4|r5|bn]
(standard library only; see README.md for the whole recipe). With "r", "r2",
"r3", "r4", "r5" or "bn", the types of "ikref ... r", "... r2", "... r3", "... r4",
"... r5" or "... bn"."""
import hashlib
import json
import struct
import sys

# name, ggml type code (ik_llama.cpp's ggml.h), row header bytes,
# elements per block, bytes per block
TYPES = [
    ("Q6_0", 133, 0, 32, 26),
    ("IQ1_KT", 158, 4, 256, 56),
    ("IQ2_KT", 153, 4, 256, 68),
    ("IQ3_KT", 154, 4, 256, 100),
    ("IQ4_KT", 155, 4, 256, 128),
]
RTYPES = [
    ("Q4_0_R8", 202, 0, 32, 18),
    ("Q8_0_R8", 208, 0, 32, 34),
    ("IQ4_XS_R8", 223, 0, 256, 136),
    ("Q4_K_R4", 212, 0, 256, 144),
    ("Q6_K_R4", 214, 0, 256, 210),
    ("IQ4_K_R4", 339, 0, 256, 144),
    ("IQ2_K_R4", 337, 0, 256, 76),
    ("IQ3_K_R4", 338, 0, 256, 110),
]
R2TYPES = [
    ("IQ4_KS_R4", 344, 4, 256, 136),
    ("IQ5_KS_R4", 352, 4, 256, 168),
    ("IQ5_K_R4", 340, 0, 256, 176),
    ("Q5_K_R4", 213, 0, 256, 176),
    ("Q3_K_R4", 211, 0, 256, 110),
    ("Q2_K_R4", 210, 0, 256, 84),
    ("IQ4_NL_R4", 220, 0, 32, 18),
    ("Q5_0_R4", 206, 0, 32, 22),
    ("Q6_0_R4", 233, 0, 32, 26),
    ("IQ2_BN_R4", 335, 4, 64, 16),
]
R3TYPES = [
    ("IQ1_S_R4", 219, 2, 32, 6),
    ("IQ1_M_R4", 229, 2, 32, 7),
    ("IQ2_XXS_R4", 216, 0, 256, 66),
    ("IQ3_XXS_R4", 218, 0, 256, 98),
    ("IQ2_XS_R4", 217, 0, 256, 74),
    ("IQ2_S_R4", 222, 0, 256, 82),
    ("IQ3_S_R4", 221, 0, 256, 110),
]
R4TYPES = [
    ("Q8_K_R8", 399, 0, 256, 258),
    ("Q8_KV_R8", 398, 4, 32, 32),
]
R5TYPES = [
    ("MXFP4_R8", 353, 0, 32, 17),
    ("BF16_R16", 230, 0, 1, 2),
]
BNTYPES = [
    ("IQ1_BN", 134, 2, 64, 13),
    ("IQ2_BN", 135, 4, 64, 16),
]
ALIGN = 32


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def main():
    src, rows, n, base, commit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    types = {"r": RTYPES, "r2": R2TYPES, "r3": R3TYPES, "r4": R4TYPES, "r5": R5TYPES, "bn": BNTYPES}[sys.argv[6]] if len(sys.argv) > 6 else TYPES
    datas, refs, infos = [], [], []
    off = 0
    for i, (name, code, meta, be, bb) in enumerate(types):
        q = open(f"{src}/{name}.q", "rb").read()
        f = open(f"{src}/{name}.f32", "rb").read()
        row = meta + n // be * bb
        assert len(q) == rows * row and len(f) == rows * n * 4, name
        tname = f"blk.{i}.{name.lower()}.weight"
        infos.append(dict(name=tname, type=name, code=code, shape=[rows, n], row_header=meta,
                          row_bytes=row, offset=off, bytes=len(q),
                          sha256_blocks=hashlib.sha256(q).hexdigest(),
                          sha256_f32=hashlib.sha256(f).hexdigest()))
        datas.append(q)
        refs.append(f)
        off += len(q)
        off += -off % ALIGN
    head = b"GGUF" + struct.pack("<IQQ", 3, len(types), 1)
    head += gguf_str("general.architecture") + struct.pack("<I", 8) + gguf_str("llama")
    for t in infos:
        head += gguf_str(t["name"]) + struct.pack("<I", 2) + struct.pack("<QQ", n, rows)
        head += struct.pack("<IQ", t["code"], t["offset"])
    head += b"\0" * (-len(head) % ALIGN)
    for t in infos:
        t["file_offset"] = len(head) + t["offset"]
    body = b""
    for t, q in zip(infos, datas):
        body += b"\0" * (t["offset"] - len(body)) + q
    open(base + ".gguf", "wb").write(head + body)
    open(base + ".f32ref", "wb").write(b"".join(refs))
    man = dict(writer=dict(ik_llama_cpp=commit, driver="ikref.cpp", rows=rows, n_per_row=n), tensors=infos)
    open(base + ".json", "w").write(json.dumps(man, indent=1) + "\n")


main()
