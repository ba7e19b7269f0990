#!/bin/bash
# docs/scripts/pagecache.sh TENSORFS SOURCE [mount flags...]: the page cache
# that reading through a mount adds, per byte read, the way a user reads:
# `cat` of every stored tensor file, then NumPy np.load(mmap_mode="r") of
# every .npy/ file, summed (each on a fresh mount, after dropping SOURCE's
# pages with dd iflag=nocache). Counted in a private memory cgroup that
# this script, the server and the readers share, so other work on the
# machine does not count. Root; cgroup v1 memory controller or v2.
set -eu
bin=$1; src=$2; shift 2
py=${PYTHON:-/usr/bin/python3}
line=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup || true)
if [ -n "$line" ]; then
	cg=/sys/fs/cgroup/memory${line##*:}/tensorfs-pagecache-$$; key=cache
else
	cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)/tensorfs-pagecache-$$; key=file
fi
home=$(dirname "$cg")/cgroup.procs
mkdir "$cg"
echo $$ > "$cg/cgroup.procs"
trap 'echo $$ > "$home"; rmdir "$cg" 2>/dev/null || true' EXIT
cached() { awk -v k="$key" '$1 == k { print $2 }' "$cg/memory.stat"; }
measure() { # label, reader command (run with the mount point as $1)
	dd if="$src" iflag=nocache count=0 status=none
	mnt=$(mktemp -d)
	"$bin" mount "$@" "$src" "$mnt" 2>/dev/null &
	pid=$!
	until [ -e "$mnt/.tensorfs/index.json" ]; do sleep 0.01; done
	before=$(cached)
	read=$(eval "$READER")
	after=$(cached)
	"$bin" umount "$mnt"; wait $pid; rmdir "$mnt"
	echo "$LABEL: read $((read >> 20)) MiB, page cache grew $(((after - before) >> 20)) MiB: $(echo "scale=2; ($after - $before) / $read" | bc) per byte read"
}
echo "$(basename "$src") ($(($(stat -c %s "$src") >> 20)) MiB) $* [counted in $cg/memory.stat $key; load $(cut -d' ' -f1 /proc/loadavg)]"
LABEL="cat of every tensor file" READER='find "$mnt" -path "$mnt/.*" -prune -o -type f -print0 | xargs -0 cat | wc -c' measure "$@"
LABEL="np.load(mmap_mode=\"r\") of every .npy/ file" READER='"$py" -c "
import numpy as np, pathlib, sys
n = 0
for p in sorted(pathlib.Path(sys.argv[1], \".npy\").rglob(\"*.npy\")):
    a = np.load(p, mmap_mode=\"r\")
    np.add.reduce(a.reshape(-1).view(np.uint8), dtype=np.uint64)
    n += a.nbytes
print(n)" "$mnt"' measure "$@"
