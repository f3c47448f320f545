#!/bin/bash
# mount-loop.sh: mounts and unmounts a tmpfs on a directory of its own, over
# and over, so that the host's mount table changes all the time, as it does
# on a machine where other programs mount file systems. The tests count
# only the mounts they made; run them under this to show it.
#
#   scripts/mount-loop.sh                 until killed (SIGTERM or SIGINT)
#   scripts/mount-loop.sh CMD [ARG...]    while CMD runs; exits with its status
#
# e.g. scripts/mount-loop.sh go test -race -count=3 -run 'Leak|Fault' .
#
# It touches no mount but its own: a tmpfs on a directory it makes with
# mktemp, unmounted and removed on exit. Needs root (the host's mount
# table is what must change). Environment: PAUSE, seconds to wait after
# each mount and each unmount (default 0.005, so that a snapshot finds the
# tmpfs mounted about half of the time without the loop taking a core).
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
	echo "mount-loop: needs root, to mount in the host's mount namespace" >&2
	exit 2
fi
PAUSE=${PAUSE:-0.005}
dir=$(mktemp -d "${TMPDIR:-/tmp}/mount-loop.XXXXXX")
mnt=$dir/tmpfs
mkdir "$mnt"
loop=

cleanup() {
	if [ -n "$loop" ]; then
		kill "$loop" 2>/dev/null || true
		wait "$loop" 2>/dev/null || true
	fi
	while mountpoint -q "$mnt"; do
		umount "$mnt" || break
	done
	rmdir "$mnt" "$dir" 2>/dev/null || true
}

spin() {
	trap 'exit 0' TERM INT
	n=0
	while :; do
		mount -t tmpfs -o size=64k,mode=0700 mount-loop "$mnt"
		sleep "$PAUSE"
		umount "$mnt"
		sleep "$PAUSE"
		n=$((n + 1))
		if [ $((n % 1000)) -eq 0 ]; then
			echo "mount-loop: $n mounts and unmounts on $mnt" >&2
		fi
	done
}

if [ $# -eq 0 ]; then
	trap cleanup EXIT
	trap 'exit 0' TERM INT
	echo "mount-loop: mounting and unmounting a tmpfs on $mnt until killed" >&2
	spin
fi

trap cleanup EXIT
trap 'exit 130' TERM INT
spin &
loop=$!
echo "mount-loop: mounting and unmounting a tmpfs on $mnt while $* runs" >&2
set +e
"$@"
status=$?
set -e
exit "$status"
