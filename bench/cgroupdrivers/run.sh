#!/usr/bin/env bash
# bench/cgroupdrivers/run.sh [--vm]: compares the library's cgroup driver
# (internal/cgroup) with opencontainers/cgroups and containerd/cgroups/v3
# and prints three tables: binary size and package inits of a tiny program
# per driver, and the per-run cost of one run's cgroup (create with limits,
# place a process, read usage, remove) per driver, as medians of COUNT
# benchmark runs. Before the benchmarks, TestUsage checks that every driver
# limits and counts the same things.
#
# Without --vm the benchmarks run on this host (v1 or hybrid here; as root:
# v1 has no safe delegation). With --vm they run in the qemu VM of
# vm/run.sh on a pure cgroup v2 hierarchy, as root and as a user with a
# delegated cgroup; TCG inflates every figure there, so read the ratios.
#
# Environment: BENCHTIME (default 200x, 50x with --vm), COUNT (default 3),
# GO (default go), and vm/run.sh's VM_* settings.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
GO=${GO:-go}
vm=''
case ${1:-} in
--vm) vm=1 ;;
'') ;;
*)
	echo "usage: $0 [--vm]" >&2
	exit 2
	;;
esac
benchtime=${BENCHTIME:-$([ -n "$vm" ] && echo 50x || echo 200x)}
count=${COUNT:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cgroupdrivers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$here"

# ---- size and package inits --------------------------------------------------

programs=(empty ours opencontainers containerd)
for p in "${programs[@]}"; do
	"$GO" build -o "$tmp/$p" "./size/$p"
	"$GO" build -ldflags='-s -w' -o "$tmp/$p-sw" "./size/$p"
done
size() { stat -c %s "$1"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }
kib() { awk -v b="$1" 'BEGIN { printf "%+.0f KiB", b / 1024 }'; }
echo "## Binary size (go build; a tiny program per driver, size/*; the baseline imports only x/sys/unix and fmt)"
echo
echo "| program | default | over baseline | -ldflags='-s -w' | over baseline | modules linked |"
echo "|---|---|---|---|---|---|"
base=$(size "$tmp/empty") base_sw=$(size "$tmp/empty-sw")
for p in "${programs[@]}"; do
	s=$(size "$tmp/$p") sw=$(size "$tmp/$p-sw")
	mods=$("$GO" version -m "$tmp/$p" | awk '$1 == "dep" { n++ } END { print n + 0 }')
	echo "| $p | $(mib "$s") | $(kib $((s - base))) | $(mib "$sw") | $(kib $((sw - base_sw))) | $mods |"
done
echo

# GODEBUG=inittrace=1 prints a line per package init: "init PKG @T ms, C ms
# clock, B bytes, A allocs". Each program runs 5 times; the clock is the
# median of the sums, the bytes and allocations do not vary. The programs
# make and remove one cgroup, which needs no privilege to fail harmlessly:
# only their inits are read.
echo "## Package inits (GODEBUG=inittrace=1, median of 5 runs)"
echo
echo "| program | package inits | init clock | init bytes | init allocs |"
echo "|---|---|---|---|---|"
for p in "${programs[@]}"; do
	for _ in 1 2 3 4 5; do
		GODEBUG=inittrace=1 "$tmp/$p" 2>&1 >/dev/null | awk '/^init / { n++; ms += $5; b += $8; a += $10 } END { printf "%d %.3f %d %d\n", n, ms, b, a }'
	done | sort -k2 -n | sed -n 3p | awk -v p="$p" '{ printf "| %s | %d | %.3f ms | %d | %d |\n", p, $1, $2, $3, $4 }'
done
echo

# ---- per-run cost ------------------------------------------------------------

if [ -n "$vm" ]; then
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$GO" test -c -o "$tmp/cgroupdrivers.test" .
	VM_BINARY="$tmp/cgroupdrivers.test" VM_TESTS='^TestUsage$' VM_ARGS="-test.bench . -test.benchtime $benchtime -test.count $count" \
		VM_LOG="$tmp/console.log" GO="$GO" "$repo/vm/run.sh" >"$tmp/vm.out" 2>&1 || {
		tail -n 40 "$tmp/vm.out" >&2
		echo "run.sh: vm/run.sh failed" >&2
		exit 1
	}
	tr -d '\r' <"$tmp/console.log" >"$tmp/bench.txt"
	where="cgroup v2 in the qemu VM"
	note="TCG inflates every figure in the VM: compare the ratios."
else
	"$GO" test -c -o "$tmp/cgroupdrivers.test" .
	# COUNT rounds of every driver in turn, so that a change of load on
	# the host falls on all of them alike (-test.count repeats each driver
	# before the next; the VM has no such loop and uses it).
	{
		(cd "$tmp" && ./cgroupdrivers.test -test.run '^TestUsage$' -test.v)
		for _ in $(seq "$count"); do
			(cd "$tmp" && ./cgroupdrivers.test -test.run '^$' -test.bench . -test.benchtime "$benchtime")
		done
	} >"$tmp/bench.txt" 2>&1 || {
		cat "$tmp/bench.txt" >&2
		echo "run.sh: the benchmarks failed" >&2
		exit 1
	}
	note=''
	where="this host ($(stat -f -c %T /sys/fs/cgroup | sed 's/cgroup2fs/cgroup v2/; s/tmpfs/cgroup v1 or hybrid/'))"
fi
grep -E '^ *--- |^FAIL|^vm: === run |usage_test' "$tmp/bench.txt" || true
if grep -q -- '--- SKIP: TestUsage' "$tmp/bench.txt"; then
	echo "run.sh: TestUsage skipped (see above): no figures" >&2
	exit 1
fi
echo

# The medians of each benchmark's figures over COUNT runs, a table per run
# (the VM runs twice: as root and as a user with a delegated cgroup).
awk -v where="$where" -v note="$note" -v count="$count" -v benchtime="$benchtime" '
function median(k,    n, i, j, v, t) {
	n = split(vals[k], v, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && v[j-1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
	return n ? v[int((n + 1) / 2)] : ""
}
function fmt(x) { return x == "" ? "-" : (x + 0 >= 100 ? sprintf("%.0f", x) : sprintf("%.1f", x)) }
/^vm: === run / { run = $4; next }
/^Benchmark[^ \t]+-[0-9]+[ \t]/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	split(name, parts, "/"); bench = parts[1]; drv = substr(name, length(bench) + 2)
	if (!((run, drv) in seen)) { seen[run, drv] = 1; drivers[run] = drivers[run] " " drv }
	if (!(run in seenrun)) { seenrun[run] = 1; runs[++nruns] = run }
	for (i = 3; i < NF; i += 2) vals[run, bench, drv, $(i+1)] = vals[run, bench, drv, $(i+1)] " " $i
}
END {
	for (r = 1; r <= nruns; r++) {
		run = runs[r]
		n = split(drivers[run], ds, " ")
		title = run == "" ? "" : " (run as " run ")"
		printf "## Per-run cost on %s%s: medians of %d runs of %s\n\n", where, title, count, benchtime
		if (note != "") print note "\n"
		print "BenchmarkLifecycle: create with limits, place cat (CLONE_INTO_CGROUP on v2, cgroup.procs on v1), it exits, read usage, remove; driver-µs is create + place + usage + remove, ns/op adds the process."
		print ""
		print "| driver | driver-µs | × ours | create-µs | place-µs | usage-µs | remove-µs | ns/op | allocs/op | B/op |"
		print "|---|---|---|---|---|---|---|---|---|---|"
		ref = median(run SUBSEP "BenchmarkLifecycle" SUBSEP ds[1] SUBSEP "driver-µs")
		for (i = 1; i <= n; i++) {
			k = run SUBSEP "BenchmarkLifecycle" SUBSEP ds[i] SUBSEP
			d = median(k "driver-µs")
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", ds[i], fmt(d), (ref + 0 > 0 ? sprintf("%.1f", d / ref) : "-"),
				fmt(median(k "create-µs")), fmt(median(k "place-µs")), fmt(median(k "usage-µs")), fmt(median(k "remove-µs")),
				fmt(median(k "ns/op")), fmt(median(k "allocs/op")), fmt(median(k "B/op"))
		}
		print ""
		print "BenchmarkDriver: the driver alone, no process (create, clone fd, usage, remove)."
		print ""
		print "| driver | ns/op | × ours | allocs/op | B/op |"
		print "|---|---|---|---|---|"
		ref = median(run SUBSEP "BenchmarkDriver" SUBSEP ds[1] SUBSEP "ns/op")
		for (i = 1; i <= n; i++) {
			k = run SUBSEP "BenchmarkDriver" SUBSEP ds[i] SUBSEP
			d = median(k "ns/op")
			printf "| %s | %s | %s | %s | %s |\n", ds[i], fmt(d), (ref + 0 > 0 ? sprintf("%.1f", d / ref) : "-"), fmt(median(k "allocs/op")), fmt(median(k "B/op"))
		}
		print ""
	}
}' "$tmp/bench.txt"
