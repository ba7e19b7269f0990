#!/usr/bin/env python3
"""Writes a block-FP8 checkpoint directory (DeepSeek-V3 layout, as
../shared/tools/gen_quant.py's fp8_block) for the quantized-view
benchmarks, and beside it a plain F16 checkpoint of the same elements.

    docs/scripts/fp8_ckpt.py OUT_DIR N_WEIGHTS [--rows 4096] [--cols 8192]

OUT_DIR/fp8/: model.safetensors with layers.<i>.mlp.up_proj.weight
F8_E4M3 [rows, cols] and its weight_scale_inv F32 [rows/128, cols/128],
and config.json naming quant_method fp8 with weight_block_size [128, 128].
OUT_DIR/f16/model.safetensors: layers.<i>.mlp.up_proj.weight F16 [rows,
cols] (random bytes). Codes are random bytes without the two NaN codes;
scales are random in [2^-12, 2^-6]. Standard library only.
"""
import argparse
import json
import os
import random
import struct

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("n", type=int)
p.add_argument("--rows", type=int, default=4096)
p.add_argument("--cols", type=int, default=8192)
a = p.parse_args()
rnd = random.Random(35)
nan_free = bytes.maketrans(b"\x7f\xff", b"\x7e\xfe")


def write(path, tensors):
    """tensors: list of (name, dtype, shape, size, fill(f))"""
    header, off = {}, 0
    for name, dt, shape, size, _ in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + size]}
        off += size
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for t in tensors:
            t[4](f)


def codes(n):
    def fill(f):
        left = n
        while left:
            k = min(left, 1 << 24)
            f.write(os.urandom(k).translate(nan_free))
            left -= k
    return fill


def scales(n):
    return lambda f: f.write(struct.pack("<%df" % n, *[2.0 ** rnd.uniform(-12, -6) for _ in range(n)]))


def randbytes(n):
    def fill(f):
        left = n
        while left:
            k = min(left, 1 << 24)
            f.write(os.urandom(k))
            left -= k
    return fill


r, c = a.rows, a.cols
br, bc = -(-r // 128), -(-c // 128)
os.makedirs(os.path.join(a.out, "fp8"), exist_ok=True)
os.makedirs(os.path.join(a.out, "f16"), exist_ok=True)
ts = []
for i in range(a.n):
    x = "layers.%d.mlp.up_proj." % i
    ts.append((x + "weight", "F8_E4M3", [r, c], r * c, codes(r * c)))
    ts.append((x + "weight_scale_inv", "F32", [br, bc], 4 * br * bc, scales(br * bc)))
write(os.path.join(a.out, "fp8", "model.safetensors"), ts)
with open(os.path.join(a.out, "fp8", "config.json"), "w") as f:
    json.dump({"architectures": ["DeepseekV3ForCausalLM"], "quantization_config": {
        "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}}, f, indent=2)
write(os.path.join(a.out, "f16", "model.safetensors"),
      [("layers.%d.mlp.up_proj.weight" % i, "F16", [r, c], 2 * r * c, randbytes(2 * r * c)) for i in range(a.n)])
