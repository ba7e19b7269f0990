#!/usr/bin/env bash
# Remote loading benchmark (docs/BENCHMARKS.md, "Remote sources").
#
#   docs/scripts/remote_bench.sh [GIB] [N] [REPS] [K]
#
# Starts versitygw (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)
# on loopback over a temporary directory, uploads a GIB GiB safetensors
# checkpoint of 32 MiB F16 tensors (docs/scripts/st_ckpt.py), then measures
# side by side, REPS times each:
#   baseline  N parallel ranged GETs covering the object (curl --aws-sigv4,
#             one range of SIZE/N bytes each), to /dev/null
#   load      tensorfs load --quiet s3://bench/ckpt.safetensors (its
#             throughput and peak RSS, from its own summary line)
# then a first read of every tensor through an s3:// mount (4 readers),
# the same with --cache-dir on a second mount (disk cache warm), and K
# concurrent loads of the object (aggregate and per-load throughput).
# Needs: go (builds tensorfs), curl, python3, fusermount3. Run from the
# repository root. Everything stays on 127.0.0.1; the directory is removed.
set -uo pipefail
GIB=${1:-2}
N=${2:-16}
REPS=${3:-3}
K=${4:-4}
AK=AKBENCH
SK=bench-secret-key
work=$(mktemp -d /var/tmp/tensorfs-remote-bench.XXXXXX)
vgw=$(command -v versitygw || echo "$(go env GOPATH)/bin/versitygw")
pid=
cleanup() {
	for m in "$work"/mnt*; do fusermount3 -u "$m" 2>/dev/null || true; done
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/tensorfs" ./cmd/tensorfs || exit 1
s3curl=(curl -sS --fail --aws-sigv4 aws:amz:us-east-1:s3 --user "$AK:$SK" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/data/bench"
ROOT_ACCESS_KEY=$AK ROOT_SECRET_KEY=$SK "$vgw" --port 127.0.0.1:$port posix "$work/data" >"$work/vgw.log" 2>&1 &
pid=$!
ep=http://127.0.0.1:$port
until curl -s -o /dev/null "$ep"; do sleep 0.1; done
python3 docs/scripts/st_ckpt.py "$work/ckpt.safetensors" $((GIB * 32)) --sparse
"${s3curl[@]}" -T "$work/ckpt.safetensors" "$ep/bench/ckpt.safetensors" >/dev/null || exit 1
size=$(stat -c %s "$work/ckpt.safetensors")
rm "$work/ckpt.safetensors"
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_REGION=us-east-1 AWS_ENDPOINT_URL=$ep AWS_EC2_METADATA_DISABLED=true
now() { date +%s.%N; }
gbs() { python3 -c "print('%.2f' % ($1 / ($3 - $2) / 1e9))"; }

baseline() {
	local per=$(((size + N - 1) / N)) i pids=()
	for ((i = 0; i < N; i++)); do
		local a=$((i * per)) b=$(((i + 1) * per - 1))
		if ((b >= size)); then b=$((size - 1)); fi
		"${s3curl[@]}" -r "$a-$b" -o /dev/null "$ep/bench/ckpt.safetensors" &
		pids+=($!)
	done
	wait "${pids[@]}"
}

echo "object: $size bytes; N=$N parallel ranged GETs; $(nproc) CPUs; load: $(uptime | sed 's/.*load average: //')"
for ((r = 1; r <= REPS; r++)); do
	t0=$(now); baseline; t1=$(now)
	out=$("$work/tensorfs" load s3://bench/ckpt.safetensors 2>&1 >/dev/null)
	t2=$(now)
	base=$(gbs "$size" "$t0" "$t1"); load=$(gbs "$size" "$t1" "$t2")
	echo "rep $r: baseline $base GB/s, load $load GB/s, ratio $(python3 -c "print('%.2f' % ($load/$base))"); $(echo "$out" | grep -o 'peak memory.*')"
done

readmount() { # MOUNTPOINT: every tensor, 4 readers
	find "$1" -maxdepth 1 -type f -name 'layers.*' | xargs -P 4 -n 8 cat >/dev/null
}
mnt() { # N FLAGS...: mount s3 at $work/mntN, wait until ready
	local m=$work/mnt$1; shift
	mkdir -p "$m"
	"$work/tensorfs" mount "$@" s3://bench/ckpt.safetensors "$m" 2>>"$work/mount.log" &
	until [ -e "$m/.tensorfs/index.json" ]; do sleep 0.05; done
}
t0=$(now); baseline; t1=$(now)
mnt 1
t2=$(now); readmount "$work/mnt1"; t3=$(now)
fusermount3 -u "$work/mnt1"
mnt 2 --cache-dir "$work/cache" --cache-size 64GiB
readmount "$work/mnt2"
fusermount3 -u "$work/mnt2"
mnt 3 --cache-dir "$work/cache" --cache-size 64GiB
t4=$(now); readmount "$work/mnt3"; t5=$(now)
fusermount3 -u "$work/mnt3"
echo "mount first read: $(gbs "$size" "$t2" "$t3") GB/s; disk cache warm: $(gbs "$size" "$t4" "$t5") GB/s; baseline $(gbs "$size" "$t0" "$t1") GB/s"

t0=$(now)
pids=()
for ((k = 0; k < K; k++)); do
	"$work/tensorfs" load --quiet s3://bench/ckpt.safetensors &
	pids+=($!)
done
wait "${pids[@]}"
t1=$(now)
echo "$K concurrent loads: aggregate $(gbs $((size * K)) "$t0" "$t1") GB/s, per load $(gbs "$size" "$t0" "$t1") GB/s"
