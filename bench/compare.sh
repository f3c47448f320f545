#!/usr/bin/env bash
# compare.sh: start-to-exit latency of "sandbox run" against bubblewrap with
# the same isolation (every namespace, read-only /usr, /proc, /dev, tmpfs
# /tmp), measured interleaved in one run by bench/latency. Also the library
# called from a long-lived process (as a service calls it), in-process and
# through its spawner, in the same run.
#
#   bench/compare.sh            # N=200 measured runs, WARMUP=20, of each command
#   N=50 WARMUP=5 bench/compare.sh
#
# Installs bubblewrap with apt-get when it is missing and we are root.
# Exits non-zero only when a command fails, never because of a figure.
set -euo pipefail

N=${N:-200}
WARMUP=${WARMUP:-20}

cd "$(dirname "$0")/.."
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	PATH=$PATH:/usr/local/go/bin
fi

if ! command -v bwrap >/dev/null; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "compare.sh: bwrap is not installed; run as root or: apt-get install -y bubblewrap" >&2
		exit 1
	fi
	echo "+ apt-get install -y bubblewrap"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap </dev/null ||
		{ apt-get update -q </dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap </dev/null; }
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "+ go build -o $TMP/sandbox ./cmd/sandbox"
go build -o "$TMP/sandbox" ./cmd/sandbox
go build -o "$TMP/latency" ./bench/latency

# The same layout the sandbox gives: /usr read-only, and each of /bin,
# /sbin, /lib* as the symlink (merged /usr) or the read-only bind it is on
# this host.
BWRAP=(bwrap --unshare-all --die-with-parent --new-session --ro-bind /usr /usr)
for d in bin sbin lib lib32 lib64 libx32; do
	if [ -L "/$d" ]; then
		BWRAP+=(--symlink "$(readlink "/$d")" "/$d")
	elif [ -d "/$d" ]; then
		BWRAP+=(--ro-bind "/$d" "/$d")
	fi
done
BWRAP+=(--proc /proc --dev /dev --tmpfs /tmp)
SBX=("$TMP/sandbox" run --)

echo "kernel $(uname -r), $(nproc) CPUs, $(bwrap --version), uid $(id -u)"
echo "sandbox: ${SBX[*]} CMD"
echo "bwrap:   ${BWRAP[*]} CMD"
echo "N=$N measured runs of each command after WARMUP=$WARMUP, interleaved"
echo

"$TMP/latency" -n "$N" -warmup "$WARMUP" -baseline bwrap \
	true/sandbox "${SBX[@]}" /bin/true ::: \
	true/bwrap "${BWRAP[@]}" /bin/true ::: \
	true/lib-inprocess @inprocess /bin/true ::: \
	true/lib-spawner @spawner /bin/true ::: \
	echo/sandbox "${SBX[@]}" /bin/sh -c 'echo hi' ::: \
	echo/bwrap "${BWRAP[@]}" /bin/sh -c 'echo hi'
