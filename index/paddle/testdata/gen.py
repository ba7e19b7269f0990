# Writes the PaddlePaddle fixtures of this directory with numpy and
# pickle only, the way paddle.save writes them (python/paddle/framework/
# io.py: _build_saved_state_dict, _unpack_saved_dict, _pickle_save's
# reduce_varbase and reduce_LoDTensor), and EXPECTED.json: per file, per
# tensor name (keys joined by "/"), dtype, shape and the sha256 of the
# C-order little-endian bytes as paddle.load gives them
# (_pack_loaded_dict joins NAME@@.N slices). Run: python3 gen.py
import hashlib, json, math, pickle, sys
import numpy as np

rng = np.random.default_rng(5)

def unpack_saved_dict(saved_obj, protocol, max_bytes):
    # _unpack_saved_dict with 2**30 - 1 replaced by max_bytes, so that
    # small fixtures split as big parameters do.
    temp, infor = {}, {}
    if 1 < protocol < 4 and isinstance(saved_obj, dict):
        for key, value in saved_obj.items():
            if isinstance(value, np.ndarray):
                MAX = int(max_bytes / value.dtype.itemsize)
                num = np.prod(value.shape)
                if num > MAX:
                    infor[key] = {"OriginShape": value.shape, "slices": []}
                    value = value.flatten()
                    for i in range(int(math.ceil(num * 1.0 / MAX))):
                        part = key + "@@." + str(i)
                        infor[key]["slices"].append(part)
                        temp[part] = value[i * MAX: MAX * (i + 1)]
    if infor:
        for key, value in infor.items():
            if key in saved_obj:
                saved_obj.pop(key)
                for part in value["slices"]:
                    saved_obj[part] = temp[part]
        saved_obj["UnpackBigParamInfor@@"] = infor
    return saved_obj

class Tensor:  # paddle.Tensor as _pickle_save reduces it
    def __init__(self, name, data): self.name, self.data = name, data
    def __reduce__(self): return (tuple, ((self.name, self.data),))

class LoDTensor:
    def __init__(self, data): self.data = data
    def __reduce__(self): return (eval, ("data", {"data": self.data}))

def state_dict():
    return {"linear_0.w_0": rng.standard_normal((4, 3)).astype("float32"),
            "linear_0.b_0": rng.standard_normal(3).astype("float32"),
            "emb.weight": rng.standard_normal((7, 5)).astype("float16"),
            "bn._mean": np.arange(5, dtype="float64"), "step": np.array(3, dtype="int64"),
            "mask": rng.standard_normal(6) > 0, "ids": np.arange(-4, 4, dtype="int32"),
            "empty": np.zeros((0, 2), "float32"), "fortran": np.asfortranarray(rng.standard_normal((3, 2)).astype("float32"))}

def save_state(path, protocol, max_bytes=2**30 - 1):
    sd = state_dict()
    sd["StructuredToParameterName@@"] = {k: "p_" + k for k in sd}  # _build_saved_state_dict
    sd = unpack_saved_dict(sd, protocol, max_bytes)
    with open(path, "wb") as f:
        pickle.dump(sd, f, protocol=protocol)

files = {}
for p in (2, 3, 4):
    save_state("state_p%d.pdparams" % p, p)
for p in (2, 3):
    save_state("big_p%d.pdparams" % p, p, max_bytes=40)  # emb.weight, bn._mean, fortran... split
nested = {"model": {"w": Tensor("linear_1.w_0", rng.standard_normal((2, 3)).astype("float32")),
                    "b": Tensor("linear_1.b_0", np.arange(3, dtype="float32"))},
          "opt": {"lr": 0.01, "moment": LoDTensor(np.full((2, 2), 0.5, "float32")), "step": 7},
          "list": [np.arange(4, dtype="int64"), (np.ones(2, "float16"), "tag")], "epoch": 3}
for p in (2, 4):
    with open("nested_p%d.pdopt" % p, "wb") as f:
        pickle.dump(nested, f, protocol=p)
with open("ints_only.pkl", "wb") as f:
    pickle.dump({"a": 1, "b": [2, 3]}, f, protocol=4)

def pack_loaded_dict(obj):
    info = obj.pop("UnpackBigParamInfor@@", None)
    if info:
        for key, value in info.items():
            obj[key] = np.concatenate([obj.pop(part) for part in value["slices"]]).reshape(value["OriginShape"])
    return obj

def flat(v, path, out):
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], np.ndarray):
        v = v[1]  # paddle.load: a reduced Tensor
    if isinstance(v, np.ndarray):
        a = v.copy(order="C")
        out["/".join(path)] = [a.dtype.str, list(a.shape), hashlib.sha256(a.astype(a.dtype.newbyteorder("<")).tobytes()).hexdigest()]
    elif isinstance(v, dict):
        for k, x in v.items():
            flat(x, path + [str(k)], out)
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            flat(x, path + [str(i)], out)

exp = {}
for name in ["state_p2.pdparams", "state_p3.pdparams", "state_p4.pdparams", "big_p2.pdparams", "big_p3.pdparams", "nested_p2.pdopt", "nested_p4.pdopt"]:
    with open(name, "rb") as f:
        obj = pack_loaded_dict(pickle.load(f, encoding="latin1"))  # our own files: safe to load
    out = {}
    flat(obj, [], out)
    exp[name] = out
with open("EXPECTED.json", "w") as f:
    json.dump(exp, f, indent=1, sort_keys=True)
