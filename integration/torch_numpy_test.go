package integration

// tnReadScript reads, in another process, every tensor file of the mount
// at argv[1] (paths from index.json) and its .npy view, and prints
// {name: [sha256 of the file, sha256 of the .npy view's C-order
// little-endian bytes, dtype of the .npy]}.
const tnReadScript = `
import sys, json, hashlib
import numpy as np
m = sys.argv[1]
idx = json.load(open(m + "/.tensorfs/index.json"))
out = {}
for t in idx["tensors"]:
    raw = open(m + "/" + t["path"], "rb").read()
    a = np.load(m + "/.npy/" + t["path"] + ".npy", mmap_mode="r")
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    out[t["name"]] = [hashlib.sha256(raw).hexdigest(), hashlib.sha256(a.tobytes()).hexdigest(), a.dtype.name]
print(json.dumps(out))
`
