#!/bin/sh
# A process holding a file of a mount is killed while the mount's server
# is stopped (SIGSTOP, as a server that no longer answers): does its exit
# wait in fuse_flush? Before FOPEN_NOFLUSH it stayed in D state until the
# server ran again (or the connection was aborted through fusectl); now it
# exits at once. The server is continued and unmounted afterwards.
#   usage: flush_at_exit.sh TENSORFS
set -eu
bin=$1
dir=$(mktemp -d)
trap '"$bin" umount "$dir/m" 2>/dev/null; rm -rf "$dir"' EXIT
python3 - "$dir/one.safetensors" <<'PY'
import json, struct, sys
h = json.dumps({"w": {"dtype": "F32", "shape": [1024], "data_offsets": [0, 4096]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(4096))
PY
mkdir "$dir/m"
"$bin" mount "$dir/one.safetensors" "$dir/m" 2>"$dir/log" &
srv=$!
while [ ! -e "$dir/m/.tensorfs/index.json" ]; do sleep 0.05; done
python3 -c 'import sys, time; f = open(sys.argv[1], "rb"); f.read(); open(sys.argv[2], "w").close(); time.sleep(600)' "$dir/m/w" "$dir/opened" &
holder=$!
while [ ! -e "$dir/opened" ]; do sleep 0.05; done
kill -STOP $srv
kill -KILL $holder
sleep 2
if [ -d /proc/$holder ]; then
	echo "killed holder still there, state $(awk '{print $3}' /proc/$holder/stat): $(grep -o 'fuse_[a-z_]*' /proc/$holder/stack 2>/dev/null | tr '\n' ' ')"
else
	echo "killed holder exited"
fi
kill -CONT $srv
wait $holder 2>/dev/null || true
"$bin" umount "$dir/m"
wait $srv
