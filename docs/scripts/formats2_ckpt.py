# The same 256 MiB of float32 (64 tensors of 1024x1024) written by each format's own writer, for
# docs/BENCHMARKS.md ("ONNX and Keras .weights.h5 beside safetensors"): model.safetensors (safetensors),
# onnx_ext/ (onnx.save_model with all tensors in model.onnx.data), onnx_inline/ (raw_data in model.onnx),
# model.weights.h5 (h5py, Keras 3's layout, contiguous) and gzip.weights.h5 (chunks of 256x1024, gzip 4 + shuffle).
#   python3 formats2_ckpt.py OUTDIR      (numpy, safetensors, onnx, h5py: Debian sid's python3-* packages)
import os, sys, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(37)
ts = {f"layers.{i}.weight": rng.standard_normal((1024, 1024)).astype(np.float32) for i in range(64)}
from safetensors.numpy import save_file
save_file(ts, os.path.join(out, "model.safetensors"))
import onnx
from onnx import helper, numpy_helper, TensorProto
inits = [numpy_helper.from_array(a, n) for n, a in ts.items()]
nodes = [helper.make_node("Identity", [n], [n + ".out"]) for n in ts]
g = helper.make_graph(nodes, "bench", [], [helper.make_tensor_value_info(n + ".out", TensorProto.FLOAT, [1024, 1024]) for n in ts], initializer=inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tensorfs bench")
os.makedirs(os.path.join(out, "onnx_ext"), exist_ok=True)
os.makedirs(os.path.join(out, "onnx_inline"), exist_ok=True)
onnx.save_model(m, os.path.join(out, "onnx_inline", "model.onnx"))
cwd = os.getcwd(); os.chdir(os.path.join(out, "onnx_ext"))
onnx.save_model(m, "model.onnx", save_as_external_data=True, all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=0)
os.chdir(cwd)
import h5py
with h5py.File(os.path.join(out, "model.weights.h5"), "w") as h:
    for i, (n, a) in enumerate(ts.items()):
        h.create_group(f"layers/l{i}/vars")["0"] = a
with h5py.File(os.path.join(out, "gzip.weights.h5"), "w") as h:
    for i, (n, a) in enumerate(ts.items()):
        h.create_group(f"layers/l{i}/vars").create_dataset("0", data=a, chunks=(256, 1024), compression="gzip", compression_opts=4, shuffle=True)
print("ok")
