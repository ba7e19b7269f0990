#!/usr/bin/env bash
# oci://, s3:// and hf:// against 8 curls of the same bytes, side by side
# (docs/BENCHMARKS.md, "Remote schemes against 8 curls"; issue 43).
#
#   docs/scripts/schemes_bench.sh [GIB] [REPS] [SCHEMES]
#
# Writes a GIB GiB safetensors checkpoint of 32 MiB F16 tensors
# (docs/scripts/st_ckpt.py --sparse) and serves it on 127.0.0.1 three
# ways: as one ModelPack raw weight layer on Debian's `docker-registry
# serve` (distribution 2.8; set up by docs/scripts/oci_registry.sh, as
# oci_bench.sh does), as an object on versitygw v1.8.0 (posix backend;
# $VERSITYGW or /root/go/bin/versitygw or versitygw on PATH), and as an
# LFS file of backing/hf/hftest's loopback Hub (hfserve; the bytes
# from its CDN through resolve's 302). Then REPS times, for each scheme of
# SCHEMES (default "oci s3 hf"), in turn:
#   curls/8   8 parallel ranged curl GETs, one of SIZE/8 bytes each
#   parts     curl GETs of 64 MiB ranges, 8 at a time (16 per GiB)
#   load      tensorfs load --quiet SOURCE with default flags
#   old       the same with OLD=BINARY (another tensorfs build), when set
# each with its wall time (GB/s), the GETs its server answered (from the
# registry's and versitygw's access logs, hfserve's counters) and the
# server's CPU time (utime+stime from /proc/PID/stat), which do not depend
# on the machine's load as the wall times do; the load average is printed
# with each repetition. Ratios are load / baseline throughput. Needs: go,
# curl, python3, sha256sum, docker-registry, versitygw. Run from the
# repository root; everything stays on 127.0.0.1 and is removed after.
set -uo pipefail
GIB=${1:-1}
REPS=${2:-3}
SCHEMES=${3:-oci s3 hf}
work=$(mktemp -d /var/tmp/tensorfs-schemes-bench.XXXXXX)
rpid= vpid= hpid=
cleanup() {
	for p in $rpid $vpid $hpid; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
go build -o "$work/tensorfs" ./cmd/tensorfs || exit 1
go build -o "$work/hfserve" ./backing/hf/hftest/hfserve || exit 1
. docs/scripts/oci_registry.sh
mkdir -p "$work/repo"
ckpt=$work/repo/model.safetensors
python3 docs/scripts/st_ckpt.py "$ckpt" $((GIB * 32)) --sparse
size=$(stat -c %s "$ckpt")

# oci: docker-registry (docs/scripts/oci_registry.sh), its access log on.
registry_start "$work" 1
registry_model "$ckpt" "$work" || exit 1

# s3: versitygw, its access log in a file.
AK=AKBENCH SK=bench-secret-key
vgw=${VERSITYGW:-$(command -v versitygw || echo /root/go/bin/versitygw)}
vport=$(freeport)
mkdir -p "$work/data/bench"
ROOT_ACCESS_KEY=$AK ROOT_SECRET_KEY=$SK "$vgw" --port 127.0.0.1:$vport --access-log "$work/vgw-access.log" posix "$work/data" >"$work/vgw.log" 2>&1 &
vpid=$!
ep=http://127.0.0.1:$vport
until curl -s -o /dev/null "$ep"; do sleep 0.1; done
s3curl=(curl -sS --fail --aws-sigv4 aws:amz:us-east-1:s3 --user "$AK:$SK" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
"${s3curl[@]}" -T "$ckpt" "$ep/bench/model.safetensors" >/dev/null || exit 1
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_REGION=us-east-1 AWS_ENDPOINT_URL=$ep AWS_EC2_METADATA_DISABLED=true

# hf: the loopback Hub, the file in its memory.
"$work/hfserve" "$work/repo" bench/model >"$work/hub" 2>"$work/hfserve.log" &
hpid=$!
until [ -s "$work/hub" ]; do sleep 0.1; done
hub=$(cat "$work/hub")
export HF_ENDPOINT=$hub HF_HOME=$work/hfhome HF_TOKEN= HF_HUB_CACHE= HF_HUB_OFFLINE=
rm "$ckpt"

now() { date +%s.%N; }
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # clock ticks
tck=$(getconf CLK_TCK)
gets() { # SCHEME: GETs of the object's bytes its server answered so far (CDN GETs for hf)
	case $1 in
	oci) registry_gets ;;
	s3) grep -c 's3_GetObject model.safetensors ' "$work/vgw-access.log" ;;
	hf)
		local n
		n=$(grep -c requests: "$work/hfserve.log")
		kill -USR1 "$hpid"
		until [ "$(grep -c requests: "$work/hfserve.log")" -gt "$n" ] 2>/dev/null; do sleep 0.05; done
		tail -1 "$work/hfserve.log" | awk '{print $5}' ;;
	esac
}
pid_of() { case $1 in oci) echo "$rpid" ;; s3) echo "$vpid" ;; hf) echo "$hpid" ;; esac; }
curls() { # SCHEME PART: 8 at a time, PART 0: one range of SIZE/8 each
	local per a b url args
	if [ "$2" = 0 ]; then per=$(((size + 7) / 8)); else per=$2; fi
	case $1 in
	oci) url=$reg/v2/bench/blobs/$wd args=(curl -sS --fail) ;;
	s3) url=$ep/bench/model.safetensors args=("${s3curl[@]}") ;;
	hf) url=$(curl -sS -o /dev/null -w '%{redirect_url}' "$hub/bench/model/resolve/main/model.safetensors") args=(curl -sS --fail) ;;
	esac
	for ((a = 0; a < size; a += per)); do
		b=$((a + per - 1))
		if ((b >= size)); then b=$((size - 1)); fi
		echo "$a-$b"
	done | xargs -P 8 -I{} "${args[@]}" -r {} -o /dev/null "$url"
}
source_of() { case $1 in oci) echo "oci://127.0.0.1:$rport/bench:v1" ;; s3) echo s3://bench/model.safetensors ;; hf) echo hf://bench/model ;; esac; }
# measure SCHEME LABEL CMD...: runs CMD, prints "LABEL G.GG GB/s, N GETs,
# server CPU C.CC s" and writes the GB/s to $work/last
measure() {
	local s=$1 label=$2 g0 c0 t0 t1 g1 c1 p
	shift 2
	p=$(pid_of "$s")
	g0=$(gets "$s") c0=$(cpu "$p") t0=$(now)
	"$@" || { echo "$label failed" >&2; exit 1; }
	t1=$(now) c1=$(cpu "$p") g1=$(gets "$s")
	last=$(python3 -c "print('%.2f' % ($size / ($t1 - $t0) / 1e9))")
	echo "$last" >"$work/last"
	printf '%s %s GB/s, %d GETs, server CPU %s s' "$label" "$last" $((g1 - g0)) "$(python3 -c "print('%.2f' % (($c1 - $c0) / $tck))")"
}
ratio() { python3 -c "print('%.2f' % ($1 / $2))"; }
echo "checkpoint: $size bytes; $(nproc) CPUs; schemes: $SCHEMES"
for ((r = 1; r <= REPS; r++)); do
	for s in $SCHEMES; do
		src=$(source_of "$s")
		line="rep $r $s: $(measure "$s" curls/8 curls "$s" 0)"; one=$(cat "$work/last")
		line+="; $(measure "$s" parts curls "$s" $((64 << 20)))"; parts=$(cat "$work/last")
		line+="; $(measure "$s" load "$work/tensorfs" load --quiet "$src")"; load=$(cat "$work/last")
		line+=" (ratio $(ratio "$load" "$one") of curls/8, $(ratio "$load" "$parts") of parts)"
		if [ -n "${OLD:-}" ]; then
			line+="; $(measure "$s" old "$OLD" load --quiet "$src")"; old=$(cat "$work/last")
			line+=" (ratio $(ratio "$old" "$one"), $(ratio "$old" "$parts"))"
		fi
		echo "$line; load average $(cut -d' ' -f1-3 /proc/loadavg)"
	done
done
