#!/bin/sh
# `tensorfs load` of the same 256 MiB as safetensors, ONNX (external data, inline raw_data) and Keras 3
# .weights.h5 (contiguous, gzip+shuffle chunks), each format run in turn with safetensors, whole process
# timed by /usr/bin/time (docs/BENCHMARKS.md). DIR is formats2_ckpt.py's OUTDIR.
#   sh formats2_bench.sh DIR [RUNS]
set -eu
dir=$1; runs=${2:-5}; tfs=${TENSORFS:-tensorfs}
cat "$dir"/model.safetensors "$dir"/onnx_ext/model.onnx.data "$dir"/onnx_inline/model.onnx "$dir"/*.weights.h5 >/dev/null
for src in onnx_ext/model.onnx onnx_inline/model.onnx model.weights.h5 gzip.weights.h5; do
	i=0
	while [ $i -lt "$runs" ]; do
		for s in "$src" model.safetensors; do
			/usr/bin/time -f "$s %e s wall %U s user %S s sys %M KiB peak" "$tfs" load --quiet "$dir/$s"
		done
		i=$((i + 1))
	done
done
