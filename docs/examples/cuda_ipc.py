#!/usr/bin/env python3
"""Map the checkpoint of a `tensorfs mount --gpu N` into this process as a
{name: torch.Tensor} state dict on the GPU, without copying a byte.

    tensorfs mount --gpu 0 model.safetensors /mnt/model &
    python3 cuda_ipc.py /mnt/model [--verify]

The mount keeps the weights in one device allocation and describes it in
M/.cuda/index.json: the device's UUID, the allocation's cudaIpcMemHandle_t
(hex) and every tensor's dtype, shape and offset. This script opens the
handle with cudaIpcOpenMemHandle (libcudart through ctypes: no package but
torch) and wraps each tensor in place through __cuda_array_interface__.
An engine then builds its model on the meta device and assigns them:

    sd = open_state_dict("/mnt/model")
    model.load_state_dict(sd, assign=True)

The memory belongs to the mount: keep it mounted while the tensors are in
use (the mount frees it when it ends). Whoever can read .cuda/ can write
the weights. --verify compares every tensor with its file in the mount.
"""
import ctypes
import glob
import json
import os
import sys
import time

import torch

# safetensors dtype -> (torch dtype, __cuda_array_interface__ typestr of
# the same width; reinterpreted with .view() where the interface has none)
DTYPES = {
    "F64": (torch.float64, "<f8"), "F32": (torch.float32, "<f4"), "F16": (torch.float16, "<f2"),
    "BF16": (torch.bfloat16, "<i2"), "I64": (torch.int64, "<i8"), "I32": (torch.int32, "<i4"),
    "I16": (torch.int16, "<i2"), "I8": (torch.int8, "|i1"), "U8": (torch.uint8, "|u1"),
    "BOOL": (torch.bool, "|b1"), "U16": (getattr(torch, "uint16", torch.int16), "<u2"),
    "U32": (getattr(torch, "uint32", torch.int32), "<u4"), "U64": (getattr(torch, "uint64", torch.int64), "<u8"),
    "F8_E4M3": (getattr(torch, "float8_e4m3fn", torch.uint8), "|u1"),
    "F8_E5M2": (getattr(torch, "float8_e5m2", torch.uint8), "|u1"),
}


def cudart():
    """libcudart: $TENSORFS_CUDART, the loader's search path, or the copy
    that PyTorch's wheels ship."""
    names = [os.environ.get("TENSORFS_CUDART", "")] + ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]
    torch_dir = os.path.dirname(torch.__file__)
    site = os.path.dirname(torch_dir)
    names += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", "libcudart.so*")))
    names += sorted(glob.glob(os.path.join(site, "nvidia", "cuda_runtime", "lib", "libcudart.so*")))
    names += sorted(glob.glob(os.path.join(torch_dir, "lib", "libcudart*.so*")))
    for n in names:
        if n:
            try:
                return ctypes.CDLL(n)
            except OSError:
                pass
    sys.exit("cuda_ipc.py: libcudart not found (set TENSORFS_CUDART to its path)")


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


class _InPlace:
    """Device memory described to torch.as_tensor without a copy."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "version": 3, "strides": None}


def open_state_dict(mount):
    """Returns ({name: tensor}, close) for the --gpu mount at mount."""
    with open(os.path.join(mount, ".cuda", "index.json")) as f:
        doc = json.load(f)
    want = doc["uuid"].lower().removeprefix("gpu-")
    ordinal = None
    for i in range(torch.cuda.device_count()):
        if str(torch.cuda.get_device_properties(i).uuid).lower().removeprefix("gpu-") == want:
            ordinal = i
    if ordinal is None:
        seen = [str(torch.cuda.get_device_properties(i).uuid) for i in range(torch.cuda.device_count())]
        sys.exit(f"cuda_ipc.py: {doc['uuid']} is not one of this process's GPUs {seen} (CUDA_VISIBLE_DEVICES?)")
    dev = torch.device("cuda", ordinal)
    torch.cuda.set_device(dev)
    torch.empty(1, device=dev)  # the primary context, shared with libcudart below
    rt = cudart()
    rt.cudaSetDevice.argtypes = [ctypes.c_int]
    rt.cudaIpcOpenMemHandle.argtypes = [ctypes.POINTER(ctypes.c_void_p), IpcHandle, ctypes.c_uint]
    rt.cudaIpcCloseMemHandle.argtypes = [ctypes.c_void_p]
    rt.cudaSetDevice(ordinal)
    bases = []
    for a in doc["allocations"]:
        h = IpcHandle()
        raw = bytes.fromhex(a["handle"])
        ctypes.memmove(ctypes.byref(h), raw, len(raw))
        p = ctypes.c_void_p()
        err = rt.cudaIpcOpenMemHandle(ctypes.byref(p), h, 1)  # cudaIpcMemLazyEnablePeerAccess
        if err != 0:
            sys.exit(f"cuda_ipc.py: cudaIpcOpenMemHandle: CUDA error {err}")
        bases.append(p.value)
    sd = {}
    for t in doc["tensors"]:
        shape = t["shape"]
        if t["dtype"] in DTYPES:
            dt, ts = DTYPES[t["dtype"]]
        else:  # GGUF quantized blocks: their raw bytes
            dt, ts, shape = torch.uint8, "|u1", [t["size"]]
        if t["size"] == 0:
            sd[t["name"]] = torch.empty(shape, dtype=dt, device=dev)
            continue
        x = torch.as_tensor(_InPlace(bases[t["allocation"]] + t["offset"], shape, ts), device=dev)
        sd[t["name"]] = x if x.dtype == dt else x.view(dt)

    def close():
        sd.clear()
        torch.cuda.synchronize(dev)
        for b in bases:
            rt.cudaIpcCloseMemHandle(b)

    return sd, close, doc


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    mount = args[0]
    t0 = time.perf_counter()
    sd, close, doc = open_state_dict(mount)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    n = sum(t["size"] for t in doc["tensors"])
    print(f"opened {len(sd)} tensors ({n / 2**30:.2f} GiB) on cuda:{torch.cuda.current_device()} from {mount} in {dt:.3f} s, no copy")
    if "--verify" in sys.argv:
        t1 = time.perf_counter()
        for t in doc["tensors"]:
            with open(os.path.join(mount, t["path"]), "rb") as f:
                host = f.read()
            x = sd[t["name"]]
            got = x.contiguous().view(-1).view(torch.uint8) if x.numel() else torch.empty(0, dtype=torch.uint8, device=x.device)
            want = torch.frombuffer(bytearray(host), dtype=torch.uint8).to(x.device) if host else got[:0]
            if got.numel() != want.numel() or not torch.equal(got, want):
                sys.exit(f"cuda_ipc.py: {t['name']}: the device bytes differ from {t['path']}")
        print(f"verified {len(sd)} tensors against the mount's files in {time.perf_counter() - t1:.3f} s")
    close()


if __name__ == "__main__":
    main()
