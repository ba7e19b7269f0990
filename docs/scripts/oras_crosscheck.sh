#!/usr/bin/env bash
# Cross-check of oci:// against oras (docs/BENCHMARKS.md, "oci://: oras
# cross-check"; issue 43).
#
#   docs/scripts/oras_crosscheck.sh [SID_CHROOT]     (default /srv/sid)
#
# Starts `docker-registry serve` on 127.0.0.1 (a temporary store), pushes
# two fixtures of ../shared/testdata with Debian sid's oras (run in the
# chroot that ../shared/tools/debian.sh builds; it shares this machine's
# network, so it reaches the registry on loopback): a ModelPack artifact
# (safetensors/swift/data.safetensors as model.safetensors and a
# config.json, raw weight and weight-config layers) and a Docker Model
# Runner GGUF (gguf/quantized/ollama-ggml-q4_k.gguf). Then, for each:
# `oras pull` into a directory; the pulled files' sha256 must be the
# fixtures'; `tensorfs load --sha256 oci://…` must print what it prints for
# the pulled directory (the same tensors, the same bytes); `tensorfs check
# --data oci://…` must verify every layer against its digest. Prints one
# line per check and exits 1 on the first difference. Needs root (the
# chroot), go, curl, docker-registry. Run from the repository root.
set -uo pipefail
sid=${1:-/srv/sid}
td=${TENSORFS_TESTDATA:-$(cd ../shared/testdata 2>/dev/null && pwd)}
[ -d "$td" ] || { echo "no testdata (set TENSORFS_TESTDATA)" >&2; exit 2; }
work=$(mktemp -d /var/tmp/tensorfs-oras.XXXXXX)
out=$(mktemp -d "$sid/out/tensorfs-oras.XXXXXX")
rel=/out/$(basename "$out")
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work" "$out"
}
trap cleanup EXIT
go build -o "$work/tensorfs" ./cmd/tensorfs || exit 1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' "$work/store" "$port" >"$work/config.yml"
docker-registry serve "$work/config.yml" >"$work/registry.log" 2>&1 &
pid=$!
until curl -s -o /dev/null "http://127.0.0.1:$port/v2/"; do sleep 0.1; done
sidrun() { bash ../shared/tools/debian.sh sid "$sid" run sh -c "$1"; }
echo "oras: $(sidrun 'oras version' | head -1); registry 127.0.0.1:$port"

mkdir -p "$out/st" "$out/gguf"
cp "$td/safetensors/swift/data.safetensors" "$out/st/model.safetensors"
printf '{"architectures":["Test"]}' >"$out/st/config.json"
cp "$td/gguf/quantized/ollama-ggml-q4_k.gguf" "$out/gguf/model.gguf"
reg=127.0.0.1:$port
sidrun "cd $rel/st && oras push --plain-http $reg/xcheck/swift:v1 --artifact-type application/vnd.cncf.model.manifest.v1+json model.safetensors:application/vnd.cncf.model.weight.v1.raw config.json:application/vnd.cncf.model.weight.config.v1.raw" >/dev/null || exit 1
sidrun "cd $rel/gguf && oras push --plain-http $reg/xcheck/gguf:v1 --artifact-type application/vnd.docker.ai.model.config.v0.1+json model.gguf:application/vnd.docker.ai.gguf.v3" >/dev/null || exit 1

bad=0
for a in st:swift gguf:gguf; do
	dir=${a%%:*} repo=${a#*:}
	sidrun "oras pull --plain-http $reg/xcheck/$repo:v1 -o $rel/pulled-$dir" >/dev/null || exit 1
	for f in "$out/$dir"/*; do
		n=$(basename "$f")
		want=$(sha256sum <"$f") got=$(sha256sum <"$out/pulled-$dir/$n")
		[ "$want" = "$got" ] || { echo "$repo: oras pulled $n with another sha256"; bad=1; }
	done
	src=oci://$reg/xcheck/$repo:v1
	local_src=$out/pulled-$dir
	[ "$dir" = gguf ] && local_src=$out/pulled-$dir/model.gguf
	want=$("$work/tensorfs" load --quiet --sha256 "$local_src") got=$("$work/tensorfs" load --quiet --sha256 "$src")
	if [ -n "$want" ] && [ "$want" = "$got" ]; then
		echo "$repo: tensorfs load --sha256 $src = the oras-pulled files ($(echo "$got" | wc -l) tensors)"
	else
		echo "$repo: tensorfs load --sha256 $src differs from the oras-pulled files"; bad=1
	fi
	if c=$("$work/tensorfs" check --data "$src" 2>&1); then
		echo "$repo: check --data: $(echo "$c" | grep -o '[0-9]* files\? verified by sha256' | head -1)"
	else
		echo "$repo: check --data failed: $c"; bad=1
	fi
done
exit $bad
