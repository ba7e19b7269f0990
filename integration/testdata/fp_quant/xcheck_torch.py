#!/usr/bin/python3
"""Cross-checks EXPECTED.json (written by gen.py) with torch: W = (Q @ H.T) * 2^(s-127) per group of 32,
Q decoded from the E2M1 nibbles (low nibble the even input), H the stored BF16 matrix and s the E8M0 scale
read through torch's own bfloat16 and float8_e8m0fnu dtypes, the product in float64 (exact here), rounded
once to float32 by torch, then to bfloat16 and float16 by torch. Checked with torch 2.14.1 (Debian sid):

    cp -r integration/testdata/fp_quant /srv/sid/out/ && ../shared/tools/debian.sh sid /srv/sid run \
        python3 /out/fp_quant/xcheck_torch.py /out/fp_quant
"""
import hashlib
import json
import os
import struct
import sys

import torch

D = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
b = open(os.path.join(D, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", b[:8])[0]; hdr = json.loads(b[8:8+n]); base = 8 + n
def raw(name):
    e = hdr[name]; o0, o1 = e["data_offsets"]; return bytearray(b[base+o0:base+o1]), e["shape"]
exp = {l["name"]: l for l in json.load(open(os.path.join(D, "EXPECTED.json")))["logical"]}
for x in ["model.layers.0.mlp.up_proj", "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj"]:
    q, (O, I2) = raw(x + ".qweight"); s, _ = raw(x + ".scales"); h, _ = raw(x + ".forward_hadamard_matrix")
    I = 2 * I2
    lut = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float64)
    u = torch.frombuffer(q, dtype=torch.uint8).long()
    Q = torch.stack([lut[u & 15], lut[u >> 4]], -1).reshape(O, I)
    H = torch.frombuffer(h, dtype=torch.bfloat16).view(32, 32).double()
    S = torch.frombuffer(s, dtype=torch.uint8).view(torch.float8_e8m0fnu).double().view(O, I // 32, 1)
    W = ((Q.view(O, I // 32, 32) @ H.T) * S).reshape(O, I).float()
    got = hashlib.sha256(W.numpy().astype("<f4").tobytes()).hexdigest()
    bf = hashlib.sha256(W.bfloat16().view(torch.int16).numpy().astype("<i2").tobytes()).hexdigest()
    f16 = hashlib.sha256(W.half().numpy().astype("<f2").tobytes()).hexdigest()
    e = exp[x + ".weight"]
    ok = got == e["sha256_f32"] and bf == e["sha256_bf16"] and f16 == e["sha256_f16"]
    print(x, "f32", got == e["sha256_f32"], "bf16", bf == e["sha256_bf16"], "f16", f16 == e["sha256_f16"], "torch", torch.__version__)
    if not ok:
        sys.exit(1)
