#!/usr/bin/env bash
# heap.sh: how much a large caller heap slows Run down. Runs the
# BenchmarkRunHeap sub-benchmarks of the root package (a caller holding
# 10 MiB and 1 GiB of heap) and prints the ratio of their ns/op.
#
#   bench/heap.sh                 # BENCHTIME=200x
#   BENCHTIME=50x bench/heap.sh
set -euo pipefail

BENCHTIME=${BENCHTIME:-200x}

cd "$(dirname "$0")/.."
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	PATH=$PATH:/usr/local/go/bin
fi

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
echo "+ go test -run '^\$' -bench '^BenchmarkRunHeap$' -benchtime $BENCHTIME ."
go test -run '^$' -bench '^BenchmarkRunHeap$' -benchtime "$BENCHTIME" . | tee "$OUT"

# A result line looks like "BenchmarkRunHeap/1GiB-8   200   4210000 ns/op ...";
# the -N GOMAXPROCS suffix is absent when it is 1. The size may be written
# in KiB, MiB or GiB (1GiB and 1024MiB are the same sub-benchmark), so it is
# compared in MiB.
nsop() {
	awk -v want_mib="$1" '
		$1 ~ /^BenchmarkRunHeap\/[0-9]+[KMG]iB(-[0-9]+)?$/ {
			size = $1; sub(/^BenchmarkRunHeap\//, "", size); sub(/-[0-9]+$/, "", size)
			unit = substr(size, length(size) - 2); n = substr(size, 1, length(size) - 3) + 0
			mib = unit == "KiB" ? n / 1024 : unit == "GiB" ? n * 1024 : n
			if (mib != want_mib) next
			for (i = 2; i < NF; i++) if ($(i+1) == "ns/op") { print $i; exit }
		}
	' "$OUT"
}
small=$(nsop 10)
large=$(nsop 1024)
if [ -z "$small" ] || [ -z "$large" ]; then
	echo "heap.sh: no ns/op for BenchmarkRunHeap/10MiB and BenchmarkRunHeap/1GiB (or /1024MiB) in the output above" >&2
	exit 1
fi
echo
awk -v s="$small" -v l="$large" 'BEGIN {
	printf "BenchmarkRunHeap: 10MiB %.3f ms/op, 1GiB %.3f ms/op, ratio 1GiB/10MiB %.2f\n", s/1e6, l/1e6, l/s
}'
