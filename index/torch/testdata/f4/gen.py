# Writes the float4_e2m1fn_x2 fixtures of index/torch's TestFloat4X2
# (torch_f4_test.go) and EXPECTED.json. Written with torch 2.14.1+debian
# and safetensors 0.8.0 in the sid chroot:
#   ../shared/tools/debian.sh sid /srv/sid run sh -c 'cd index/torch/testdata/f4 && python3 gen.py'
# Expected values come from torch's own bytes (the x2 tensor viewed as
# uint8, low nibble = even element) and the E2M1 formula; the byte order
# and the [.., n] -> F4 [.., 2n] element shape are checked against
# safetensors' torch writer, which stores the same bytes as F4.
import json, struct, torch
import safetensors.torch

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]

def f32(code):
    v = E2M1[code & 7]
    return -v if code & 8 else v

def expected(x):
    u = x.view(torch.uint8).reshape(-1).tolist()
    out = []
    for b in u:
        out += [f32(b & 15), f32(b >> 4)]
    assert x.untyped_storage().nbytes() >= x.numel()
    return out

def f4shape(x):
    s = list(x.shape)
    return s[:-1] + [2 * s[-1]] if s else [2]

def check_safetensors(name, x):
    blob = safetensors.torch.save({name: x})
    n = struct.unpack("<Q", blob[:8])[0]
    h = json.loads(blob[8:8 + n])[name]
    assert h["dtype"] == "F4" and h["shape"] == f4shape(x), h
    assert blob[8 + n:] == bytes(x.view(torch.uint8).reshape(-1).tolist())

g = torch.Generator().manual_seed(44)
w = torch.arange(256, dtype=torch.uint8).reshape(16, 16)  # every byte
w = w[torch.randperm(16, generator=g)].contiguous().view(torch.float4_e2m1fn_x2)
c3 = torch.randint(0, 256, (2, 3, 4), dtype=torch.uint8, generator=g).view(torch.float4_e2m1fn_x2)
sd = {
    "w": w,                      # [16, 16] -> F4 [16, 32]
    "rows": w[3:5],              # a row-major view at storage offset 48
    "c3": c3,                    # 3-d
    "z": w[1, 1],                # 0-d: one byte, served as F4 [2]
    "e": w[:0],                  # empty
    "t": w.t(),                  # transposed: listed unserved
    "cols": w[:, 2:4],           # strides (16, 1): listed unserved
    "f": torch.tensor([1.5, -2.0]),
}
served = ["w", "rows", "c3", "z", "e"]
for k in served:
    if sd[k].dim() and sd[k].numel():
        check_safetensors(k, sd[k].clone())
exp = {"torch": torch.__version__, "safetensors": "0.8.0", "tensors": {}, "unserved": {}}
for k in served:
    exp["tensors"][k] = {"shape": f4shape(sd[k]), "f32": expected(sd[k])}
for k in ["t", "cols"]:
    x = sd[k]
    exp["unserved"][k] = {"shape": list(x.shape), "stride": list(x.stride()), "offset": x.storage_offset()}
torch.save(sd, "f4.pt")
torch.save(sd, "f4_legacy.pt", _use_new_zipfile_serialization=False)
back = torch.load("f4.pt")
for k in served:
    assert back[k].shape == sd[k].shape and back[k].dtype == torch.float4_e2m1fn_x2
    assert torch.equal(back[k].view(torch.uint8), sd[k].view(torch.uint8))
# torch 2.14 writes the legacy file (UntypedStorage persistent ids, byte
# counts, _rebuild_tensor_v3 naming the dtype) but cannot load it back:
# its legacy persistent_load asks UntypedStorage for a dtype.
try:
    torch.load("f4_legacy.pt")
    exp["legacy_torch_load"] = "ok"
except AttributeError as e:
    exp["legacy_torch_load"] = "AttributeError: " + str(e)
with open("EXPECTED.json", "w") as f:
    json.dump(exp, f, sort_keys=True)
    f.write("\n")
