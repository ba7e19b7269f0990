#!/bin/bash
# Issue 44's target, every scheme at once: dequantization in elements per
# CPU-second on one core, each benchmark case in a process of its own (a
# fresh heap: run in one process, a case pays for the garbage of the cases
# before it), REPS times, pinned to CPU 0. Prints one line per case:
# its figures, their median and whether the median is ≥ 1 G.
#
#   bash docs/scripts/dequant_schemes.sh [REPS]
set -euo pipefail
reps=${1:-3}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$repo" && go test -c -o "$work/quant.test" ./quant && go test -c -o "$work/dtype.test" ./dtype)
# case name, one per line: quant's (Gelem/cpu-s) then dtype's (best-Melem/s)
quant_cases() {
	for b in Dequantize Dequantize2 DequantizeTorchAO; do
		(cd "$repo/quant" && "$work/quant.test" -test.run XXX -test.bench "^Benchmark$b\$/" -test.benchtime 1x -test.cpu 1 2>/dev/null) |
			awk '/^Benchmark/ {sub(/-[0-9]+$/, "", $1); print $1}'
	done
	echo BenchmarkFPQuant
	echo BenchmarkGPTQMarlin
}
dtype_cases() {
	for b in DequantIKRepacked DequantIKRows DequantKT; do
		(cd "$repo/dtype" && "$work/dtype.test" -test.run XXX -test.bench "^Benchmark$b\$/" -test.benchtime 1x -test.cpu 1 2>/dev/null) |
			awk '/^Benchmark/ {sub(/-[0-9]+$/, "", $1); print $1}'
	done
	for t in IQ2_K IQ3_K IQ4_K IQ5_K IQ6_K Q6_0; do echo "BenchmarkDequant/$t"; done
}
run() { # pkg unit case
	local pkg=$1 unit=$2 c=$3 pat vals
	pat="^$(echo "$c" | sed 's|/|$/^|')\$"
	vals=$(for r in $(seq "$reps"); do
		(cd "$repo/$pkg" && taskset -c 0 "$work/$pkg.test" -test.run XXX -test.bench "$pat" -test.cpu 1 \
			$([ "$pkg" = dtype ] && echo -test.benchtime 100x)) |
			awk -v u="$unit" '/^Benchmark/ {for (i = 2; i < NF; i++) if ($(i+1) == u) print $i}'
	done | tr '\n' ' ')
	echo "$c $vals" | awk -v pkg="$pkg" '{
		n = NF - 1; for (i = 2; i <= NF; i++) v[i-1] = $i + 0
		for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] > v[j]; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
		m = v[int((n + 1) / 2)]; if (pkg == "dtype") m /= 1000
		printf "%-52s %s median %.2f G %s\n", $1, substr($0, length($1) + 2), m, (m >= 1 ? "ok" : "BELOW")
	}'
}
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg); reps $reps"
for c in $(quant_cases); do run quant Gelem/cpu-s "$c"; done
for c in $(dtype_cases); do run dtype best-Melem/s "$c"; done
