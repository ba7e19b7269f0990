#!/bin/sh
# .files/ against a tensor file: a 256 MiB safetensors file holding one
# U8 tensor w is read with dd bs=1M directly, as .files/big.safetensors
# (the file as it is) and as the tensor w, each on a fresh mount (first
# read) and again (repeat, from the mount's page cache), after warming the
# checkpoint file into the page cache.
#   usage: files_bench.sh TENSORFS [ROUNDS]
set -eu
bin=$1 rounds=${2:-3}
dir=$(mktemp -d)
trap '"$bin" umount "$dir/m" 2>/dev/null; rm -rf "$dir"' EXIT
python3 - "$dir/big.safetensors" <<'PY'
import json, os, struct, sys
n = 256 << 20
h = json.dumps({"w": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.write(os.urandom(n))
PY
mkdir "$dir/m"
start() {
	"$bin" mount "$dir/big.safetensors" "$dir/m" 2>"$dir/log" &
	while [ ! -e "$dir/m/.tensorfs/index.json" ]; do sleep 0.05; done
	cat "$dir/big.safetensors" >/dev/null
}
stop() { "$bin" umount "$dir/m"; wait; }
rate() { dd if="$1" of=/dev/null bs=1M 2>&1 | tail -1 | sed 's/.*, //'; }
for r in $(seq "$rounds"); do
	start
	a=$(rate "$dir/big.safetensors"); b=$(rate "$dir/m/.files/big.safetensors"); c=$(rate "$dir/m/.files/big.safetensors")
	stop; start
	d=$(rate "$dir/m/w"); e=$(rate "$dir/m/w")
	stop
	echo "round $r: file $a; .files/ first $b, repeat $c; tensor w first $d, repeat $e; load $(cut -d' ' -f1 /proc/loadavg)"
done
