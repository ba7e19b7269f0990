#!/usr/bin/env bash
# GPU smoke check, a few minutes of device time: the one upload API
# (cudacheck: every tensor copied back and compared, beside a pinned
# cudaMemcpy of the same bytes) and load --gpu --verify on the shared
# fixtures of the newer formats (every ggml type, torch 2.x dtypes,
# distributed checkpoints), then mount --gpu of a DCP.
#
#   docs/scripts/gpu_smoke.sh BIN DATA
#
# BIN holds tensorfs and cudacheck built with cgo (CGO_ENABLED=1 go build
# -o BIN/ ./cmd/tensorfs ./client/cuda/cudacheck); DATA is a folder laid
# out as ../shared/testdata (only the files named below are needed).
set -uo pipefail
BIN=$(cd "${1:?usage: gpu_smoke.sh BIN DATA}" && pwd)
DATA=$(cd "${2:?usage: gpu_smoke.sh BIN DATA}" && pwd)
tfs=$BIN/tensorfs
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader 2>&1 | sed 's/^/device: /'
if [ -z "${TENSORFS_CUDART:-}" ] && "$tfs" load --gpu 999 --quiet "$DATA/modern/st_modern.safetensors" 2>&1 | grep -q 'runtime not found'; then
	TENSORFS_CUDART=$(find / -xdev -name 'libcudart.so*' -type f 2>/dev/null | head -1)
	export TENSORFS_CUDART
	echo "libcudart: $TENSORFS_CUDART"
fi
fail=0
step() {
	echo "== $*"
	"$@" >/tmp/gpu_smoke_step.log 2>&1
	local rc=$?
	grep -E 'uploaded|verified|GB/s|tensorfs:|mismatch|ceiling|memcpy' /tmp/gpu_smoke_step.log | cut -c1-400 || tail -3 /tmp/gpu_smoke_step.log
	echo "rc=$rc"
	[ "$rc" = 0 ] || fail=1
}
step "$BIN/cudacheck" -size "${SIZE:-4GiB}" -repeat 3 -dir /var/tmp
step "$BIN/cudacheck" -size "${SIZE16:-2GiB}" -repeat 2 -dtype f16 -dir /var/tmp
for src in gguf/types/types.gguf modern/torch26_dtypes.pt modern/dcp_single modern/dcp_threads modern/dcp_ws2 modern/dcp_ws4; do
	step "$tfs" load --gpu 0 --verify "$DATA/$src"
done
step "$tfs" load --gpu 0 --dtype f16 --verify "$DATA/gguf/types/types.gguf"
step "$tfs" load --gpu 0 --dtype bf16 --verify "$DATA/modern/dcp_ws4"
# A large DCP (4 ranks, sharded along dim 0; gendcp, torch 2.6's layout)
# and the same tensors as one safetensors file: load --gpu side by side.
if [ -x "$BIN/gendcp" ]; then
	big=/var/tmp/tensorfs-smoke-dcp
	[ -e "$big/.metadata" ] || "$BIN/gendcp" -mib "${DCP_MIB:-2048}" -ranks 4 "$big" >/dev/null
	"$tfs" convert --quiet --force "$big" /var/tmp/tensorfs-smoke-dcp.safetensors
	for i in 1 2; do
		step "$tfs" load --gpu 0 "$big"
		step "$tfs" load --gpu 0 /var/tmp/tensorfs-smoke-dcp.safetensors
	done
	step "$tfs" load --gpu 0 --verify "$big"
fi
mnt=$(mktemp -d)
"$tfs" mount --gpu 0 "$DATA/modern/dcp_ws4" "$mnt" >/tmp/gpu_smoke_mount.log 2>&1 &
for _ in $(seq 100); do [ -e "$mnt/.cuda/index.json" ] && break; sleep 0.1; done
if [ -e "$mnt/.cuda/index.json" ]; then
	echo "== mount --gpu dcp_ws4: $(head -c 240 "$mnt/.cuda/index.json")"
else
	echo "== mount --gpu dcp_ws4: not ready"; cat /tmp/gpu_smoke_mount.log; fail=1
fi
"$tfs" umount "$mnt" >/dev/null 2>&1
wait
echo "gpu_smoke: $([ $fail = 0 ] && echo all passed || echo FAILED)"
exit $fail
