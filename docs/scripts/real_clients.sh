#!/usr/bin/env bash
# Real clients on a mount against the original files (issue 45), in Debian
# sid's chroot, where transformers, llama.cpp's tools (converter,
# llama-simple), onnxruntime, h5py, safetensors and NumPy are Debian's
# own packages. The mounts are made here, under SID/out, and read from
# inside the chroot (debian.sh runs each command in a mount namespace
# that still sees them). Prints one line per check ("ok" or "FAIL") and
# the load times (mount and direct, cold and warm); exits 1 on a FAIL.
#
#   bash ../shared/tools/debian.sh sid /srv/sid      # once, 5-10 min (see run below)
#   docs/scripts/real_clients.sh /srv/sid [TENSORFS]
#
# CI does not run it (it needs the chroot); CI's tests use committed
# fixtures.
set -euo pipefail
cd "$(dirname "$0")/../.."
sid=${1:?usage: real_clients.sh SID_CHROOT [TENSORFS]}
bin=$(realpath "${2:-$(command -v tensorfs)}")
data=$(realpath "${TENSORFS_TESTDATA:-../shared/testdata}")
work=$sid/out/real_clients
in=/out/real_clients # the same, inside the chroot
mounts=()
pids=()
cleanup() {
	for m in "${mounts[@]}"; do fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || true; done
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$work"
cp docs/scripts/real_clients.py "$work/"
# run CMD: in the chroot, as debian.sh's "run" does (a mount namespace of
# its own with /proc, /dev and /dev/shm; the host's mounts under
# SID/out still show), without its package probe: python3-onnxruntime is
# uninstallable in sid today (it depends on libre2-11-absl20260526, which
# sid lacks), so a chroot may have everything else and no onnxruntime.
run() {
	unshare --mount --propagation slave sh -c 'd=$1; shift; mount -t proc proc "$d/proc" &&
		mount --bind /dev "$d/dev" && mount --bind /dev/shm "$d/dev/shm" &&
		exec chroot "$d" env PYTHONWARNINGS=ignore "$@"' sh "$sid" "$@"
}
fails=0
check() { if "$@"; then :; else fails=$((fails + 1)); fi; }

# mnt NAME SOURCE [FLAGS...]: mount SOURCE at $work/NAME, wait for it
mnt() {
	local name=$1 src=$2
	shift 2
	mkdir -p "$work/$name"
	"$bin" mount "$@" "$src" "$work/$name" 2>"$work/$name.log" &
	pids+=($!)
	mounts+=("$work/$name")
	for _ in $(seq 600); do [ -e "$work/$name/.tensorfs/index.json" ] && return 0; sleep 0.1; done
	echo "FAIL mount of $src did not come up: $(cat "$work/$name.log")"
	return 1
}

# 1. The writers, in the chroot: a tiny random Llama (transformers'
# save_pretrained, plain and sharded) with a SentencePiece tokenizer.
run python3 "$in/real_clients.py" make "$in"

# 2. transformers, safetensors and NumPy on mounts of both.
mnt m_plain "$work/plain"
mnt m_sharded "$work/sharded"
mnt m_fp8_full "$work/fp8_full"
mnt m_fp8_partial "$work/fp8_partial"
check run python3 "$in/real_clients.py" check "$in"

# 3. llama.cpp: its converter on the mount's root and on the original
# directory (the same GGUF, byte for byte; each directory is named
# "tiny" so the model's name is the same), then llama-simple on the
# original GGUF, on a mount of it (.files/), and on an hf:// mount of it
# served by the loopback Hub: the same tokens.
conv=$(run sh -c 'command -v convert_hf_to_gguf convert_hf_to_gguf.py 2>/dev/null; ls /usr/share/doc/llama.cpp-tools/scripts/convert_hf_to_gguf.py 2>/dev/null' | head -1 || true)
if [ -z "$conv" ]; then
	echo "FAIL llama.cpp's convert_hf_to_gguf not found in the chroot"
	fails=$((fails + 1))
else
	mkdir -p "$work/orig/tiny" "$work/gguf"
	cp "$work/plain/"* "$work/orig/tiny/"
	mkdir -p "$work/mnt"
	mnt mnt/tiny "$work/plain"
	case $conv in *.py) py=(python3 "$conv") ;; *) py=("$conv") ;; esac
	run "${py[@]}" "$in/orig/tiny" --outfile "$in/gguf/orig.gguf" --outtype f32 >"$work/conv_orig.log" 2>&1
	run "${py[@]}" "$in/mnt/tiny" --outfile "$in/gguf/mount.gguf" --outtype f32 >"$work/conv_mount.log" 2>&1 || true
	if cmp -s "$work/gguf/orig.gguf" "$work/gguf/mount.gguf"; then
		echo "ok   llama.cpp convert_hf_to_gguf: the mount's root and the original directory give the same GGUF ($(stat -c %s "$work/gguf/orig.gguf") bytes)"
	else
		echo "FAIL llama.cpp convert_hf_to_gguf: the GGUFs differ (logs: $work/conv_*.log)"
		fails=$((fails + 1))
	fi
	check mnt m_gguf "$work/gguf/orig.gguf"
	# llama-quantize on the mounted GGUF and on the original: the same Q8_0 file
	run llama-quantize "$in/gguf/orig.gguf" "$in/gguf/orig.q8.gguf" Q8_0 >"$work/quant_orig.log" 2>&1 || true
	run llama-quantize "$in/m_gguf/.files/orig.gguf" "$in/gguf/mount.q8.gguf" Q8_0 >"$work/quant_mount.log" 2>&1 || true
	if [ -s "$work/gguf/orig.q8.gguf" ] && cmp -s "$work/gguf/orig.q8.gguf" "$work/gguf/mount.q8.gguf"; then
		echo "ok   llama-quantize Q8_0 of MOUNT/.files/orig.gguf: the same file as of the original ($(stat -c %s "$work/gguf/orig.q8.gguf") bytes)"
	else
		echo "FAIL llama-quantize: the Q8_0 files differ or are missing (logs: $work/quant_*.log)"
		fails=$((fails + 1))
	fi
	go build -o "$work/hfserve" ./backing/hf/hftest/hfserve
	mkdir -p "$work/hubrepo"
	cp "$work/gguf/orig.gguf" "$work/hubrepo/model.gguf"
	"$work/hfserve" "$work/hubrepo" org/tiny >"$work/hub" 2>"$work/hfserve.log" &
	pids+=($!)
	for _ in $(seq 100); do [ -s "$work/hub" ] && break; sleep 0.1; done
	HF_ENDPOINT=$(cat "$work/hub") HF_HOME=$work/hfhome HF_TOKEN= HF_HUB_OFFLINE= check mnt m_hf hf://org/tiny
	simple() { run llama-simple -m "$1" -n 16 "the model weights" 2>/dev/null | tail -n 3 || true; }
	# llama-simple's whole run, cold (page cache dropped) and warm, 3 rounds
	for round in 1 2 3; do
		for g in gguf/orig.gguf m_gguf/.files/orig.gguf m_hf/.files/model.gguf; do
			sync
			echo 3 >/proc/sys/vm/drop_caches
			for t in cold warm; do
				s=$(date +%s.%N)
				simple "$in/$g" >/dev/null
				echo "time llama-simple $g $t round $round: $(echo "$(date +%s.%N) - $s" | bc) s"
			done
		done
	done
	want=$(simple "$in/gguf/orig.gguf")
	for m in "m_gguf/.files/orig.gguf" "m_hf/.files/model.gguf"; do
		got=$(simple "$in/$m")
		if [ -n "$want" ] && [ "$got" = "$want" ]; then
			echo "ok   llama-simple on MOUNT/$m: the same 16 tokens as on the original GGUF"
		else
			echo "FAIL llama-simple on MOUNT/$m: got [$got], want [$want]"
			fails=$((fails + 1))
		fi
	done
fi

# 4. onnxruntime and h5py on the committed ONNX and Keras fixtures,
# mounted (their files as they are, under .files/).
for f in onnx_ext_one; do
	if ! run python3 -c 'import onnxruntime' 2>/dev/null; then
		echo "not run: onnxruntime (not importable in the chroot: python3-onnxruntime is uninstallable in sid today)"
	elif [ -d "$data/formats2/$f" ]; then
		cp -r "$data/formats2/$f" "$work/$f"
		mnt "m_$f" "$work/$f"
		model=$(cd "$work/$f" && ls *.onnx | head -1)
		check run python3 "$in/real_clients.py" onnx "$model" "$in/$f" "$in/m_$f/.files"
	fi
done
h5=$(find "$data/formats2" -name '*.weights.h5' | head -1)
if [ -n "$h5" ]; then
	cp "$h5" "$work/k.weights.h5"
	mnt m_h5 "$work/k.weights.h5"
	check run python3 "$in/real_clients.py" h5 "$in/k.weights.h5" "$in/m_h5/.files/k.weights.h5"
fi
echo "real_clients: $fails failed"
[ "$fails" = 0 ]
