#!/bin/sh
# Quantized views through a mount, side by side in one run:
#   docs/scripts/quant_bench.sh TENSORFS DIR [RUNS]
# DIR is what docs/scripts/fp8_ckpt.py wrote (DIR/fp8, DIR/f16). Mounts
# DIR/fp8, reads every stored F8 weight file and every .bf16/ weight file
# (whole, 1 MiB reads, warm page cache, alternating, RUNS times) and prints
# the output bytes/s of each; then converts DIR/fp8 and DIR/f16 with
# --dtype bf16 and prints each one's summary line (peak memory).
set -eu
T=$1 DIR=$2 RUNS=${3:-3}
M=$(mktemp -d)
"$T" mount "$DIR/fp8" "$M" 2>"$M.log" &
while [ ! -e "$M/.tensorfs/index.json" ]; do sleep 0.1; done
read_all() { # prefix: prints bytes and seconds
	s=$(date +%s.%N); n=0
	for f in "$M"/$1layers.*.mlp.up_proj.weight; do
		b=$(dd if="$f" of=/dev/null bs=1M 2>&1 | awk '/bytes/ {print $1}'); n=$((n + b))
	done
	e=$(date +%s.%N)
	echo "$n $s $e" | awk '{printf "%d bytes in %.3f s: %.0f MB/s\n", $1, $3-$2, $1/($3-$2)/1e6}'
}
read_all "" >/dev/null; read_all ".bf16/" >/dev/null # warm
i=0
while [ $i -lt "$RUNS" ]; do
	echo "stored F8: $(read_all "")"
	echo ".bf16/:    $(read_all ".bf16/")"
	i=$((i + 1))
done
"$T" umount "$M"; wait
O=$(mktemp -d)
"$T" convert --dtype bf16 "$DIR/fp8" "$O/fp8.safetensors" 2>&1 | tail -1
"$T" convert --dtype bf16 "$DIR/f16" "$O/f16.safetensors" 2>&1 | tail -1
rm -rf "$O" "$M" "$M.log"
