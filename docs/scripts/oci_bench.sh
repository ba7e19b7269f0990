#!/usr/bin/env bash
# oci:// throughput against Debian's docker-registry (docs/BENCHMARKS.md,
# "oci://: a 1 GiB raw layer against 8 curls"; issue 43).
#
#   docs/scripts/oci_bench.sh [GIB] [REPS]      the whole run
#   docs/scripts/oci_bench.sh serve [GIB]       set up, print the source and
#                                               the blob's URL, wait (^C ends)
#   docs/scripts/oci_bench.sh curls URL SIZE PART
#                                               the baseline alone: 8 parallel
#                                               ranged curl GETs of URL to
#                                               /dev/null; PART 0 is one range
#                                               of SIZE/8 each, else PART-byte
#                                               ranges, 8 at a time
#
# Starts `docker-registry serve` (distribution 2.8, filesystem store under
# /var/tmp) on 127.0.0.1, pushes a GIB GiB safetensors checkpoint of 32 MiB
# F16 tensors (docs/scripts/st_ckpt.py --sparse) as one ModelPack raw weight
# layer (the distribution spec's monolithic POST and PUT, with curl), then
# REPS times, in turn: the two baselines (SIZE/8 per curl, and 64 MiB parts)
# and `tensorfs load --quiet oci://127.0.0.1:PORT/bench:v1` with default
# flags, printing GB/s and the ratios load / baseline. Needs: go, curl,
# python3, sha256sum, docker-registry. Run from the repository root.
set -uo pipefail

curls() { # URL SIZE PART
	local url=$1 size=$2 part=$3 per a b
	if [ "$part" = 0 ]; then per=$(((size + 7) / 8)); else per=$part; fi
	for ((a = 0; a < size; a += per)); do
		b=$((a + per - 1))
		if ((b >= size)); then b=$((size - 1)); fi
		echo "$a-$b"
	done | xargs -P 8 -I{} curl -sS --fail -r {} -o /dev/null "$url"
}
if [ "${1:-}" = curls ]; then
	curls "$2" "$3" "$4"
	exit
fi
serve=
if [ "${1:-}" = serve ]; then
	serve=1
	shift
fi
GIB=${1:-1}
REPS=${2:-3}
work=$(mktemp -d /var/tmp/tensorfs-oci-bench.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
go build -o "$work/tensorfs" ./cmd/tensorfs || exit 1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/config.yml" <<EOF
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $work/store
http:
  addr: 127.0.0.1:$port
EOF
docker-registry serve "$work/config.yml" >"$work/registry.log" 2>&1 &
pid=$!
reg=http://127.0.0.1:$port
until curl -s -o /dev/null "$reg/v2/"; do sleep 0.1; done
push() { # FILE: prints its digest
	local d loc
	d=sha256:$(sha256sum "$1" | cut -d' ' -f1)
	loc=$(curl -sS -X POST -D - -o /dev/null "$reg/v2/bench/blobs/uploads/" | tr -d '\r' | sed -n 's/^[Ll]ocation: //p')
	case $loc in http*) ;; *) loc=$reg$loc ;; esac
	case $loc in *\?*) loc="$loc&digest=$d" ;; *) loc="$loc?digest=$d" ;; esac
	curl -sS --fail -X PUT -H 'Content-Type: application/octet-stream' -T "$1" "$loc" >/dev/null || exit 1
	echo "$d"
}
python3 docs/scripts/st_ckpt.py "$work/ckpt.safetensors" $((GIB * 32)) --sparse
size=$(stat -c %s "$work/ckpt.safetensors")
printf '{}' >"$work/config.json"
wd=$(push "$work/ckpt.safetensors")
cd_=$(push "$work/config.json")
rm "$work/ckpt.safetensors"
cat >"$work/manifest.json" <<EOF
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.cncf.model.manifest.v1+json",
"config":{"mediaType":"application/vnd.cncf.model.config.v1+json","digest":"$cd_","size":2},
"layers":[{"mediaType":"application/vnd.cncf.model.weight.v1.raw","digest":"$wd","size":$size,"annotations":{"org.cncf.model.filepath":"model.safetensors"}}]}
EOF
curl -sS --fail -X PUT -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' -T "$work/manifest.json" "$reg/v2/bench/manifests/v1" >/dev/null || exit 1
src=oci://127.0.0.1:$port/bench:v1
blob=$reg/v2/bench/blobs/$wd
if [ -n "$serve" ]; then
	echo "source: $src"
	echo "blob: $blob"
	echo "size: $size"
	echo "tensorfs: $work/tensorfs"
	while sleep 3600; do :; done
fi
now() { date +%s.%N; }
gbs() { python3 -c "print('%.2f' % ($1 / ($3 - $2) / 1e9))"; }
ratio() { python3 -c "print('%.2f' % ($1 / $2))"; }
echo "layer: $size bytes; $(nproc) CPUs; load average: $(uptime | sed 's/.*load average: //')"
for ((r = 1; r <= REPS; r++)); do
	t0=$(now); curls "$blob" "$size" 0; t1=$(now)
	curls "$blob" "$size" $((64 << 20)); t2=$(now)
	"$work/tensorfs" load --quiet "$src" || exit 1
	t3=$(now)
	one=$(gbs "$size" "$t0" "$t1") parts=$(gbs "$size" "$t1" "$t2") load=$(gbs "$size" "$t2" "$t3")
	echo "rep $r: 8 curls of SIZE/8 $one GB/s, 8 curls of 64 MiB parts $parts GB/s, tensorfs load $load GB/s: ratio $(ratio "$load" "$one") and $(ratio "$load" "$parts")"
done
