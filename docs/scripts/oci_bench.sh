#!/usr/bin/env bash
# oci:// throughput against Debian's docker-registry (docs/BENCHMARKS.md,
# "oci://: a 1 GiB raw layer against 8 curls"; issue 43).
#
#   docs/scripts/oci_bench.sh [GIB] [REPS]      the whole run
#   docs/scripts/oci_bench.sh serve [GIB]       set up, print the source and
#                                               the blob's URL, wait (^C ends)
#   docs/scripts/oci_bench.sh gets [GIB]        the GETs of the layer the
#                                               registry answers (its access
#                                               log) and its CPU time, for
#                                               load (default --parallel,
#                                               and 8), check --data and
#                                               convert, with this build and
#                                               OLD=BINARY when set
#   docs/scripts/oci_bench.sh curls URL SIZE PART
#                                               the baseline alone: 8 parallel
#                                               ranged curl GETs of URL to
#                                               /dev/null; PART 0 is one range
#                                               of SIZE/8 each, else PART-byte
#                                               ranges, 8 at a time
#
# Starts `docker-registry serve` (distribution 2.8, filesystem store under
# /var/tmp; docs/scripts/oci_registry.sh) on 127.0.0.1, pushes a GIB GiB safetensors checkpoint of 32 MiB
# F16 tensors (docs/scripts/st_ckpt.py --sparse) as one ModelPack raw weight
# layer (the distribution spec's monolithic POST and PUT, with curl), then
# REPS times, in turn: the two baselines (SIZE/8 per curl, and 64 MiB parts)
# and `tensorfs load --quiet oci://127.0.0.1:PORT/bench:v1` with default
# flags, printing GB/s and the ratios load / baseline. Needs: go, curl,
# python3, sha256sum, docker-registry. Run from the repository root.
set -uo pipefail

curls() { # URL SIZE PART
	local url=$1 size=$2 part=$3 per a b
	if [ "$part" = 0 ]; then per=$(((size + 7) / 8)); else per=$part; fi
	for ((a = 0; a < size; a += per)); do
		b=$((a + per - 1))
		if ((b >= size)); then b=$((size - 1)); fi
		echo "$a-$b"
	done | xargs -P 8 -I{} curl -sS --fail -r {} -o /dev/null "$url"
}
if [ "${1:-}" = curls ]; then
	curls "$2" "$3" "$4"
	exit
fi
serve= gets=
if [ "${1:-}" = serve ]; then
	serve=1
	shift
elif [ "${1:-}" = gets ]; then
	gets=1
	shift
fi
GIB=${1:-1}
REPS=${2:-3}
work=$(mktemp -d /var/tmp/tensorfs-oci-bench.XXXXXX)
rpid=
cleanup() {
	[ -n "$rpid" ] && kill "$rpid" 2>/dev/null && wait "$rpid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
go build -o "$work/tensorfs" ./cmd/tensorfs || exit 1
. docs/scripts/oci_registry.sh
registry_start "$work" $gets
python3 docs/scripts/st_ckpt.py "$work/ckpt.safetensors" $((GIB * 32)) --sparse
registry_model "$work/ckpt.safetensors" "$work" || exit 1
rm "$work/ckpt.safetensors"
if [ -n "$serve" ]; then
	echo "source: $src"
	echo "blob: $blob"
	echo "size: $size"
	echo "tensorfs: $work/tensorfs"
	while sleep 3600; do :; done
fi
if [ -n "$gets" ]; then
	tck=$(getconf CLK_TCK)
	cpu() { awk '{print $14 + $15}' "/proc/$rpid/stat"; }
	echo "layer: $size bytes; $(nproc) CPUs; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	for bin in "$work/tensorfs" ${OLD:-}; do
		for cmd in load load8 check convert; do
			case $cmd in
			load) args=(load --quiet "$src") ;;
			load8) args=(load --quiet --parallel 8 "$src") ;;
			check) args=(check --data "$src") ;;
			convert) args=(convert --quiet --force "$src" "$work/out.safetensors") ;;
			esac
			g0=$(registry_gets) c0=$(cpu)
			"$bin" "${args[@]}" >/dev/null || exit 1
			g1=$(registry_gets) c1=$(cpu)
			rm -f "$work/out.safetensors"
			echo "$([ "$bin" = "$work/tensorfs" ] && echo new || echo old) $cmd: $((g1 - g0)) GETs of the layer, registry CPU $(python3 -c "print('%.2f' % (($c1 - $c0) / $tck))") s"
		done
	done
	exit
fi
now() { date +%s.%N; }
gbs() { python3 -c "print('%.2f' % ($1 / ($3 - $2) / 1e9))"; }
ratio() { python3 -c "print('%.2f' % ($1 / $2))"; }
echo "layer: $size bytes; $(nproc) CPUs; load average: $(uptime | sed 's/.*load average: //')"
for ((r = 1; r <= REPS; r++)); do
	t0=$(now); curls "$blob" "$size" 0; t1=$(now)
	curls "$blob" "$size" $((64 << 20)); t2=$(now)
	"$work/tensorfs" load --quiet "$src" || exit 1
	t3=$(now)
	one=$(gbs "$size" "$t0" "$t1") parts=$(gbs "$size" "$t1" "$t2") load=$(gbs "$size" "$t2" "$t3")
	echo "rep $r: 8 curls of SIZE/8 $one GB/s, 8 curls of 64 MiB parts $parts GB/s, tensorfs load $load GB/s: ratio $(ratio "$load" "$one") and $(ratio "$load" "$parts")"
done
