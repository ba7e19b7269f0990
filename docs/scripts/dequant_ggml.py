#!/usr/bin/env python3
"""The C and NumPy side of docs/BENCHMARKS.md "Dequantization against ggml": for each quantized tensor of a
gen_ggml_types.py GGUF (one per type), ggml's own to_float (libggml0's type traits, through ctypes, one thread)
and gguf-py's NumPy dequantize, each the best of RUNS runs on the same bytes; prints one JSON line per type:
{"type", "elems", "bytes", "c_s", "numpy_s"} (seconds of the best run; numpy_s null where gguf-py has no
dequantizer for the type). Runs in the Debian sid chroot (libggml0, python3-gguf):

    bash debian.sh sid DIR run python3 /tools/dequant_ggml.py /out/bench.gguf [RUNS] [TYPE...]
"""
import ctypes, json, sys, time

import numpy as np
import gguf


class Traits(ctypes.Structure):
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64), ("blck_size_interleave", ctypes.c_int64),
                ("type_size", ctypes.c_size_t), ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def best(f, runs):
    b = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        f()
        b = min(b, time.perf_counter() - t)
    return b


def main():
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    want = set(sys.argv[3:])
    lib = ctypes.CDLL("libggml-base.so.0")
    lib.ggml_get_type_traits.restype = ctypes.POINTER(Traits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    r = gguf.GGUFReader(path)
    for t in r.tensors:
        qt = gguf.GGMLQuantizationType(int(t.tensor_type))
        if want and qt.name not in want:
            continue
        tr = lib.ggml_get_type_traits(int(qt.value)).contents
        if not tr.is_quantized or not tr.to_float:
            continue
        q = np.ascontiguousarray(t.data)
        n = int(t.n_elements)
        out = np.empty(n, dtype=np.float32)
        fn = TO_FLOAT(tr.to_float)
        c = best(lambda: fn(q.ctypes.data, out.ctypes.data, n), runs)
        npy = None
        if qt in gguf.quants._type_traits:
            npy = best(lambda: gguf.quants.dequantize(q, qt), max(1, runs // 2))
        print(json.dumps({"type": qt.name, "elems": n, "bytes": int(q.nbytes), "c_s": c, "numpy_s": npy}), flush=True)


if __name__ == "__main__":
    main()
