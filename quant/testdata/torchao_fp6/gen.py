# gen.py writes e2m3.txt and e3m2.txt: the float32 bits (hex, one line per
# byte 0..255) that torchao's _floatx_unpacked_to_f32 gives for every byte
# of a uint8 tensor, for fp6_e2m3 (ebits 2, mbits 3) and fp6_e3m2 (ebits 3,
# mbits 2). The function below repeats, operation for operation, the torch
# code of torchao/prototype/custom_fp_utils.py at pytorch/ao 36027d82d1ad
# (read from its source; torchao is not installed here). uint8 tensor
# arithmetic wraps mod 256 as in torchao. Run: /usr/bin/python3 gen.py
# (written with torch 1.13).
import torch

EBITS_F32, MBITS_F32 = 8, 23
F32_EXP_BIAS = (1 << (EBITS_F32 - 1)) - 1


def floatx_unpacked_to_f32(x, ebits, mbits):
    assert x.dtype == torch.uint8
    sign_mask = 1 << (ebits + mbits)
    exp_bias = (1 << (ebits - 1)) - 1
    mantissa_mask = (1 << mbits) - 1
    sign_lp = x & sign_mask
    x_pos = x ^ sign_lp
    zero_mask = x_pos == 0
    denormal_mask = torch.logical_and((x_pos > 0), ((x_pos >> mbits) == 0))
    exp_biased_lp = x_pos >> mbits
    exp_biased_f32 = exp_biased_lp - exp_bias + F32_EXP_BIAS
    assert exp_biased_f32.dtype == torch.uint8
    exp_biased_f32 = exp_biased_f32.to(torch.int32) << MBITS_F32
    mantissa_lp_int32 = (x_pos & mantissa_mask).to(torch.int32)
    mantissa_f32 = mantissa_lp_int32 << (MBITS_F32 - mbits)
    result = exp_biased_f32 | mantissa_f32
    result[zero_mask] = 0
    denormal_exp_biased = 1 - exp_bias + F32_EXP_BIAS
    assert mbits != 1
    for i in range(mbits):
        for mantissa_cmp in range(1 << i, 1 << (i + 1)):
            left_shift = mbits - i
            mantissa_f32 = (mantissa_cmp - (1 << i)) << (left_shift + MBITS_F32 - mbits)
            exp_biased_f32 = (denormal_exp_biased - left_shift) << MBITS_F32
            mantissa_lp_int32[mantissa_lp_int32 == mantissa_cmp] = exp_biased_f32 + mantissa_f32
    result = torch.where(denormal_mask, mantissa_lp_int32, result)
    sign_f32 = sign_lp.to(torch.int32) << (MBITS_F32 - mbits + EBITS_F32 - ebits)
    result = result | sign_f32
    return result.view(torch.float)


x = torch.arange(256, dtype=torch.int32).to(torch.uint8)
for name, e, m in (("e2m3", 2, 3), ("e3m2", 3, 2)):
    f = floatx_unpacked_to_f32(x, e, m)
    bits = f.view(torch.int32).tolist()
    with open(name + ".txt", "w") as out:
        for b in bits:
            out.write("%08x\n" % (b & 0xFFFFFFFF))
