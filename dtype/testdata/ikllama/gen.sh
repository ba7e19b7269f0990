#!/bin/sh
# Makes seedN.gguf and seedN.gguf.f32ref here from ik_llama.cpp's own
# quantizers and dequantizers (see README.md). Needs g++ on x86-64 (AVX2
# and F16C, as ik_llama.cpp's CPU code does) and ik_llama.cpp's source:
#
#   sh gen.sh /path/to/ik_llama.cpp
#
# Only ggml/src/iqk/iqk_quantize.cpp is compiled, without fused
# multiply-adds (-ffp-contract=off: what C's own rounding gives, as
# Debian's baseline libggml0 gives for the mainline fixtures); the ggml
# functions it calls for other types are stubs that abort.
set -eu
src=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
s=$src/ggml/src
flags="-std=c++17 -O2 -mavx2 -mfma -mf16c -ffp-contract=off"
g++ $flags -c -I"$s" -I"$src/ggml/include" -I"$s/iqk" "$s/iqk/iqk_quantize.cpp" -o "$tmp/iqk_quantize.o"
g++ $flags -c "$here/ikgen.cpp" -o "$tmp/ikgen.o"
# Stubs for the rest of ggml, which the types here never reach.
g++ "$tmp/ikgen.o" "$tmp/iqk_quantize.o" -o "$tmp/ikgen" -lm -lpthread 2>&1 |
	sed -n "s/.*undefined reference to \`\([A-Za-z0-9_]*\)'.*/\1/p" | sort -u |
	sed 's/.*/extern "C" void &() { __builtin_trap(); }/' >"$tmp/stubs.cpp"
g++ $flags -c "$tmp/stubs.cpp" -o "$tmp/stubs.o"
g++ "$tmp/ikgen.o" "$tmp/iqk_quantize.o" "$tmp/stubs.o" -o "$tmp/ikgen" -lm -lpthread
for seed in 7 29; do
	"$tmp/ikgen" "$here/seed$seed.gguf" $seed
done
