#!/usr/bin/env python3
"""Writes the GPU benchmark's checkpoint: a LLaMA-shaped BF16 safetensors
file of about GIB GiB (embedding, then layers of attention and MLP weights
and norms, then the head), each tensor random bytes, written without
holding it whole in memory. Usage: gpu_ckpt.py OUT GIB"""
import json, os, struct, sys

out, gib = sys.argv[1], float(sys.argv[2])
d, ff, vocab = 4096, 11008, 32000
layer = [("self_attn.q_proj.weight", (d, d)), ("self_attn.k_proj.weight", (d, d)),
         ("self_attn.v_proj.weight", (d, d)), ("self_attn.o_proj.weight", (d, d)),
         ("mlp.gate_proj.weight", (ff, d)), ("mlp.up_proj.weight", (ff, d)),
         ("mlp.down_proj.weight", (d, ff)), ("input_layernorm.weight", (d,)),
         ("post_attention_layernorm.weight", (d,))]
def nbytes(shape):
    n = 2
    for s in shape:
        n *= s
    return n
tensors = [("model.embed_tokens.weight", (vocab, d))]
per_layer = sum(nbytes(s) for _, s in layer)
budget = int(gib * (1 << 30)) - 2 * nbytes((vocab, d)) - nbytes((d,))
for i in range(max(1, budget // per_layer)):
    tensors += [(f"model.layers.{i}.{n}", s) for n, s in layer]
tensors += [("model.norm.weight", (d,)), ("lm_head.weight", (vocab, d))]
header, off = {}, 0
for name, shape in tensors:
    n = nbytes(shape)
    header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
    off += n
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
pool = os.urandom(64 << 20)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    k = 0
    for name, shape in tensors:
        n = nbytes(shape)
        while n > 0:
            start = (k * 4099 * 512) % (len(pool) // 2)
            m = min(n, len(pool) - start)
            f.write(pool[start:start + m])
            n -= m
            k += 1
print(f"{out}: {len(tensors)} tensors, {off / 1e9:.2f} GB")
