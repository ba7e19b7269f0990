#!/bin/bash
# Dequantization throughput, one core: tensorfs (go test -bench BenchmarkDequant on the GGUF's own tensors) against
# ggml's own C to_float (libggml0 through ctypes) and gguf-py's NumPy dequantize, on the same bytes, in rounds that
# alternate the two sides; every figure is the best run of its side. Needs the Debian sid chroot of
# ../shared/tools/debian.sh (libggml0, python3-gguf).
#
#   bash docs/scripts/dequant_bench.sh [SID_CHROOT] [ROUNDS] [ROWS]
set -euo pipefail
sid=${1:-/work/chroots/sid}
rounds=${2:-3}
rows=${3:-1024}
repo=$(cd "$(dirname "$0")/../.." && pwd)
tools=$repo/../shared/tools
types="Q4_K Q6_K IQ2_XXS IQ4_XS MXFP4 NVFP4 Q8_0 IQ3_S TQ2_0"
out=/out/dequant-bench-$$
bash "$tools/debian.sh" sid "$sid" run python3 /tools/gen_ggml_types.py "$out/bench" --seed 1 --rows "$rows" >&2
cp "$repo/docs/scripts/dequant_ggml.py" "$sid/tools/" # beside the shared tools debian.sh puts there
gguf_file=$sid$out/bench.gguf
(cd "$repo" && go test -c -o "$sid$out/dtype.test" ./dtype)
pat=$(echo "$types" | tr ' ' '|')
for r in $(seq "$rounds"); do
	bash "$tools/debian.sh" sid "$sid" run taskset -c 0 python3 /tools/dequant_ggml.py "$out/bench.gguf" 7 $types |
		sed "s/^/c $r /"
	TENSORFS_DEQUANT_BENCH=$gguf_file taskset -c 0 "$sid$out/dtype.test" -test.run XXX \
		-test.bench "BenchmarkDequant/($pat)\$" -test.benchtime 20x -test.cpu 1 |
		awk -v r="$r" '/^BenchmarkDequant/ {print "go", r, $0}'
done
