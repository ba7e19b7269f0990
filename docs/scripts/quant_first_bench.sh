#!/bin/sh
#   docs/scripts/quant_first_bench.sh TENSORFS DIR [RUNS]   (DIR from docs/scripts/fp8_ckpt.py)
# First reads through fresh mounts (the FUSE path, backing file warm in the page cache):
# stored F8 weights vs their .bf16/ views, alternating, RUNS times. Prints each read,
# each pair's ratio (.bf16/ output bytes/s over the stored F8's), then one line: the
# ratio over all pairs (total bytes over total time, each side), the median pair's,
# the mount process's CPU time per GB of output (user+system, /proc/PID/stat: less
# sensitive to other load than the wall-clock ratio) and /proc/loadavg before and after.
set -eu
T=$1 DIR=$2 RUNS=${3:-5}
cat "$DIR"/fp8/* > /dev/null
L0=$(cut -d' ' -f1-4 /proc/loadavg)
HZ=$(getconf CLK_TCK)
one() { # prefix: prints "bytes seconds reads server-cpu-seconds"
	M=$(mktemp -d)
	"$T" mount "$DIR/fp8" "$M" 2>/dev/null &
	P=$!
	while [ ! -e "$M/.tensorfs/index.json" ]; do sleep 0.05; done
	c0=$(awk '{print $14 + $15}' /proc/$P/stat)
	s=$(date +%s.%N); n=0
	for f in "$M"/$1layers.*.mlp.up_proj.weight; do
		b=$(dd if="$f" of=/dev/null bs=1M 2>&1 | awk '/bytes/ {print $1}'); n=$((n + b))
	done
	e=$(date +%s.%N)
	c1=$(awk '{print $14 + $15}' /proc/$P/stat)
	r=$(grep -o '"reads": [0-9]*' "$M/.tensorfs/stats.json" | head -1 | grep -o '[0-9]*$')
	"$T" umount "$M"; wait; rmdir "$M"
	echo "$n $s $e $r $c0 $c1" | awk -v hz="$HZ" '{printf "%d %.6f %s %.2f\n", $1, $3-$2, $4, ($6-$5)/hz}'
}
i=0 all=""
while [ $i -lt "$RUNS" ]; do
	a=$(one "") b=$(one ".bf16/")
	echo "$a" | awk '{printf "stored F8 first read: %d bytes in %.3f s: %.0f MB/s (%d reads, server CPU %.2f s)\n", $1, $2, $1/$2/1e6, $3, $4}'
	echo "$b" | awk '{printf ".bf16/ first read:    %d bytes in %.3f s: %.0f MB/s (%d reads, server CPU %.2f s)\n", $1, $2, $1/$2/1e6, $3, $4}'
	all="$all$a $b
"
	i=$((i + 1))
done
printf '%s' "$all" | awk -v l0="$L0" -v l1="$(cut -d' ' -f1-4 /proc/loadavg)" '
	{ sb += $1; st += $2; sc += $4; vb += $5; vt += $6; vc += $8; r[NR] = ($5/$6)/($1/$2); printf "pair %d: %.2f\n", NR, r[NR] }
	END {
		for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) if (r[j] < r[i]) { x = r[i]; r[i] = r[j]; r[j] = x }
		med = NR % 2 ? r[(NR+1)/2] : (r[NR/2] + r[NR/2+1]) / 2
		printf "ratio .bf16/ / stored F8: %.2fx over %d pairs (%.0f vs %.0f MB/s), median pair %.2fx; server CPU %.2f vs %.2f s per GB; loadavg %s -> %s\n", (vb/vt)/(sb/st), NR, vb/vt/1e6, sb/st/1e6, med, vc/vb*1e9, sc/sb*1e9, l0, l1
	}'
