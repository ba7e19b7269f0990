#!/usr/bin/env bash
# Fleet benchmark (docs/BENCHMARKS.md, "Fleets"; issue 30).
#
#   docs/scripts/fleet_bench.sh [TENSORS] [REPS]
#
# Starts versitygw (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)
# and nginx (Debian's nginx-light) on loopback, nginx with
# docs/scripts/nginx-tier.conf: a slice cache (8 MiB slices, = --part-size)
# on TIER and a plain forward proxy on PASS, both logging the origin's
# bytes ($upstream_bytes_received). Uploads a checkpoint of TENSORS 32 MiB
# F16 tensors (docs/scripts/st_ckpt.py), then, in one run:
#   fleet, tier     8 concurrent `tensorfs load --sha256 --proxy TIER`, cold
#                   tier: the origin's bytes over the checkpoint's size
#   fleet, no tier  the same through PASS (no cache)
#   warm tier       REPS times: 8 parallel ranged curl GETs of the object
#                   from the tier (one eighth each, to /dev/null), then one
#                   `tensorfs load --proxy TIER` (GB/s each, and the ratio)
# Needs: go, curl, python3, nginx. Run from the repository root. Everything
# stays on 127.0.0.1; the directory is removed.
set -uo pipefail
TENSORS=${1:-16}
REPS=${2:-3}
AK=AKBENCH
SK=bench-secret-key
work=$(mktemp -d /var/tmp/tensorfs-fleet-bench.XXXXXX)
vgw=$(command -v versitygw || echo "$(go env GOPATH)/bin/versitygw")
nginx=$(command -v nginx || echo /usr/sbin/nginx)
pid= npid=
cleanup() {
	[ -n "$npid" ] && kill -9 -- -"$npid" 2>/dev/null
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/tensorfs" ./cmd/tensorfs || exit 1
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(freeport) tier=$(freeport) pass=$(freeport)
mkdir -p "$work/data/bench" "$work/nginx"
ROOT_ACCESS_KEY=$AK ROOT_SECRET_KEY=$SK "$vgw" --port 127.0.0.1:$port posix "$work/data" >"$work/vgw.log" 2>&1 &
pid=$!
ep=http://127.0.0.1:$port
user=; [ "$(id -u)" = 0 ] && user="user root;"
sed -e "s|{{user}}|$user|; s|{{dir}}|$work/nginx|g; s|{{tier}}|$tier|; s|{{pass}}|$pass|; s|{{slice}}|8m|" docs/scripts/nginx-tier.conf >"$work/nginx/nginx.conf"
setsid "$nginx" -p "$work/nginx" -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" &
npid=$!
until curl -s -o /dev/null "$ep" && (exec 3<>"/dev/tcp/127.0.0.1/$tier") 2>/dev/null; do sleep 0.1; done
s3curl=(curl -sS --fail --aws-sigv4 aws:amz:us-east-1:s3 --user "$AK:$SK" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
python3 docs/scripts/st_ckpt.py "$work/ckpt.safetensors" "$TENSORS"
"${s3curl[@]}" -T "$work/ckpt.safetensors" "$ep/bench/ckpt.safetensors" >/dev/null || exit 1
size=$(stat -c %s "$work/ckpt.safetensors")
want=$("$work/tensorfs" load --quiet --sha256 "$work/ckpt.safetensors" | sha256sum)
rm "$work/ckpt.safetensors"
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_REGION=us-east-1 AWS_ENDPOINT_URL=$ep AWS_EC2_METADATA_DISABLED=true
now() { date +%s.%N; }
gbs() { python3 -c "print('%.2f' % ($1 / ($3 - $2) / 1e9))"; }
origin() { # bytes the origin sent since the log had $1 bytes
	tail -c +"$(($1 + 1))" "$work/nginx/origin.log" | awk -F'|' '{n=split($NF,a,/[,: ]+/); for(i=1;i<=n;i++) s+=a[i]} END {printf "%.0f", s}'
}
logsize() { stat -c %s "$work/nginx/origin.log" 2>/dev/null || echo 0; }
fleet() { # PROXY: 8 concurrent loads; checks each one's sha256 lines
	local i pids=() bad=0
	for ((i = 0; i < 8; i++)); do
		("$work/tensorfs" load --quiet --sha256 --proxy "$1" s3://bench/ckpt.safetensors | sha256sum >"$work/out.$i") &
		pids+=($!)
	done
	wait "${pids[@]}"
	for ((i = 0; i < 8; i++)); do [ "$(cat "$work/out.$i")" = "$want" ] || bad=$((bad + 1)); done
	echo "$bad"
}
echo "object: $size bytes; $(nproc) CPUs; load average: $(uptime | sed 's/.*load average: //')"
for name in tier pass; do
	p=$tier; [ $name = pass ] && p=$pass
	l0=$(logsize); t0=$(now); bad=$(fleet "http://127.0.0.1:$p"); t1=$(now)
	o=$(origin "$l0")
	echo "fleet of 8 loads, $([ $name = tier ] && echo through the cold tier || echo without the tier): origin sent $o bytes = $(python3 -c "print('%.3f' % ($o/$size))")x the checkpoint; $(python3 -c "print('%.1f' % ($t1-$t0))") s; $bad of 8 loads wrong"
done
baseline() { # 8 parallel ranged GETs of the object from the tier
	local per=$(((size + 7) / 8)) i pids=()
	for ((i = 0; i < 8; i++)); do
		local a=$((i * per)) b=$(((i + 1) * per - 1))
		if ((b >= size)); then b=$((size - 1)); fi
		"${s3curl[@]}" -x "http://127.0.0.1:$tier" -r "$a-$b" -o /dev/null "$ep/bench/ckpt.safetensors" &
		pids+=($!)
	done
	wait "${pids[@]}"
}
for ((r = 1; r <= REPS; r++)); do
	l0=$(logsize)
	t0=$(now); baseline; t1=$(now)
	"$work/tensorfs" load --quiet --proxy "http://127.0.0.1:$tier" s3://bench/ckpt.safetensors >/dev/null
	t2=$(now)
	base=$(gbs "$size" "$t0" "$t1"); load=$(gbs "$size" "$t1" "$t2")
	echo "warm tier, rep $r: 8 ranged curl GETs $base GB/s, tensorfs load $load GB/s, ratio $(python3 -c "print('%.2f' % ($load/$base))"); origin sent $(origin "$l0") bytes"
done
