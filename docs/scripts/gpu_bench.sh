#!/usr/bin/env bash
# GPU upload benchmark (docs/BENCHMARKS.md, "GPU upload").
#
#   docs/scripts/gpu_bench.sh BIN [GIB] [DIR]
#
# BIN holds a tensorfs built with cgo (CGO_ENABLED=1 go build -o BIN/tensorfs
# ./cmd/tensorfs; no Go is needed where this runs). Writes a GIB GiB
# (default 8) LLaMA-shaped BF16 safetensors checkpoint under DIR (default
# /var/tmp/tensorfs-gpu) with docs/scripts/gpu_ckpt.py, then prints one
# table, each figure the best of 3 runs measured side by side in this run:
#   the link's ceiling      one pinned buffer, one cudaMemcpy (torch, CUDA events)
#   load --gpu, warm        defaults, then a sweep of goroutines/buffers/streams/chunk
#   load --gpu --dtype f16  BF16 converted to F16 on the host
#   load (host only)        the same read into host buffers, no GPU
#   cold                    caches dropped: dd iflag=direct bs=16M, load --gpu
#                           (auto: O_DIRECT), load --gpu --io pread
#   through a mount         tensorfs mount, then load --gpu of the mount point
#   peers                   safetensors.torch.load_file(device="cuda:0"),
#                           torch.load(mmap=True) + .to("cuda:0")
#   --verify                every tensor copied back and its sha256 compared
# and the host's peak memory of load --gpu. Needs python3 with torch
# (safetensors optional), root to drop the page cache (else posix_fadvise).
set -uo pipefail
BIN=${1:?usage: gpu_bench.sh BIN [GIB] [DIR]}
GIB=${2:-8}
DIR=${3:-/var/tmp/tensorfs-gpu}
PY=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
tfs=$(cd "$BIN" && pwd)/tensorfs
mkdir -p "$DIR"
ck=$DIR/model.safetensors
pt=$DIR/model.pt
log=$DIR/gpu_bench.log
: >"$log"
mnt=$DIR/mnt
cleanup() { "$tfs" umount "$mnt" >/dev/null 2>&1 || true; }
trap cleanup EXIT

nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max,memory.total --format=csv,noheader 2>&1 | sed 's/^/device: /'
echo "cpus: $(nproc), kernel $(uname -r)"
[ -s "$ck" ] || "$PY" "$here/gpu_ckpt.py" "$ck" "$GIB" || exit 1
size=$(stat -c %s "$ck")

# Find the CUDA runtime once: a device that cannot exist fails at once,
# saying whether the runtime was found.
if [ -z "${TENSORFS_CUDART:-}" ] && "$tfs" load --gpu 999 --quiet "$ck" 2>&1 | grep -q 'runtime not found'; then
	TENSORFS_CUDART=$(find / -xdev -name 'libcudart.so*' -type f 2>/dev/null | head -1)
	export TENSORFS_CUDART
	echo "libcudart: $TENSORFS_CUDART"
fi

warm() { cat "$1" >/dev/null; }
drop() {
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null ||
		"$PY" -c 'import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)' "$1"
}
# rate CMD...: runs CMD, logs its output, prints the GB/s of its summary
# line (the whole call: "in X s, Y GB/s") and, for load --gpu, that of the
# copy phase ("copying X s at Y GB/s"), else "-".
rate() {
	local out w c
	out=$("$@" 2>&1)
	printf '$ %s\n%s\n' "$*" "$out" >>"$log"
	w=$(sed -n 's/.* in \([0-9.]*\) s, \([0-9.]*\) GB\/s.*/\2/p' <<<"$out" | head -1)
	c=$(sed -n 's/.*copying [0-9.]* s at \([0-9.]*\) GB\/s.*/\1/p' <<<"$out" | head -1)
	echo "${w:-0} ${c:--}"
}
best() { # best N CMD...: the best of N runs (by the whole call's rate)
	local n=$1 b="0 -" r
	shift
	for _ in $(seq "$n"); do
		r=$(rate "$@")
		b=$(awk -v a="$b" -v c="$r" 'BEGIN{split(a,x," "); split(c,y," "); print (y[1]+0>x[1]+0)?c:a}')
	done
	echo "$b"
}
rows=()
row() { # row NAME "WHOLE [COPY]"
	local w c
	read -r w c <<<"$2"
	rows+=("$1|$w|${c:--}")
	printf '%-62s %8s GB/s  (copy phase %s)\n' "$1" "$w" "${c:--}"
}

warm "$ck"
ceiling=$("$PY" "$here/gpu_peers.py" memcpy "$ck" 2>>"$log" | awk '{print $2}')
pinning=$("$PY" -c 'import sys,time,torch; torch.empty(1,device="cuda"); n=int(sys.argv[1]); t=time.perf_counter(); h=torch.empty(n,dtype=torch.uint8).pin_memory(); print("%.3f" % (time.perf_counter()-t))' $((512 << 20)) 2>>"$log")
echo "pinning 512 MiB with torch (pin_memory): ${pinning:-?} s"
row "pinned memcpy, one buffer (the link)" "${ceiling:-?} -"
row "load --gpu 0, warm, defaults" "$(best 3 "$tfs" load --gpu 0 "$ck")"
grep -m1 'uploaded' "$log" | sed 's/.*(setup/defaults: (setup/'
grep -m1 'staging freed' "$log"
for cfg in "--write-combined=false" "--parallel 8" "--buffers 8" "--buffers 32" "--buffers 24 --chunk 16MiB" "--streams 4" "--register"; do
	# shellcheck disable=SC2086
	row "load --gpu 0, warm, $cfg" "$(best 3 "$tfs" load --gpu 0 $cfg "$ck")"
done
row "load --gpu 0 --dtype f16, warm" "$(best 3 "$tfs" load --gpu 0 --dtype f16 "$ck")"
row "load --gpu 0 --dtype f16 --io pread, warm" "$(best 3 "$tfs" load --gpu 0 --dtype f16 --io pread "$ck")"
row "load (host only), warm, --parallel $(nproc)" "$(best 3 "$tfs" load --parallel "$(nproc)" "$ck")"
row "load (host only), warm, defaults" "$(best 3 "$tfs" load "$ck")"

dd_rate() {
	drop "$ck"
	dd if="$ck" of=/dev/null bs=16M iflag=direct 2>&1 | tail -1 | tee -a "$log" |
		awk '{for(i=1;i<=NF;i++) if($i ~ /^[0-9.]+$/ && $(i+1) ~ /^s,?$/) s=$i} END{if(s>0) printf "%.2f", '"$size"'/s/1e9}'
}
cold() { drop "$ck"; rate "$@"; }
row "cold: dd iflag=direct bs=16M (the disk)" "$(dd_rate) -"
row "cold: load --gpu 0 (auto: O_DIRECT)" "$(cold "$tfs" load --gpu 0 "$ck")"
grep 'read model.safetensors' "$log" | tail -1
row "cold: load --gpu 0 --io pread" "$(cold "$tfs" load --gpu 0 --io pread "$ck")"
row "cold: dd iflag=direct bs=16M (again)" "$(dd_rate) -"

mkdir -p "$mnt"
if "$tfs" mount "$ck" "$mnt" 2>>"$log" & then
	mp=$!
	for _ in $(seq 100); do [ -e "$mnt/.tensorfs/index.json" ] && break; sleep 0.1; done
	if [ -e "$mnt/.tensorfs/index.json" ]; then
		warm "$ck"
		row "through a mount: load --gpu 0 M (first read)" "$(rate "$tfs" load --gpu 0 "$mnt")"
		row "through a mount: load --gpu 0 M (again)" "$(best 2 "$tfs" load --gpu 0 "$mnt")"
	else
		row "through a mount: no FUSE here" "- -"
	fi
	"$tfs" umount "$mnt" >/dev/null 2>&1
	wait "$mp" 2>/dev/null
fi

# A --gpu mount: ready when uploaded; a second process maps the weights.
gm=$DIR/gmnt
mkdir -p "$gm"
for gpuflag in "" "--gpu 0"; do
	warm "$ck"
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	"$tfs" mount $gpuflag "$ck" "$gm" 2>>"$log" &
	gp=$!
	for _ in $(seq 600); do [ -e "$gm/.tensorfs/index.json" ] && break; kill -0 $gp 2>/dev/null || break; sleep 0.05; done
	t1=$(date +%s.%N)
	if [ -e "$gm/.tensorfs/index.json" ]; then
		rss=$(awk '/^(VmRSS|RssAnon)/{printf "%s %s %s; ", $1, $2, $3}' /proc/$gp/status)
		echo "mount ${gpuflag:-(no --gpu)}: ready in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s; server memory once ready: $rss"
		if [ -n "$gpuflag" ]; then
			grep 'uploaded .* shared through' "$log" | tail -1
			"$PY" "$here/../examples/cuda_ipc.py" "$gm" 2>&1 | tee -a "$log"
			"$PY" "$here/../examples/cuda_ipc.py" "$gm" 2>&1 | tee -a "$log"
			"$PY" "$here/../examples/cuda_ipc.py" "$gm" --verify 2>&1 | tee -a "$log" | tail -1
		fi
	else
		echo "mount ${gpuflag:-(no --gpu)}: not ready (no FUSE here?)"
	fi
	"$tfs" umount "$gm" >/dev/null 2>&1
	wait $gp 2>/dev/null
done

warm "$ck"
if "$PY" -c 'import safetensors' 2>/dev/null; then
	row "safetensors.torch.load_file(device=cuda:0), warm" "$("$PY" "$here/gpu_peers.py" st "$ck" - 3 2>>"$log" | awk '{print $2}') -"
fi
if [ ! -s "$pt" ]; then
	"$PY" -c 'import sys,torch; from safetensors.torch import load_file; torch.save(load_file(sys.argv[1]), sys.argv[2])' "$ck" "$pt" 2>>"$log"
fi
if [ -s "$pt" ]; then
	warm "$pt"
	row "torch.load(mmap=True) + .to(cuda:0), warm" "$("$PY" "$here/gpu_peers.py" pt "$ck" "$pt" 3 2>>"$log" | awk '{print $2}') -"
	rm -f "$pt"
fi
warm "$ck"
"$tfs" load --gpu 0 --verify "$ck" 2>&1 | tee -a "$log" | grep -E 'verified|sha256|tensorfs:'
echo "peak host memory of load --gpu (defaults, warm): $(grep -m1 'uploaded' "$log" | sed 's/.*peak host memory //')"
echo
echo "| path | GB/s, whole call | / pinned memcpy | GB/s, copy phase | / pinned memcpy |"
echo "| --- | --- | --- | --- | --- |"
ratio() { awk -v a="$1" -v c="${ceiling:-0}" 'BEGIN{ if (a+0>0 && c+0>0) printf "%.2f", a/c; else print "-"}'; }
for r in "${rows[@]}"; do
	IFS='|' read -r name w c <<<"$r"
	echo "| $name | $w | $(ratio "$w") | $c | $(ratio "$c") |"
done
