#!/usr/bin/env python3
"""Writes a safetensors checkpoint of F16 tensors for the load benchmarks.

    docs/scripts/st_ckpt.py OUT N_TENSORS [--sparse] [--mib-per-tensor 32]

Tensors are named layers.<i>.weight, 32 MiB each by default. The data is
random bytes, or with --sparse a hole (the file is extended, not written:
a 4 GiB checkpoint costs no disk, and reads come from zero pages).
Standard library only.
"""
import argparse
import json
import os
import struct

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("n", type=int)
p.add_argument("--sparse", action="store_true")
p.add_argument("--mib-per-tensor", type=int, default=32)
a = p.parse_args()

size = a.mib_per_tensor << 20
elems = size // 2
header = {}
for i in range(a.n):
    header["layers.%d.weight" % i] = {
        "dtype": "F16", "shape": [elems // 1024, 1024],
        "data_offsets": [i * size, (i + 1) * size]}
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(a.out, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    if a.sparse:
        f.truncate(8 + len(h) + a.n * size)
    else:
        for _ in range(a.n):
            f.write(os.urandom(size))
