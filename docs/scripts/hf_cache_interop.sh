#!/usr/bin/env bash
# The HF cache as tensorfs writes it and as huggingface_hub writes it,
# each read by the other (docs/REMOTE.md, --hf-cache-write):
#
#   bash docs/scripts/hf_cache_interop.sh SID_CHROOT [CHECKPOINT_DIR]
#
# SID_CHROOT is a Debian sid chroot (../shared/tools/debian.sh sid DIR)
# with python3-huggingface-hub installed in it. The checkpoint directory
# (default ../shared/testdata/quant/fp8_block: sharded safetensors, a
# weight map and config.json) is served by the loopback Hub
# (backing/hf/hftest/hfserve). Then:
#  A. tensorfs load --hf-cache-write fills an empty HF home; huggingface_hub's
#     snapshot_download(local_files_only=True) finds every file there
#     and its bytes are the checkpoint's;
#  B. huggingface_hub's snapshot_download fills another HF home from the
#     loopback Hub; tensorfs load with HF_HUB_OFFLINE=1 reads it, and its
#     --sha256 lines are those of the local checkpoint.
set -euo pipefail
sid=${1:?usage: hf_cache_interop.sh SID_CHROOT [CHECKPOINT_DIR]}
ckpt=${2:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/testdata/quant/fp8_block}
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$sid/out/hfinterop
rm -rf "$work" && mkdir -p "$work/A" "$work/B"
cd "$here"
go build -o "$work/tensorfs" ./cmd/tensorfs
go build -o "$work/hfserve" ./backing/hf/hftest/hfserve
"$work/hfserve" "$ckpt" org/model >"$work/url" &
srv=$!
trap 'kill $srv 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$work/url" ] && break; sleep 0.1; done
url=$(head -1 "$work/url")
sums() { (cd "$1" && find -L . -type f ! -name '.*' -printf '%P\n' | LC_ALL=C sort | xargs sha256sum); }
sums "$ckpt" >"$work/want"
run() { bash "$here/../shared/tools/debian.sh" sid "$sid" run "$@"; }

# A: tensorfs writes, huggingface_hub reads.
HF_ENDPOINT=$url HF_HOME=$work/A HF_TOKEN= "$work/tensorfs" load --quiet --hf-cache-write hf://org/model
run env HF_HOME=/out/hfinterop/A HF_HUB_OFFLINE=1 python3 -c '
import huggingface_hub, sys
p = huggingface_hub.snapshot_download("org/model", local_files_only=True)
print(p)' >"$work/A.path"
a=$sid$(tail -1 "$work/A.path")
sums "$a" | grep -F -f <(cut -d" " -f3 "$work/want" | sed 's/^/  /') >"$work/A.got" || true
echo "A: huggingface_hub found $(wc -l <"$work/A.got") files tensorfs wrote (the checkpoint has $(wc -l <"$work/want"); a load reads the shards, the weight map and config.json)"
join -j 2 <(sort -k2 "$work/want") <(sort -k2 "$work/A.got") | awk '$2 != $3 { bad++; print "A: differs:", $1 } END { exit bad > 0 }'
echo "A: every file huggingface_hub found has the checkpoint's bytes"

# B: huggingface_hub writes (downloading from the loopback Hub), tensorfs reads offline.
run env HF_ENDPOINT="$url" HF_HOME=/out/hfinterop/B HF_HUB_DISABLE_XET=1 python3 -c '
import huggingface_hub
print(huggingface_hub.snapshot_download("org/model"))' >/dev/null
HF_HOME=$work/B HF_HUB_OFFLINE=1 HF_TOKEN= "$work/tensorfs" load --quiet --sha256 hf://org/model >"$work/B.sums"
"$work/tensorfs" load --quiet --sha256 "$ckpt" >"$work/B.want"
cmp "$work/B.sums" "$work/B.want"
echo "B: tensorfs read huggingface_hub's cache offline: $(wc -l <"$work/B.sums") tensors, --sha256 identical to the local checkpoint's"
