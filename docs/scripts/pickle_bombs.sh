#!/bin/bash
# Measures tensorfs on the pickle bombs (docs/RELIABILITY.md): wall time,
# peak RSS (/usr/bin/time -v), exit status and the error line of `ls`,
# `ls --json` and `mount`, each under a 2 GiB address-space limit.
#   docs/scripts/pickle_bombs.sh BINARY...   (e.g. go build -o /tmp/tfs ./cmd/tensorfs)
set -u
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
(cd "$dir" && python3 "$here/pickle_bombs.py")
mkdir "$dir/mnt"
for bin in "$@"; do
	for f in fanout_tensor.pt fanout_long_key.pt meta_string.pt shared_key.pt copy_list.pt; do
		for cmd in "ls" "ls --json" "mount"; do
			mp=""; [ "$cmd" = mount ] && mp="$dir/mnt"
			(ulimit -v 2097152; timeout 120 /usr/bin/time -v -o "$dir/time" "$bin" $cmd "$dir/$f" $mp >/dev/null 2>"$dir/err")
			rc=$?
			mountpoint -q "$dir/mnt" && fusermount3 -u "$dir/mnt"
			printf "%s %-20s %-9s exit %-3s %8s s %5s MB  %s\n" "$(basename "$bin")" "$f" "$cmd" "$rc" \
				"$(awk '/Elapsed \(wall/ {print $NF}' "$dir/time")" "$(( $(awk '/Maximum resident/ {print $NF}' "$dir/time" || echo 0) / 1024 ))" \
				"$(head -1 "$dir/err" | cut -c1-100)"
		done
	done
done
rm -rf "$dir"
