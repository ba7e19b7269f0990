#!/bin/sh
#   docs/scripts/quant_first_bench.sh TENSORFS DIR [RUNS]   (DIR from docs/scripts/fp8_ckpt.py)
# First reads through fresh mounts (the FUSE path, backing file warm in the page cache):
# stored F8 weights vs their .bf16/ views, alternating, RUNS times.
set -eu
T=$1 DIR=$2 RUNS=${3:-5}
cat "$DIR"/fp8/* > /dev/null
one() { # prefix
	M=$(mktemp -d)
	"$T" mount "$DIR/fp8" "$M" 2>/dev/null &
	while [ ! -e "$M/.tensorfs/index.json" ]; do sleep 0.05; done
	s=$(date +%s.%N); n=0
	for f in "$M"/$1layers.*.mlp.up_proj.weight; do
		b=$(dd if="$f" of=/dev/null bs=1M 2>&1 | awk '/bytes/ {print $1}'); n=$((n + b))
	done
	e=$(date +%s.%N)
	r=$(grep -o '"reads": [0-9]*' "$M/.tensorfs/stats.json" | head -1)
	"$T" umount "$M"; wait; rmdir "$M"
	echo "$n $s $e" | awk -v r="$r" '{printf "%d bytes in %.3f s: %.0f MB/s (%s)\n", $1, $3-$2, $1/($3-$2)/1e6, r}'
}
i=0
while [ $i -lt "$RUNS" ]; do
	echo "stored F8 first read: $(one "")"
	echo ".bf16/ first read:    $(one ".bf16/")"
	i=$((i + 1))
done
