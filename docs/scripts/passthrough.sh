#!/bin/sh
# FUSE passthrough against the normal path: a .npy checkpoint (np.save,
# float32) is served whole as .npy/<name>.npy, which passthrough hands to
# the kernel. Each round mounts it twice (default, --no-passthrough),
# reads the checkpoint into the page cache, then reads the .npy file of
# each mount with dd, twice (first and repeat read). Needs root and
# Linux 6.9+ for passthrough; elsewhere both mounts take the normal path.
#   usage: passthrough.sh TENSORFS FILE.npy [ROUNDS]
set -eu
bin=$1 src=$2 rounds=${3:-3}
name=$(basename "$src")
dir=$(mktemp -d)
trap '"$bin" umount "$dir/pt" 2>/dev/null; "$bin" umount "$dir/np" 2>/dev/null; rm -rf "$dir"' EXIT
rate() { dd if="$1" of=/dev/null bs=1M 2>&1 | sed -n 's/.*, \([0-9.,]* [GM]B\/s\)$/\1/p'; }
for r in $(seq "$rounds"); do
	mkdir -p "$dir/pt" "$dir/np"
	"$bin" mount "$src" "$dir/pt" 2>"$dir/pt.log" &
	"$bin" mount --no-passthrough "$src" "$dir/np" 2>"$dir/np.log" &
	while [ ! -e "$dir/pt/.tensorfs/index.json" ] || [ ! -e "$dir/np/.tensorfs/index.json" ]; do sleep 0.05; done
	cat "$src" >/dev/null
	pt1=$(rate "$dir/pt/.npy/$name"); pt2=$(rate "$dir/pt/.npy/$name")
	cat "$src" >/dev/null
	np1=$(rate "$dir/np/.npy/$name"); np2=$(rate "$dir/np/.npy/$name")
	ptreads=$(sed -n 's/.*"reads": \([0-9]*\).*/\1/p' "$dir/pt/.tensorfs/stats.json")
	echo "round $r: passthrough first $pt1, repeat $pt2 (server READs: $ptreads); normal first $np1, repeat $np2; load $(cut -d' ' -f1 /proc/loadavg)"
	"$bin" umount "$dir/pt"; "$bin" umount "$dir/np"
	wait
done
