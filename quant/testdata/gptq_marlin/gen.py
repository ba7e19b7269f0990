# Writes GPTQ checkpoint_format "marlin" checkpoints and EXPECTED.json:
# the original Marlin layout as AutoGPTQ's QuantLinear.pack writes it
# (auto_gptq/nn_modules/qlinear/qlinear_marlin.py at AutoGPTQ 9f7d3707,
# _get_perms and pack; its tests/test_repacking.py checks that the CUDA
# gptq_repack, which AutoGPTQ's and GPTQModel's convert_to_marlin use to
# save these checkpoints, gives the same B), written again here step by
# step with torch. The expected weight is computed from the codes and
# scales before any permutation: W[o, i] = s[i // g, o] * (q[i, o] - 8).
# Run in the sid chroot (torch 2.14):
#
#   cp quant/testdata/gptq_marlin/gen.py /srv/sid/out/genmarlin.py &&
#   ../shared/tools/debian.sh sid /srv/sid run python3 /out/genmarlin.py /out/gptq_marlin
import hashlib, json, os, sys

import torch
from safetensors.torch import save_file

out = sys.argv[1]
g = torch.Generator().manual_seed(20261206)


def perms():
    # _get_perms: the weight permutation of a run of 1024 tile elements, and the scales'
    base = []
    for i in range(32):
        col, p1 = i // 4, []
        for block in (0, 1):
            for row in (2 * (i % 4), 2 * (i % 4) + 1, 2 * (i % 4 + 4), 2 * (i % 4 + 4) + 1):
                p1.append(16 * row + col + 8 * block)
        for j in range(4):
            base += [p + 256 * j for p in p1]
    il = [0, 2, 4, 6, 1, 3, 5, 7]
    perm = torch.tensor([base[8 * (k // 8) + il[k % 8]] for k in range(1024)])
    sperm = [i + 8 * j for i in range(8) for j in range(8)]
    single = [2 * i + d for i in range(4) for d in (0, 1, 8, 9, 16, 17, 24, 25)]
    return perm, torch.tensor(sperm), torch.tensor(single)


PERM, SPERM, SINGLE = perms()


def pack(q, s, grouped):
    # q: int codes [K, N] in [0, 16) (w = W^T), s: half [G, N]; returns B int32 [K/16, 2N], s permuted
    K, N = q.shape
    s = s.reshape(-1, 64)[:, SPERM] if grouped else s.reshape(-1, 32)[:, SINGLE]
    s = s.reshape(-1, N).contiguous()
    w = q.reshape(K // 16, 16, N // 16, 16).permute(0, 2, 1, 3).reshape(K // 16, N * 16)
    w = w.reshape(-1, 1024)[:, PERM].reshape(K // 16, N * 16)
    B = torch.zeros(K // 16, N * 2, dtype=torch.int64)
    for i in range(8):
        B |= w[:, i::8].to(torch.int64) << (4 * i)
    return B.to(torch.uint32).view(torch.int32), s


def sha(t):
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


cases = {}
for name, gs, layers in (("group128", 128, (("model.layers.0.self_attn.o_proj", 256, 256, True),
                                            ("model.layers.0.mlp.down_proj", 384, 256, False),
                                            ("model.layers.0.mlp.gate_proj", 128, 256, False))),
                         ("group_all", -1, (("model.layers.0.mlp.up_proj", 128, 256, False),
                                            ("model.layers.0.mlp.gate_proj", 256, 256, True)))):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": gs, "desc_act": False,
                                   "sym": True, "checkpoint_format": "marlin"}}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1, sort_keys=True)
    tensors, logical = {}, []
    norm = torch.randn(64, generator=g).to(torch.float16)
    tensors["model.norm.weight"] = norm
    logical.append({"name": "model.norm.weight", "parts": ["model.norm.weight"], "shape": [64],
                    "sha256_f32": sha(norm.float()), "sha256_bf16": sha(norm.float().to(torch.bfloat16)),
                    "sha256_f16": sha(norm)})
    for X, K, N, bias in layers:
        G = 1 if gs in (-1, K) else K // gs
        q = torch.randint(0, 16, (K, N), generator=g)
        s = (torch.rand(G, N, generator=g) * 0.02 + 0.001).to(torch.float16)
        B, sp = pack(q, s, gs not in (-1, K))  # group_size == in: one group, as pack decides
        tensors[X + ".B"], tensors[X + ".s"] = B, sp
        tensors[X + ".workspace"] = torch.zeros(N // 128 * 16, dtype=torch.int32)
        grp = torch.arange(K) // (K if gs in (-1, K) else gs)
        W = (s.float()[grp] * (q.float() - 8)).t().contiguous()  # [N, K], exact in float32
        half = (s[grp] * (q - 8).to(torch.float16)).t().contiguous()  # the kernel's half product
        assert torch.equal(half, W.to(torch.float16))
        logical.append({"name": X + ".weight", "parts": [X + ".B", X + ".s"], "shape": [N, K],
                        "sha256_f32": sha(W), "sha256_bf16": sha(W.to(torch.bfloat16)), "sha256_f16": sha(half)})
        if bias:
            b = torch.randn(N, generator=g).to(torch.float16)
            tensors[X + ".bias"] = b
            logical.append({"name": X + ".bias", "parts": [X + ".bias"], "shape": [N], "sha256_f32": sha(b.float()),
                            "sha256_bf16": sha(b.float().to(torch.bfloat16)), "sha256_f16": sha(b)})
    save_file(tensors, os.path.join(d, "model.safetensors"))
    cases[name] = {"logical": logical, "hidden": sorted(n for n in tensors if n.endswith((".B", ".s", ".workspace")))}
with open(os.path.join(out, "EXPECTED.json"), "w") as f:
    json.dump({"generator": "quant/testdata/gptq_marlin/gen.py", "reference": "AutoGPTQ 9f7d37072917 qlinear_marlin.py",
               "torch": torch.__version__, "cases": cases}, f, indent=1, sort_keys=True)
    f.write("\n")
