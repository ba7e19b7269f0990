#!/bin/bash
# docs/scripts/pagecache.sh TENSORFS SOURCE [mount flags...]: the page cache
# that reading through a mount adds, per byte read, the way a user reads:
# `cat` of every stored tensor file, then NumPy np.load(mmap_mode="r") of
# every .npy/ file, summed; then the safetensors export (`cat`, and a
# NumPy memmap of it with every page touched, as safetensors' safe_open
# maps it), the .f32/ view's export, and every tensor file then the
# export on one mount (each on a fresh mount, after dropping SOURCE's
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
LABEL="cat of .safetensors/model.safetensors" READER='cat "$mnt/.safetensors/model.safetensors" | wc -c' measure "$@"
LABEL="memmap of .safetensors/model.safetensors, every page" READER='"$py" -c "
import numpy as np, sys
a = np.memmap(sys.argv[1], mode=\"r\")
np.add.reduce(a[::4096], dtype=np.uint64)
print(a.size)" "$mnt/.safetensors/model.safetensors"' measure "$@"
LABEL="cat of .f32/.safetensors/model.safetensors" READER='cat "$mnt/.f32/.safetensors/model.safetensors" | wc -c' measure "$@"
LABEL="cat of every tensor file, then the export, one mount" READER='echo $(($(find "$mnt" -path "$mnt/.*" -prune -o -type f -print0 | xargs -0 cat | wc -c) + $(cat "$mnt/.safetensors/model.safetensors" | wc -c)))' measure "$@"
