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
# and the same for s3:// in the same run: versitygw v1.8.0 over the same
# file, N parallel ranged GETs (curl --aws-sigv4) against
# tensorfs load s3://bench/model.safetensors.
# With OLD=BINARY, each repetition also loads with that tensorfs build
# (before/after side by side, interleaved, in alternating order); with FLAGS="...", each load
# also runs with those flags added (e.g. FLAGS="--remote-readahead 0").
# With PROFILE=DIR, the last loads also write DIR/hf-load.prof and
# DIR/s3-load.prof (--cpuprofile). Needs: go, curl, python3, versitygw
# (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0). Run from
# the repository root. Everything stays on 127.0.0.1.
set -uo pipefail
GIB=${1:-2}
N=${2:-8}
REPS=${3:-3}
work=$(mktemp -d /var/tmp/tensorfs-hf-bench.XXXXXX)
pid=
vpid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	[ -n "$vpid" ] && kill "$vpid" 2>/dev/null && wait "$vpid" 2>/dev/null || true
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
AK=AKBENCH
SK=bench-secret-key
vgw=$(command -v versitygw || echo "$(go env GOPATH)/bin/versitygw")
s3curl=(curl -sS --fail --aws-sigv4 aws:amz:us-east-1:s3 --user "$AK:$SK" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/data/bench"
ROOT_ACCESS_KEY=$AK ROOT_SECRET_KEY=$SK "$vgw" --port 127.0.0.1:$port posix "$work/data" >"$work/vgw.log" 2>&1 &
vpid=$!
ep=http://127.0.0.1:$port
until curl -s -o /dev/null "$ep"; do sleep 0.1; done
"${s3curl[@]}" -T "$work/repo/model.safetensors" "$ep/bench/model.safetensors" >/dev/null || exit 1
rm "$work/repo/model.safetensors" # hfserve holds it in memory
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_REGION=us-east-1 AWS_ENDPOINT_URL=$ep AWS_EC2_METADATA_DISABLED=true
now() { date +%s.%N; }
gbs() { python3 -c "print('%.2f' % ($1 / ($3 - $2) / 1e9))"; }
baseline() { # hf|s3
	local cdn per=$(((size + N - 1) / N)) i pids=()
	cdn=$(curl -sS -o /dev/null -w '%{redirect_url}' "$hub/bench/model/resolve/main/model.safetensors")
	for ((i = 0; i < N; i++)); do
		local a=$((i * per)) b=$(((i + 1) * per - 1))
		if ((b >= size)); then b=$((size - 1)); fi
		if [ "$1" = hf ]; then
			curl -sS --fail -r "$a-$b" -o /dev/null "$cdn" &
		else
			"${s3curl[@]}" -r "$a-$b" -o /dev/null "$ep/bench/model.safetensors" &
		fi
		pids+=($!)
	done
	wait "${pids[@]}"
}
echo "object: $size bytes; N=$N parallel ranged GETs; $(nproc) CPUs; load average: $(uptime | sed 's/.*load average: //')"
for ((r = 1; r <= REPS; r++)); do
	for kind in hf s3; do
		src=hf://bench/model
		[ $kind = s3 ] && src=s3://bench/model.safetensors
		prof=()
		if [ -n "${PROFILE:-}" ] && ((r == REPS)); then prof=(--cpuprofile "$PROFILE/$kind-load.prof"); fi
		t0=$(now); baseline $kind; t1=$(now)
		base=$(gbs "$size" "$t0" "$t1")
		variants=("new|$work/tensorfs|")
		[ -n "${FLAGS:-}" ] && variants+=("new $FLAGS|$work/tensorfs|$FLAGS")
		if [ -n "${OLD:-}" ]; then
			variants+=("old|$OLD|")
			[ -n "${FLAGS:-}" ] && variants+=("old $FLAGS|$OLD|$FLAGS")
		fi
		if ((r % 2 == 0)); then # alternate the order of the loads
			local_rev=()
			for ((i = ${#variants[@]} - 1; i >= 0; i--)); do local_rev+=("${variants[i]}"); done
			variants=("${local_rev[@]}")
		fi
		for v in "${variants[@]}"; do
			IFS='|' read -r label bin flags <<<"$v"
			t1=$(now)
			# shellcheck disable=SC2086 # flags are words
			out=$("$bin" load "${prof[@]}" $flags "$src" 2>&1 >/dev/null)
			t2=$(now)
			load=$(gbs "$size" "$t1" "$t2")
			echo "rep $r $kind: baseline $base GB/s, load ($label) $load GB/s, ratio $(python3 -c "print('%.2f' % ($load/$base))"); $(echo "$out" | grep -o 'peak memory [^,]*' || echo "$out")"
		done
	done
	echo "  load average: $(uptime | sed 's/.*load average: //')"
done
