#!/usr/bin/python3
"""An FP-Quant (quant_method "fp_quant", forward_dtype mxfp4, hadamard_group_size 32) checkpoint and
what its converted views must hold: integration/fpquant_test.go mounts it.

    python3 gen.py [OUTDIR]        (default: this script's directory; pure Python 3, no numpy)

Writes config.json, model.safetensors and EXPECTED.json (the schema of ../shared/testdata/quant's, one case:
"logical" with each tensor's sha256 of its float32, bfloat16 and float16 bytes, "absent", "stored").

The weight of a module is W = Q·Hᵀ per group of 32 inputs (FP-Quant inference_lib linear_fns.py at d2e3092f:
the activations are rotated by x @ H before the GEMM with the rotated codes, so the layer's weight is the
codes times Hᵀ): W[o, 32k+j] = 2^(s-127) · sum_i e2m1(q[o, 32k+i]) · H[j, i], q the E2M1 codes (the even
input in the low nibble), s the E8M0 scale of the group, H the stored BF16 forward_hadamard_matrix. Every
term is an E2M1 value times ±m (m the one magnitude of H's entries), so the sum is exact in a double in any
order; it is rounded once to float32 (struct's "f": the C cast, to nearest even), and the bfloat16 and
float16 views round that float32 to nearest even. No NaN or infinity: scales 100..135.

Modules: up_proj with H the Sylvester Hadamard matrix times 32^-1/2 (transform_init "hadamard", as scipy's
hadamard), q_proj with H in sequency order and its columns permuted ("gsr"-like; tensorfs's fast
Walsh-Hadamard path), k_proj with its rows permuted at random (tensorfs's table path), a bias, a norm and
lm_head (modules_to_not_convert) plain.

xcheck_torch.py checks EXPECTED.json against torch 2.14 (Q @ H.T in float64, torch's bfloat16 and
float8_e8m0fnu decoding H and the scales, torch's roundings to float32, bfloat16 and float16): all equal.
"""
import hashlib
import json
import os
import random
import struct
import sys

E2M1 = [0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6]
SEED = 20261206


def bf16_round(x):
    """float -> bfloat16 bits: x as float32 first, then to nearest even (no NaN here)."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return (u + 0x7FFF + ((u >> 16) & 1)) >> 16


def bf16_value(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def f32_bytes(vals):
    return b"".join(struct.pack("<f", v) for v in vals)


def bf16_bytes(vals):
    return b"".join(struct.pack("<H", bf16_round(v)) for v in vals)


def f16_bytes(vals):
    out = []
    for v in vals:
        f = struct.unpack("<f", struct.pack("<f", v))[0]
        out.append(struct.pack("<e", f) if abs(f) < 65520 else struct.pack("<H", 0x7C00 | (0x8000 if f < 0 else 0)))
    return b"".join(out)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def popcount(x):
    return bin(x).count("1")


def sylvester_signs(rows, cols):
    return [[-1 if popcount(rows[j] & cols[i]) % 2 else 1 for i in range(32)] for j in range(32)]


def sequency_rows():
    # Walsh (sequency) order: row s of the ordered matrix is natural row bitreverse(gray(s)), a linear map
    def rev5(x):
        return int(format(x, "05b")[::-1], 2)
    return [rev5(s ^ (s >> 1)) for s in range(32)]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(SEED)
    m_bits = bf16_round(32 ** -0.5)
    m = bf16_value(m_bits)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "quantization_config": {"quant_method": "fp_quant", "forward_dtype": "mxfp4", "forward_method": "quest",
                                      "backward_dtype": "bf16", "hadamard_group_size": 32, "store_master_weights": False,
                                      "pseudoquantization": False, "transform_init": "hadamard",
                                      "modules_to_not_convert": ["lm_head"]}}
    stored, logical, absent = [], [], []

    def plain_bf16(name, shape):
        n = 1
        for d in shape:
            n *= d
        bits = [bf16_round(rng.gauss(0, 0.05)) for _ in range(n)]
        stored.append((name, "BF16", shape, b"".join(struct.pack("<H", b) for b in bits)))
        logical.append((name, shape, [bf16_value(b) for b in bits]))

    nat = list(range(32))
    perm = list(range(32))
    rng.shuffle(perm)
    rowperm = list(range(32))
    rng.shuffle(rowperm)
    modules = [("model.layers.0.mlp.up_proj", 8, 96, sylvester_signs(nat, nat)),
               ("model.layers.0.self_attn.q_proj", 6, 64, sylvester_signs(sequency_rows(), perm)),
               ("model.layers.0.self_attn.k_proj", 4, 128, sylvester_signs(rowperm, nat))]
    for x, O, I, signs in modules:
        G = I // 32
        q = bytes(rng.randrange(256) for _ in range(O * I // 2))
        sc = bytes(rng.randrange(100, 136) for _ in range(O * G))
        h = [[m * signs[j][i] for i in range(32)] for j in range(32)]
        hb = b"".join(struct.pack("<H", m_bits | (0x8000 if signs[j][i] < 0 else 0)) for j in range(32) for i in range(32))
        hbT = b"".join(struct.pack("<H", m_bits | (0x8000 if signs[i][j] < 0 else 0)) for j in range(32) for i in range(32))
        one = struct.pack("<H", bf16_round(1.0))
        W = []
        for o in range(O):
            for c in range(I):
                k, j = divmod(c, 32)
                s = 0.0
                for i in range(32):
                    b = q[(o * I + 32 * k + i) // 2]
                    s += E2M1[(b >> (4 * (i % 2))) & 15] * h[j][i]  # exact: every partial sum fits a double
                W.append(struct.unpack("<f", struct.pack("<f", s * 2.0 ** (sc[o * G + k] - 127)))[0])
        parts = [(x + ".qweight", "U8", [O, I // 2], q), (x + ".scales", "U8", [O, G], sc),
                 (x + ".weight_global_scale", "BF16", [1], one), (x + ".act_global_scale", "BF16", [1], one),
                 (x + ".forward_hadamard_matrix", "BF16", [32, 32], hb),
                 (x + ".backward_hadamard_matrix", "BF16", [32, 32], hbT)]
        stored.extend(parts)
        absent.extend(p[0] for p in parts)
        logical.append((x + ".weight", [O, I], W))
        if x.endswith("up_proj"):
            plain_bf16(x + ".bias", [O])
    plain_bf16("model.norm.weight", [64])
    plain_bf16("lm_head.weight", [16, 64])

    hdr, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, dt, shape, b in stored:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    hj = json.dumps(hdr, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    exp = {"generator": "integration/testdata/fp_quant/gen.py", "seed": SEED,
           "rounding": "the exact sum rounded once to float32; bf16/f16 round that float32 to nearest even",
           "logical": [{"name": n, "shape": s, "sha256_f32": sha(f32_bytes(v)), "sha256_bf16": sha(bf16_bytes(v)),
                        "sha256_f16": sha(f16_bytes(v))} for n, s, v in logical],
           "absent": absent,
           "stored": [{"name": n, "sha256": sha(b)} for n, _, _, b in stored]}
    with open(os.path.join(out, "EXPECTED.json"), "w") as f:
        json.dump(exp, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
