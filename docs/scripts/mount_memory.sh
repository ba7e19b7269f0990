#!/bin/bash
# docs/scripts/mount_memory.sh TENSORFS SOURCE [mount flags...]: the server's memory
# after the mount is ready and after every tensor file was read with cat
# >/dev/null (VIEW=.f16 reads that view instead). Root, or a user with FUSE.
set -e
bin=$1; src=$2; shift 2
mnt=$(mktemp -d)
"$bin" mount "$@" "$src" "$mnt" 2>/dev/null &
pid=$!
until [ -e "$mnt/.tensorfs/index.json" ]; do sleep 0.01; done
st() { grep -E '^(VmHWM|VmRSS|RssAnon|RssFile)' /proc/$pid/status | awk '{printf "%s %s %s  ", $1, $2, $3}'; echo; }
echo "$(basename $src) ($(stat -c %s $src) bytes, $(ls -1 $mnt | wc -l) top entries) $*"
echo "  after mount: $(st)"
start=$(date +%s.%N)
if [ -n "${VIEW:-}" ]; then find "$mnt/$VIEW" -type f -print0; else find "$mnt" -path "$mnt/.*" -prune -o -type f -print0; fi | xargs -0 cat > /dev/null
end=$(date +%s.%N)
echo "  after cat:   $(st)  (read in $(echo "$end - $start" | bc) s)"
"$bin" umount "$mnt"; wait $pid; rmdir "$mnt"
