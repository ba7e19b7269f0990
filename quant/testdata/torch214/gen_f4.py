# Writes ../torch214f4: FP4 checkpoints whose E2M1 codes are saved with
# torch's own dtype, torch.float4_e2m1fn_x2, by safetensors' torch writer,
# which stores them as dtype F4 with the element shape (a [N, K/2] x2 tensor
# is F4 [N, K]); and a plain F4 tensor. The same helpers, references and
# EXPECTED.json layout as gen.py beside it (imported from it). Run in the
# sid chroot (torch 2.14, safetensors 0.8):
#
#   cp quant/testdata/torch214/gen*.py /srv/sid/out/ &&
#   ../shared/tools/debian.sh sid /srv/sid run python3 /out/gen_f4.py /out/torch214f4
#
# It first checks the two facts tensorfs relies on: torch's x2 element holds
# element 2i in its low nibble (pack_uint4's order, what the U8 formats
# store), and safetensors writes an x2 tensor as F4, shape [.., 2*last], the
# same bytes.
import os, struct, sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen
from gen import Case, ao_case, ao_dt, ao_entry, e2m1_codes, e2m1_decode, get_fp_scale, randn, to_mxfp

gen.out = sys.argv[1]
X2 = torch.float4_e2m1fn_x2


def f4(codes):
    # the U8 bytes of two E2M1 codes each, as torch's own fp4 dtype
    return codes.view(torch.uint8).view(X2)


def check_writer():
    u = gen._f32_to_floatx_unpacked(torch.tensor([[0.5, 1.0, 1.5, -6.0]]), 2, 1)  # codes 1 2 3 15
    x = gen.pack_uint4(u).view(X2)
    assert x.view(torch.uint8).tolist() == [[0x21, 0xF3]], x.view(torch.uint8)
    p = os.path.join(gen.out, "probe.safetensors")
    os.makedirs(gen.out, exist_ok=True)
    gen.save_file({"x": x}, p)
    b = open(p, "rb").read()
    os.remove(p)
    n = struct.unpack("<Q", b[:8])[0]
    assert b[8:8 + n].rstrip() == b'{"x":{"dtype":"F4","shape":[1,4],"data_offsets":[0,2]}}', b[8:8 + n]
    assert b[8 + n:] == bytes([0x21, 0xF3])


def nvfp4_modelopt():
    gen.nvfp4_modelopt(32, 64, f4, "; weight saved as float4_e2m1fn_x2 (F4 [out, in]), and fused experts P F4 "
                       "[E, R, C] with weight_scale_2 per expert by the same formula", experts)


def experts(c):
    P = "model.layers.1.mlp.experts.down_proj"
    E, R, C = 2, 16, 32
    w = randn(E, R, C, scale=0.05).float()
    s2 = w.reshape(E, -1).abs().amax(-1) / (6 * 448)
    se = (w.reshape(E, R, C // 16, 16).abs().amax(-1) / 6 / s2.view(E, 1, 1)).to(torch.float8_e4m3fn)
    per = se.to(torch.float32) * s2.view(E, 1, 1)
    codes = e2m1_codes(w / torch.repeat_interleave(per, 16, dim=2))
    c.tensors[P], c.tensors[P + "_weight_scale"], c.tensors[P + "_weight_scale_2"] = f4(codes), se, s2
    f = e2m1_decode(codes) * torch.repeat_interleave(per, 16, dim=2)
    c.quant(P, [P, P + "_weight_scale", P + "_weight_scale_2"], f, f.to(torch.bfloat16))


def nvfp4_ct():
    gen.nvfp4_ct(24, 48, f4, "; weight_packed saved as float4_e2m1fn_x2 (F4 [out, in])")


def mxfp4():
    gen.mxfp4(True, "; _blocks saved as those float4_e2m1fn_x2 codes (F4 [E, R, G, 32]), the DCP reader given their bytes")


def ao_fp4():
    c = ao_case("ao_fp4", "torchao MXTensor (elem float4_e2m1fn_x2) and NVFP4Tensor with qdata saved as "
                "float4_e2m1fn_x2 (F4 [M, K]), scales plain: gen.py's ao_mx and ao_nvfp4 formulas")
    W = "model.layers.0.mlp.down_proj.weight"
    M, K = 24, 64
    w = randn(M, K, scale=0.05)
    s, q = to_mxfp(w, 32, "mxfp4")
    pre = W[:-len("weight")] + "_weight_"
    c.tensors[pre + "qdata"], c.tensors[pre + "scale"] = q, s
    ao_entry(c, W, "MXTensor", {"elem_dtype": ao_dt("float4_e2m1fn_x2"), "block_size": 32, "orig_dtype": ao_dt("bfloat16"),
                                "kernel_preference": {"_type": "KernelPreference", "_data": "EMULATED"},
                                "act_quant_kwargs": None, "is_swizzled_scales": False}, ["qdata", "scale"])
    b = (e2m1_decode(q).to(torch.bfloat16).reshape(-1, 32) * get_fp_scale(s).reshape(-1, 1).to(torch.bfloat16)).reshape(M, K)
    c.quant(W, [pre + "qdata", pre + "scale"], b.float(), b)
    W = "model.layers.0.mlp.gate_proj.weight"
    M, K = 20, 32
    w = randn(M, K, scale=0.05).float()
    pts = (w.abs().max() / (6 * 448)).reshape(())
    se = (w.reshape(M, K // 16, 16).abs().amax(-1) / 6 / pts).to(torch.float8_e4m3fn)
    codes = e2m1_codes(w / torch.repeat_interleave(pts * se.to(torch.float32), 16, dim=1))
    pre = W[:-len("weight")] + "_weight_"
    c.tensors[pre + "qdata"], c.tensors[pre + "scale"], c.tensors[pre + "per_tensor_scale"] = f4(codes), se, pts
    ao_entry(c, W, "NVFP4Tensor", {"block_size": 16, "orig_dtype": ao_dt("bfloat16"), "is_swizzled_scales": False,
                                   "use_triton_kernel": False, "act_quant_kwargs": None},
             ["qdata", "scale", "per_tensor_scale"])
    f = (e2m1_decode(codes).view(M, K // 16, 16) * (pts * se.to(torch.float32)).view(M, K // 16, 1)).view(M, K)
    c.quant(W, [pre + "qdata", pre + "scale", pre + "per_tensor_scale"], f, f.to(torch.bfloat16))
    c.write()


def plain():
    # no quantization: an F4 tensor is a tensor of E2M1 values (torch's decoder), with every code once
    c = Case("plain", "a plain float4_e2m1fn_x2 tensor (F4 [4, 8]) beside a bfloat16 one, no quantization: "
             "values by torch's _floatx_unpacked_to_f32")
    nib = torch.cat([torch.arange(16, dtype=torch.uint8),
                     gen._f32_to_floatx_unpacked(randn(16).float() * 3, 2, 1)]).reshape(4, 8)
    x = gen.pack_uint4(nib).view(X2)
    c.tensors["model.embed_f4"], c.tensors["model.norm.weight"] = x, randn(8)
    f = gen._floatx_unpacked_to_f32(nib, 2, 1)
    c.logical.append({"name": "model.embed_f4", "parts": ["model.embed_f4"], "f32": f, "bf16": f.to(torch.bfloat16)})
    c.plain("model.norm.weight", c.tensors["model.norm.weight"])
    c.write()


check_writer()
for fn in (nvfp4_modelopt, nvfp4_ct, mxfp4, ao_fp4, plain):
    fn()
gen.expected("quant/testdata/torch214/gen_f4.py")
