#!/usr/bin/env bash
# Export and convert figures for docs/BENCHMARKS.md ("Safetensors export").
#
#   docs/scripts/export_bench.sh TENSORFS CKPT WORKDIR [ROUNDS [read|convert]]
#
# 1. Reads through a mount (root, source file in the page cache): all the
#    tensor files (cat M/layers.* > /dev/null) against the export
#    (cat M/.safetensors/model.safetensors), and the same for the .bf16
#    view, each on a fresh mount (so neither is served from the mount's
#    own page cache), interleaved, ROUNDS times.
# 2. `tensorfs convert` against `cp` + `sync` of the source in WORKDIR,
#    interleaved, ROUNDS times, with peak RSS from /usr/bin/time.
set -euo pipefail
bin=$1 ckpt=$2 work=$3 rounds=${4:-3} only=${5:-}
mnt=$work/mnt
mkdir -p "$mnt"
now() { date +%s.%N; }
rate() { awk -v b="$1" -v s="$2" -v e="$3" 'BEGIN { printf "%.2f", b / (e - s) / 1e9 }'; }
size=$(stat -c %s "$ckpt")
cat "$ckpt" > /dev/null # warm the page cache
uptime
mountit() {
	"$bin" mount "$ckpt" "$mnt" 2>/dev/null &
	while [ ! -e "$mnt/.tensorfs/index.json" ]; do sleep 0.05; done
}
umountit() { "$bin" umount "$mnt"; wait; }
for r in $(seq "$rounds"); do
	[ "$only" = convert ] && break
	for view in "" .bf16; do
		mountit
		s=$(now); cat "$mnt/$view"/layers.* > /dev/null; e=$(now)
		bytes=$(du -cb --apparent-size "$mnt/$view"/layers.* | tail -1 | cut -f1)
		files=$(rate "$bytes" "$s" "$e")
		umountit
		mountit
		s=$(now); cat "$mnt/$view/.safetensors/model.safetensors" > /dev/null; e=$(now)
		bytes=$(stat -c %s "$mnt/$view/.safetensors/model.safetensors")
		export=$(rate "$bytes" "$s" "$e")
		umountit
		echo "read round $r view ${view:-stored}: tensor files $files GB/s, export $export GB/s, ratio $(awk -v a="$export" -v b="$files" 'BEGIN { printf "%.2f", a / b }')"
	done
done
out=$work/out.safetensors
for r in $(seq "$rounds"); do
	[ "$only" = read ] && break
	rm -f "$out"
	s=$(now); /usr/bin/time -f %M -o "$work/cp.rss" cp "$ckpt" "$out"; sync "$out"; e=$(now)
	cp_rate=$(rate "$size" "$s" "$e")
	rm -f "$out"
	s=$(now); /usr/bin/time -f %M -o "$work/cv.rss" "$bin" convert --quiet "$ckpt" "$out"; e=$(now)
	cv_rate=$(rate "$(stat -c %s "$out")" "$s" "$e")
	rm -f "$out"
	s=$(now); /usr/bin/time -f %M -o "$work/cvb.rss" "$bin" convert --quiet --dtype bf16 "$ckpt" "$out"; e=$(now)
	cvb_rate=$(rate "$(stat -c %s "$out")" "$s" "$e")
	rm -f "$out"
	echo "convert round $r: cp+sync $cp_rate GB/s ($(cat "$work/cp.rss") KiB RSS), convert $cv_rate GB/s ($(cat "$work/cv.rss") KiB RSS, $(awk -v a="$cv_rate" -v b="$cp_rate" 'BEGIN { printf "%.2f", a / b }')x cp), convert --dtype bf16 $cvb_rate GB/s ($(cat "$work/cvb.rss") KiB RSS)"
done
uptime
