package testenv

// TorchNumpyProtocol2Script saves into argv[1], with torch.save's
// defaults (pickle protocol 2: an array's bytes are
// _codecs.encode(str, "latin1"), the str UTF-8 in the pickle), dicts of
// numpy arrays of several dtypes (float32 with bytes >= 0x80, int64,
// float16, bool, all 256 byte values, big-endian, Fortran order, 0-d,
// empty, and "big": argv[2] bytes of float32, 40 MiB by default), zip and
// legacy; the same pickled as numpy 2 does; and zip files whose data.pkl
// is deflated (protocols 2 and 4, without "big"). It loads each with
// torch and prints one JSON object: per file, each tensor and array as
// [dtype, shape, sha256 of the row-major little-endian bytes]. Shared by
// the index and integration tests.
const TorchNumpyProtocol2Script = `import sys, os, json, hashlib, types, warnings, zipfile
warnings.filterwarnings("ignore")
import numpy as np
import torch

out = sys.argv[1]
big = int(sys.argv[2]) if len(sys.argv) > 2 else 40 << 20
rng = np.random.default_rng(11)
arrays = {
    "f32": (rng.standard_normal((7, 5)) * 100).astype(np.float32),
    "i64": rng.integers(-2**62, 2**62, size=(4, 3), dtype=np.int64),
    "f16": (rng.standard_normal(9) * 7).astype(np.float16),
    "bool": rng.standard_normal(11) > 0,
    "u8": np.arange(256, dtype=np.uint8),
    "f64_big": (rng.standard_normal((3, 2)) * 1e5).astype(">f8"),
    "f32_fortran": np.asfortranarray((rng.standard_normal((5, 6)) * 3).astype(np.float32)),
    "scalar": np.array(-1.5e-7, dtype=np.float32),
    "empty": np.zeros((0, 3), dtype=np.float32),
}
if big:
    arrays["big"] = rng.standard_normal(big // 4).astype(np.float32)
ckpt = {"np": arrays, "t": torch.arange(5.0), "meta": {"epoch": 3}}

core = types.ModuleType("numpy._core")
mult = types.ModuleType("numpy._core.multiarray")
def _reconstruct(*a):
    return np.core.multiarray._reconstruct(*a)
_reconstruct.__module__, _reconstruct.__qualname__ = "numpy._core.multiarray", "_reconstruct"
mult._reconstruct = _reconstruct
core.multiarray = mult
sys.modules["numpy._core"], sys.modules["numpy._core.multiarray"] = core, mult
class NP2:
    def __init__(self, a): self.a = a
    def __reduce_ex__(self, proto):
        f, args, state = self.a.__reduce__()
        return (_reconstruct, args, state)

def deflate_pkl(src, dst):
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w") as zo:
        for info in zi.infolist():
            data = zi.read(info)
            comp = zipfile.ZIP_DEFLATED if info.filename.endswith("data.pkl") else zipfile.ZIP_STORED
            zo.writestr(info.filename, data, compress_type=comp)

made = []
p = os.path.join(out, "p2_zip.pt"); torch.save(ckpt, p); made.append(p)
p = os.path.join(out, "p2_legacy.pt"); torch.save(ckpt, p, _use_new_zipfile_serialization=False); made.append(p)
small = {"np": {k: v for k, v in arrays.items() if k != "big"}, "t": torch.arange(3.0)}
np2 = {"a": NP2(arrays["f32"]), "b": NP2(arrays["f64_big"]), "c": NP2(arrays["f32_fortran"])}
p = os.path.join(out, "np2_p2_zip.pt"); torch.save(np2, p); made.append(p)
p = os.path.join(out, "np2_p2_legacy.pt"); torch.save(np2, p, _use_new_zipfile_serialization=False); made.append(p)
for proto in (2, 4):
    tmp = os.path.join(out, "tmp.pt"); torch.save(small, tmp, pickle_protocol=proto)
    p = os.path.join(out, "p%d_deflated.pt" % proto); deflate_pkl(tmp, p); os.remove(tmp); made.append(p)

def le(a):
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.tobytes()

def flat(v, path, res):
    name = "/".join(path)
    if isinstance(v, torch.Tensor):
        res[name] = [str(v.dtype)[6:], list(v.shape), hashlib.sha256(v.numpy().tobytes()).hexdigest()]
    elif isinstance(v, np.ndarray):
        res[name] = [v.dtype.name, list(v.shape), hashlib.sha256(le(v)).hexdigest()]
    elif isinstance(v, dict):
        for k, x in v.items():
            flat(x, path + [str(k)], res)

result = {}
for p in made:
    res = {}
    flat(torch.load(p, weights_only=False), [], res)
    result[p] = res
print(json.dumps(result))
`
