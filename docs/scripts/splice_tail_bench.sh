#!/usr/bin/env bash
# What serving every byte costs: a Llama-shaped BF16 checkpoint (8 layers,
# hidden 1024, vocab 32000, ~190 MB, tensors at whatever offsets the
# writer gave them) read whole through a mount with `cat`, splicing on
# (the default) and off (--no-splice), on fresh mounts; stats.json's
# counters say how many reads were spliced and how many a pipe could not
# have taken whole and were copied (docs/BENCHMARKS.md).
#   docs/scripts/splice_tail_bench.sh [TENSORFS] [ROUNDS]
set -euo pipefail
bin=${1:-tensorfs}
rounds=${2:-5}
dir=$(mktemp -d)
trap 'fusermount3 -uz "$dir/m" 2>/dev/null || true; rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir/model.safetensors" <<'PY'
import json, struct, sys
import numpy as np
h, v, f, layers = 1024, 32000, 2816, 8
shapes = {"model.embed_tokens.weight": [v, h], "lm_head.weight": [v, h], "model.norm.weight": [h]}
for i in range(layers):
    p = f"model.layers.{i}."
    for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
        shapes[p + "self_attn." + n + ".weight"] = [h, h]
    shapes[p + "mlp.gate_proj.weight"] = [f, h]
    shapes[p + "mlp.up_proj.weight"] = [f, h]
    shapes[p + "mlp.down_proj.weight"] = [h, f]
    shapes[p + "input_layernorm.weight"] = [h]
    shapes[p + "post_attention_layernorm.weight"] = [h]
hdr, off = {}, 0
for k in sorted(shapes):
    size = 2 * int(np.prod(shapes[k]))
    hdr[k] = {"dtype": "BF16", "shape": shapes[k], "data_offsets": [off, off + size]}
    off += size
b = json.dumps(hdr).encode()
rng = np.random.default_rng(0)
with open(sys.argv[1], "wb") as fh:
    fh.write(struct.pack("<Q", len(b)) + b)
    fh.write(rng.integers(0, 256, off, dtype=np.uint8).tobytes())
PY
mkdir "$dir/m"
for round in $(seq "$rounds"); do
	for mode in splice copy; do
		flags=()
		[ "$mode" = copy ] && flags=(--no-splice)
		"$bin" mount "${flags[@]}" "$dir/model.safetensors" "$dir/m" 2>"$dir/log" &
		pid=$!
		for _ in $(seq 300); do [ -e "$dir/m/.tensorfs/index.json" ] && break; sleep 0.1; done
		start=$(date +%s.%N)
		find "$dir/m" -maxdepth 1 -type f -name 'model.*' -o -maxdepth 1 -type f -name 'lm_head.*' | xargs cat | wc -c >"$dir/bytes"
		end=$(date +%s.%N)
		sizes=$(find "$dir/m" -maxdepth 1 -type f \( -name 'model.*' -o -name 'lm_head.*' \) -printf '%s\n' | awk '{s+=$1} END {print s}')
		st=$(tr -d ' \n' <"$dir/m/.tensorfs/stats.json")
		spliced=$(sed 's/.*"spliced_reads":\([0-9]*\).*/\1/' <<<"$st")
		copied=$(sed 's/.*"splice_copied_reads":\([0-9]*\).*/\1/' <<<"$st")
		reads=$(sed 's/.*"reads":\([0-9]*\).*/\1/' <<<"$st")
		printf '%s round %d: %s bytes read (stat: %s), %.3f s, reads %s, spliced %s, copied instead %s\n' \
			"$mode" "$round" "$(cat "$dir/bytes")" "$sizes" "$(echo "$end - $start" | bc)" "$reads" "$spliced" "$copied"
		fusermount3 -u "$dir/m"
		wait "$pid" || true
	done
done
