# Writes the checkpoints of this directory with torch's own dtypes and
# safetensors' own torch writer, and EXPECTED.json: for each logical
# weight the sha256 of the float32 and bfloat16 values that torch's own
# code computes from the stored bytes. Schemes whose codes are torch
# dtypes: float8_e4m3fn codes, float8_e8m0fnu scales, float4_e2m1fn_x2
# codes (pack_uint4 of torch's own _f32_to_floatx_unpacked). Run in the sid
# chroot (torch 2.14, safetensors 0.8):
#
#   cp quant/testdata/torch214/gen.py /srv/sid/out/ &&
#   ../shared/tools/debian.sh sid /srv/sid run python3 /out/gen.py /out/torch214
#
# The tensors and EXPECTED.json are the same on every run; the order of a torchao
# file's __metadata__ keys in its header is not (safetensors writes a hash map).
#
# References, all in torch 2.14 itself:
#   - torch.distributed.checkpoint.quantized_hf_storage.QuantizedHuggingFaceStorageReader:
#     _dequantize_tensor (block FP8, 128x128, target float32 / bfloat16) and
#     _dequantize_tensor_mxfp4 (gpt-oss MXFP4, openai's code), then .transpose(1, 2)
#     as transformers does;
#   - torch.testing._internal.common_quantized: to_mxfp (torchao v0.12's MX
#     quantizer, RCEIL: MXFP8 and MXFP4 codes and E8M0 scales), _f32_to_floatx_unpacked /
#     _floatx_unpacked_to_f32 (E2M1 encode/decode), pack_uint4, to_blocked /
#     from_blocked (the 128x4 scale swizzle), from_blocked_format (MXFP8 to bfloat16);
#   - torch's casts float8_e4m3fn / float8_e8m0fnu -> float32 (E8M0 255 -> NaN).
# Formulas written with those, per scheme: ModelOpt NVFP4QTensor.dequantize
# (per_block_scale = f32(e4m3 s) * weight_scale_2 first); compressed-tensors
# _dequantize (f32(weight_scale) / weight_global_scale, then x * scale); torchao (pytorch/ao
# 36027d82d1ad) _dequantize_affine_float8, MXTensor to_dtype with get_fp_scale,
# NVFP4Tensor dequantize with get_hp_scales; DeepSeek weight_dequant x.to(f32) * s.
import hashlib, json, os, sys

import safetensors
import torch
from safetensors.torch import save_file
from torch.distributed.checkpoint.quantized_hf_storage import QuantizedHuggingFaceStorageReader as Q
from torch.testing._internal.common_quantized import (
    _f32_to_floatx_unpacked, _floatx_unpacked_to_f32, from_blocked, from_blocked_format, pack_uint4, to_blocked, to_mxfp)
from types import SimpleNamespace

out = sys.argv[1]
g = torch.Generator().manual_seed(20261206)
cases = {}


def randn(*shape, scale=1.0):
    return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16)


def sha(t):
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def sha_nan(t):
    # every NaN written as the quiet NaN 0x7FC00000 (float32) / 0x7FC0 (bfloat16): torch's own NaN bits
    # depend on the path (e4m3 0x7F -> 0x7FF00000, 0xFF -> 0xFFF00000, E8M0 255 -> 0x7F800001, bfloat16
    # NaN 0xFFFF from the vectorised cast, 0x7FC0 from the scalar one) and carry no value
    t = t.contiguous().clone()
    t[torch.isnan(t)] = float("nan")
    bits = t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.int16)
    bits[torch.isnan(t)] = 0x7FC00000 if t.dtype == torch.float32 else 0x7FC0
    return sha(bits)


def reader(dt):
    r = Q.__new__(Q)
    r.block_size, r.target_dtype = 128, dt
    return r


class Case:
    def __init__(self, name, note, config=None, hf_quant=None):
        self.name, self.note, self.config, self.hf_quant = name, note, config, hf_quant
        self.tensors, self.logical, self.meta = {}, [], None

    def plain(self, name, t):
        self.tensors[name] = t
        self.logical.append({"name": name, "parts": [name], "f32": t.to(torch.float32), "bf16": t.to(torch.bfloat16)})

    def quant(self, name, parts, f32, bf16):
        self.logical.append({"name": name, "parts": parts, "f32": f32, "bf16": bf16})

    def write(self):
        d = os.path.join(out, self.name)
        os.makedirs(d, exist_ok=True)
        if self.config is not None:
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(self.config, f, indent=1, sort_keys=True)
        if self.hf_quant is not None:
            with open(os.path.join(d, "hf_quant_config.json"), "w") as f:
                json.dump(self.hf_quant, f, indent=1, sort_keys=True)
        save_file({k: v.contiguous() for k, v in self.tensors.items()}, os.path.join(d, "model.safetensors"), metadata=self.meta)
        cases[self.name] = {"note": self.note, "logical": [
            {"name": l["name"], "shape": list(l["f32"].shape), "parts": l["parts"],
             "sha256_f32": sha(l["f32"].to(torch.float32)), "sha256_bf16": sha(l["bf16"]),
             "sha256_f32_nan": sha_nan(l["f32"].to(torch.float32)), "sha256_bf16_nan": sha_nan(l["bf16"]),
             "nan": int(torch.isnan(l["f32"]).sum())} for l in self.logical]}


def fp8_block_quant(w, edge=True):
    # a 128x128 block's amax / 448, the codes by torch's own cast
    M, N = w.shape
    s = torch.empty(-(-M // 128), -(-N // 128), dtype=torch.float32)
    q = torch.empty(M, N, dtype=torch.float8_e4m3fn)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            b = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128].float()
            s[i, j] = b.abs().max() / 448
            q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = (b / s[i, j]).to(torch.float8_e4m3fn)
    if edge:  # every finite code and both NaNs once, in the first block
        codes = torch.tensor([c for c in range(256) if c & 0x7f != 0x7f], dtype=torch.uint8)
        q.view(torch.uint8).view(-1)[:codes.numel()] = codes
        q.view(torch.uint8)[1, :2] = torch.tensor([0x7f, 0xff], dtype=torch.uint8)
    return q, s


def block_expand(s, M, N, b=128):
    return s.repeat_interleave(b, 0)[:M].repeat_interleave(b, 1)[:, :N]


def dcp_block(q, s):
    M, N = q.shape
    info = ((0, s.shape[0]), (0, s.shape[1]), slice(0, M), slice(0, N))
    f = reader(torch.float32)._dequantize_tensor(q, s, torch.Size([M, N]), info)
    b = reader(torch.bfloat16)._dequantize_tensor(q, s, torch.Size([M, N]), info)
    mine = q.to(torch.float32) * block_expand(s, M, N)
    assert torch.equal(mine.view(torch.int32), f.view(torch.int32)), "the DCP reader and the formula differ"
    return f, b


def fp8_block():
    c = Case("fp8_block", "block FP8 (DeepSeek-V3): torch DCP _dequantize_tensor, f32(w) * scale_inv[i//128, j//128]",
             {"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                      "weight_block_size": [128, 128]}})
    c.plain("model.norm.weight", randn(64))
    for X, (M, N) in (("model.layers.0.mlp.down_proj", (136, 264)), ("model.layers.0.self_attn.o_proj", (128, 128))):
        q, s = fp8_block_quant(randn(M, N, scale=0.02))
        c.tensors[X + ".weight"], c.tensors[X + ".weight_scale_inv"] = q, s
        c.quant(X + ".weight", [X + ".weight", X + ".weight_scale_inv"], *dcp_block(q, s))
    c.write()


def fp8_ue8m0():
    c = Case("fp8_ue8m0", "DeepSeek-V3.1 scale_fmt ue8m0, F8_E8M0 scale_inv: torch DCP _dequantize_tensor with "
             "scale_inv.to(float32) (torch's E8M0 cast: 2^(e-127), 255 NaN)",
             {"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                      "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}})
    X = "model.layers.0.mlp.gate_proj"
    q, s = fp8_block_quant(randn(200, 260, scale=0.02))
    # the scale rounded up to a power of two, as DeepSeek's ue8m0 does, stored as E8M0
    e = (torch.ceil(torch.log2(s)) + 127).to(torch.uint8)
    e.view(-1)[:3] = torch.tensor([0, 254, 255], dtype=torch.uint8)  # 2^-127 (subnormal), 2^127 (overflows), NaN
    se = e.view(torch.float8_e8m0fnu)
    c.tensors[X + ".weight"], c.tensors[X + ".weight_scale_inv"] = q, se
    c.quant(X + ".weight", [X + ".weight", X + ".weight_scale_inv"], *dcp_block(q, se.to(torch.float32)))
    c.write()


def mxfp8():
    c = Case("mxfp8", "transformers finegrained MXFP8: codes and E8M0 scales from torch's to_mxfp (RCEIL), "
             "f32(w) * f32(s) per 1x32; bf16 by torch's from_blocked_format",
             {"quantization_config": {"quant_method": "fp8", "weight_format": "mxfp8", "activation_scheme": "dynamic"}})
    X = "model.layers.0.mlp.up_proj"
    w = randn(40, 256, scale=0.05)
    w[3, 32:64] = float("nan")  # a NaN block: torch writes E8M0 255
    w[5, 0:32] *= 2.0 ** -120  # a block of subnormal codes
    s, q = to_mxfp(w, 32, "mxfp8")
    assert (s.view(torch.uint8) == 255).any()
    c.tensors[X + ".weight"], c.tensors[X + ".weight_scale_inv"] = q, s
    f = q.to(torch.float32) * torch.repeat_interleave(s.to(torch.float32), 32, dim=1)
    b = from_blocked_format(q, s, 32)
    assert torch.equal(b.view(torch.int16), f.to(torch.bfloat16).view(torch.int16))
    c.quant(X + ".weight", [X + ".weight", X + ".weight_scale_inv"], f, b)
    c.write()


def mxfp4():
    E, H, I = 2, 64, 32
    c = Case("mxfp4", "gpt-oss MXFP4: codes and scales from torch's to_mxfp (mxfp4); torch DCP "
             "_dequantize_tensor_mxfp4 then .transpose(1, 2)",
             {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_local_experts": E,
              "hidden_size": H, "intermediate_size": I,
              "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
                  "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}})
    P0 = "model.layers.0.mlp.experts."
    for P, R, C in ((P0 + "gate_up_proj", 2 * I, H), (P0 + "down_proj", H, I)):
        w = randn(E, R, C, scale=0.05)
        s, q = to_mxfp(w.reshape(E * R, C), 32, "mxfp4")
        assert q.dtype == torch.float4_e2m1fn_x2
        G = C // 32
        blocks = q.view(torch.uint8).reshape(E, R, G, 16)
        scales = s.view(torch.uint8).reshape(E, R, G)
        c.tensors[P + "_blocks"], c.tensors[P + "_scales"] = blocks, scales
        c.tensors[P + "_bias"] = randn(E, R)
        req = SimpleNamespace(storage_offsets=[0, 0, 0], lengths=[E, R, C])
        f = reader(torch.float32)._dequantize_tensor_mxfp4(blocks, scales, req, 0, 0).transpose(1, 2)
        b = reader(torch.bfloat16)._dequantize_tensor_mxfp4(blocks, scales, req, 0, 0).transpose(1, 2)
        c.quant(P, [P + "_blocks", P + "_scales"], f, b)
        c.logical.append({"name": P + "_bias", "parts": [P + "_bias"], "f32": c.tensors[P + "_bias"].float(),
                          "bf16": c.tensors[P + "_bias"]})
    c.write()


def e2m1_codes(x):
    # torch's own E2M1 encoder (round to nearest even, saturating), two a byte, low nibble first
    return pack_uint4(_f32_to_floatx_unpacked(x.float().contiguous(), 2, 1))


def e2m1_decode(packed):
    # unpack_uint4 as torchao / onnx's unpack_float4x2_as_uint8 (low nibble first), torch's decoder
    u = packed.view(torch.uint8)
    nib = torch.stack([u & 15, u >> 4], dim=-1).reshape(*u.shape[:-1], u.shape[-1] * 2)
    return _floatx_unpacked_to_f32(nib.contiguous(), 2, 1)


def nvfp4_modelopt():
    c = Case("nvfp4", "ModelOpt NVFP4: E2M1 codes by torch's _f32_to_floatx_unpacked + pack_uint4, decoded by "
             "_floatx_unpacked_to_f32; W = code * (f32(e4m3 s) * weight_scale_2) (NVFP4QTensor.dequantize)",
             {"architectures": ["LlamaForCausalLM"], "model_type": "llama"},
             {"producer": {"name": "modelopt", "version": "0.29.0"},
              "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                               "exclude_modules": ["lm_head"]}})
    X = "model.layers.0.self_attn.o_proj"
    O, I = 48, 128
    w = randn(O, I, scale=0.05).float()
    s2 = (w.abs().max() / (6 * 448)).reshape(())
    blk = w.reshape(O, I // 16, 16).abs().amax(-1) / 6 / s2
    se = blk.to(torch.float8_e4m3fn)
    codes = e2m1_codes(w / torch.repeat_interleave(se.to(torch.float32) * s2, 16, dim=1))
    c.tensors[X + ".weight"], c.tensors[X + ".weight_scale"] = codes, se
    c.tensors[X + ".weight_scale_2"], c.tensors[X + ".input_scale"] = s2, torch.tensor(0.05)
    per_block = se.to(torch.float32) * s2
    f = e2m1_decode(codes) * torch.repeat_interleave(per_block, 16, dim=1)
    c.quant(X + ".weight", [X + ".weight", X + ".weight_scale", X + ".weight_scale_2"], f, f.to(torch.bfloat16))
    c.write()


def nvfp4_ct():
    c = Case("ct_nvfp4", "compressed-tensors nvfp4-pack-quantized: E2M1 codes by torch's _f32_to_floatx_unpacked + "
             "pack_uint4; _dequantize with a global scale: scale = f32(weight_scale) / weight_global_scale, x * scale",
             {"quantization_config": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
                                      "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                                          "num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}}}})
    X = "model.layers.0.mlp.gate_proj"
    O, I = 40, 96
    w = randn(O, I, scale=0.05).float()
    gs = (448 * 6 / w.abs().max()).reshape(1)  # compressed-tensors' global scale: FP8 max * FP4 max / amax
    se = (w.reshape(O, I // 16, 16).abs().amax(-1) / 6 * gs).to(torch.float8_e4m3fn)
    scale = se.to(torch.float32) / gs
    codes = e2m1_codes(w / torch.repeat_interleave(scale, 16, dim=1))
    c.tensors[X + ".weight_packed"], c.tensors[X + ".weight_scale"] = codes, se
    c.tensors[X + ".weight_global_scale"], c.tensors[X + ".input_global_scale"] = gs, torch.ones(1)
    f = e2m1_decode(codes) * torch.repeat_interleave(scale, 16, dim=1)
    c.quant(X + ".weight", [X + ".weight_packed", X + ".weight_scale", X + ".weight_global_scale"], f, f.to(torch.bfloat16))
    c.write()


def ao_entry(c, name, typ, data, names):
    c.meta[name] = json.dumps({"_type": typ, "_data": data, "_tensor_data_names": names})
    c.meta["tensor_names"] = json.dumps(json.loads(c.meta["tensor_names"]) + [name])


def ao_dt(n):
    return {"_type": "torch.dtype", "_data": n}


def ao_case(name, note):
    c = Case(name, note, {"quantization_config": {"quant_method": "torchao", "quant_type": {"default": {"_type": "X"}}}})
    c.meta = {"tensor_names": "[]"}
    c.tensors["model.norm.weight"] = randn(64)
    c.logical.append({"name": "model.norm.weight", "parts": ["model.norm.weight"],
                      "f32": c.tensors["model.norm.weight"].float(), "bf16": c.tensors["model.norm.weight"]})
    c.meta["model.norm.weight"] = json.dumps({"_type": "Tensor"})
    c.meta["tensor_names"] = json.dumps(["model.norm.weight"])
    return c


def ao_float8():
    c = ao_case("ao_float8", "torchao Float8Tensor: _dequantize_affine_float8, f32(qdata) * scale expanded (row and "
                "128x128 block scales), then to bfloat16")
    for W, (N, K), blk in (("model.layers.0.mlp.up_proj.weight", (64, 96), (1, 96)),
                           ("model.layers.0.mlp.down_proj.weight", (128, 256), (128, 128))):
        w = randn(N, K, scale=0.03).float()
        s = w.reshape(N // blk[0], blk[0], K // blk[1], blk[1]).abs().amax((1, 3)) / 448
        q = (w / s.repeat_interleave(blk[0], 0).repeat_interleave(blk[1], 1)).to(torch.float8_e4m3fn)
        pre = W[:-len("weight")] + "_weight_"
        c.tensors[pre + "qdata"], c.tensors[pre + "scale"] = q, s
        ao_entry(c, W, "Float8Tensor", {"block_size": list(blk), "mm_config": {"_type": "Float8MMConfig", "_data": {
            "use_fast_accum": True}}, "act_quant_kwargs": None, "kernel_preference": {
            "_type": "KernelPreference", "_data": "AUTO"}, "dtype": ao_dt("bfloat16")}, ["qdata", "scale"])
        f = q.to(torch.float32) * s.repeat_interleave(blk[0], 0).repeat_interleave(blk[1], 1)
        c.quant(W, [pre + "qdata", pre + "scale"], f, f.to(torch.bfloat16))
    c.write()


def get_fp_scale(e):  # torchao mx_tensor.py get_fp_scale
    e = e.view(torch.uint8)
    s = torch.pow(torch.full_like(e.to(torch.int16), 2.0, dtype=torch.float32), e.to(torch.int16) - 127)
    return torch.where(e != 255, s, float("nan"))


def ao_mx():
    c = ao_case("ao_mx", "torchao MXTensor, orig_dtype bfloat16, scales swizzled by torch's to_blocked: "
                "to_dtype's code.to(bf16) * get_fp_scale(e).to(bf16) in bfloat16; fp4 codes decoded by "
                "_floatx_unpacked_to_f32")
    for W, (M, K), elem in (("model.layers.0.mlp.down_proj.weight", (136, 160), "float8_e4m3fn"),
                            ("model.layers.1.mlp.down_proj.weight", (40, 256), "float4_e2m1fn_x2")):
        w = randn(M, K, scale=0.05)
        s, q = to_mxfp(w, 32, "mxfp8" if elem == "float8_e4m3fn" else "mxfp4")
        pre = W[:-len("weight")] + "_weight_"
        sw = to_blocked(s).view(-(-M // 128) * 32, -(-K // 128) * 16)
        assert torch.equal(from_blocked(w, sw.flatten(), 32).view(torch.uint8), s.view(torch.uint8))
        c.tensors[pre + "qdata"] = q if elem == "float8_e4m3fn" else q.view(torch.uint8)
        c.tensors[pre + "scale"] = sw
        ao_entry(c, W, "MXTensor", {"elem_dtype": ao_dt(elem), "block_size": 32, "orig_dtype": ao_dt("bfloat16"),
                                    "kernel_preference": {"_type": "KernelPreference", "_data": "EMULATED"},
                                    "act_quant_kwargs": None, "is_swizzled_scales": True}, ["qdata", "scale"])
        hp = q.to(torch.bfloat16) if elem == "float8_e4m3fn" else e2m1_decode(q).to(torch.bfloat16)
        sf = get_fp_scale(from_blocked(w, sw.flatten(), 32)).reshape(-1, 1).to(torch.bfloat16)
        b = (hp.reshape(-1, 32) * sf).reshape(M, K)
        c.quant(W, [pre + "qdata", pre + "scale"], b.float(), b)
    c.write()


def ao_nvfp4():
    c = ao_case("ao_nvfp4", "torchao NVFP4Tensor, scales swizzled by torch's to_blocked, per_tensor_scale: "
                "f32(code) * (per_tensor_scale * f32(e4m3 s)) (dequantize, get_hp_scales), then to bfloat16")
    W = "model.layers.0.mlp.gate_proj.weight"
    M, K = 150, 96
    w = randn(M, K, scale=0.05).float()
    pts = (w.abs().max() / (6 * 448)).reshape(())
    se = (w.reshape(M, K // 16, 16).abs().amax(-1) / 6 / pts).to(torch.float8_e4m3fn)
    codes = e2m1_codes(w / torch.repeat_interleave(pts * se.to(torch.float32), 16, dim=1))
    sw = to_blocked(se.view(torch.uint8)).view(torch.float8_e4m3fn).view(-(-M // 128) * 32, -(-K // 64) * 16)
    pre = W[:-len("weight")] + "_weight_"
    c.tensors[pre + "qdata"], c.tensors[pre + "scale"], c.tensors[pre + "per_tensor_scale"] = codes, sw, pts
    ao_entry(c, W, "NVFP4Tensor", {"block_size": 16, "orig_dtype": ao_dt("bfloat16"), "is_swizzled_scales": True,
                                   "use_triton_kernel": False, "act_quant_kwargs": None},
             ["qdata", "scale", "per_tensor_scale"])
    hs = pts * from_blocked(torch.empty(M, K), sw.view(torch.uint8).flatten(), 16).view(torch.float8_e4m3fn).to(torch.float)
    f = (e2m1_decode(codes).view(M, K // 16, 16) * hs.view(M, K // 16, 1).to(torch.float32)).view(M, K)
    c.quant(W, [pre + "qdata", pre + "scale", pre + "per_tensor_scale"], f, f.to(torch.bfloat16))
    c.write()


for fn in (fp8_block, fp8_ue8m0, mxfp8, mxfp4, nvfp4_modelopt, ao_float8, ao_mx, ao_nvfp4, nvfp4_ct):
    fn()
with open(os.path.join(out, "EXPECTED.json"), "w") as f:
    json.dump({"generator": "quant/testdata/torch214/gen.py", "torch": torch.__version__,
               "safetensors": safetensors.__version__, "cases": cases}, f, indent=1, sort_keys=True)
    f.write("\n")
