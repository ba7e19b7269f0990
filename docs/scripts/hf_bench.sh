#!/usr/bin/env bash
# hf:// loading benchmark (docs/BENCHMARKS.md, "Remote sources: hf://").
#
#   docs/scripts/hf_bench.sh [GIB] [N] [REPS]
#
# Starts backing/hf/hftest's loopback Hub and CDN (hfserve) over a GIB GiB
# safetensors checkpoint of 32 MiB F16 tensors (docs/scripts/st_ckpt.py,
# sparse: zeros, held in the server's memory), then measures in one run,
# REPS times each, interleaved:
#   baseline  N parallel ranged GETs of the file's CDN URL (resolve's 302
#             Location, presigned), one range of SIZE/N bytes each, curl
#             to /dev/null
#   load      tensorfs load --quiet hf://bench/model (its defaults), its
#             throughput and peak memory from its own summary line
# With PROFILE=DIR, the last load also writes DIR/hf-load.prof
# (--cpuprofile). Needs: go, curl, python3. Run from the repository root.
set -uo pipefail
GIB=${1:-2}
N=${2:-8}
REPS=${3:-3}
work=$(mktemp -d /var/tmp/tensorfs-hf-bench.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/tensorfs" ./cmd/tensorfs || exit 1
go build -o "$work/hfserve" ./backing/hf/hftest/hfserve || exit 1
mkdir -p "$work/repo"
python3 docs/scripts/st_ckpt.py "$work/repo/model.safetensors" $((GIB * 32)) --sparse
size=$(stat -c %s "$work/repo/model.safetensors")
"$work/hfserve" "$work/repo" bench/model >"$work/hub" 2>"$work/hfserve.log" &
pid=$!
until [ -s "$work/hub" ]; do sleep 0.1; done
hub=$(cat "$work/hub")
export HF_ENDPOINT=$hub HF_HOME=$work/hfhome HF_TOKEN= HF_HUB_CACHE= HF_HUB_OFFLINE=
now() { date +%s.%N; }
gbs() { python3 -c "print('%.2f' % ($1 / ($3 - $2) / 1e9))"; }
baseline() {
	local cdn per=$(((size + N - 1) / N)) i pids=()
	cdn=$(curl -sS -o /dev/null -w '%{redirect_url}' "$hub/bench/model/resolve/main/model.safetensors")
	for ((i = 0; i < N; i++)); do
		local a=$((i * per)) b=$(((i + 1) * per - 1))
		if ((b >= size)); then b=$((size - 1)); fi
		curl -sS --fail -r "$a-$b" -o /dev/null "$cdn" &
		pids+=($!)
	done
	wait "${pids[@]}"
}
echo "object: $size bytes; N=$N parallel ranged GETs of the CDN URL; $(nproc) CPUs; load: $(uptime | sed 's/.*load average: //')"
for ((r = 1; r <= REPS; r++)); do
	prof=()
	if [ -n "${PROFILE:-}" ] && ((r == REPS)); then prof=(--cpuprofile "$PROFILE/hf-load.prof"); fi
	t0=$(now); baseline; t1=$(now)
	out=$("$work/tensorfs" load "${prof[@]}" hf://bench/model 2>&1 >/dev/null)
	t2=$(now)
	base=$(gbs "$size" "$t0" "$t1"); load=$(gbs "$size" "$t1" "$t2")
	echo "rep $r: baseline $base GB/s, load $load GB/s, ratio $(python3 -c "print('%.2f' % ($load/$base))"); $(echo "$out" | grep -o 'peak memory.*')"
done
