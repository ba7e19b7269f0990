#!/bin/bash
# docs/scripts/mount_cost.sh TENSORFS SOURCE [mount flags...]: how long a
# mount takes to be ready (.tensorfs/index.json exists), the server's CPU
# seconds (user + system) and memory (VmHWM, RssAnon) then, and with
# WALK=1 the same after `find -ls` of the whole mount (every view).
# Root, or a user with FUSE.
set -e
bin=$1; src=$2; shift 2
mnt=$(mktemp -d)
start=$(date +%s.%N)
"$bin" mount "$@" "$src" "$mnt" 2>/dev/null &
pid=$!
until [ -e "$mnt/.tensorfs/index.json" ]; do
  kill -0 $pid 2>/dev/null || { echo "the server exited"; exit 1; }
  sleep 0.05
done
ready=$(echo "$(date +%s.%N) - $start" | bc)
tck=$(getconf CLK_TCK)
st() {
  cpu=$(awk -v t=$tck '{printf "%.2f", ($14 + $15) / t}' /proc/$pid/stat)
  mem=$(grep -E '^(VmHWM|RssAnon)' /proc/$pid/status | awk '{printf "%s %s kB  ", $1, $2}')
  echo "cpu ${cpu} s  $mem"
}
echo "$(basename "$src") $*"
echo "  ready in ${ready} s: $(st)"
if [ -n "${WALK:-}" ]; then
  start=$(date +%s.%N)
  n=$(find "$mnt" -ls | wc -l)
  echo "  after find -ls of $n entries in $(echo "$(date +%s.%N) - $start" | bc) s: $(st)"
fi
"$bin" umount "$mnt"; wait $pid; rmdir "$mnt"
