#!/bin/bash
# busy-host.sh: make test twice at once, in two fresh clones of this
# repository's HEAD, while a "sandbox serve" built from it serves a stream of
# runs and, as root, scripts/mount-loop.sh mounts and unmounts a tmpfs over
# and over, to show that the tests count only what they made (their own
# spawner, keepers, cgroups, mounts, files), not the other sandboxes and
# mounts on the host. Prints each clone's exit status and sandbox serve's run count, and
# exits 0 only if both passed. Takes most of an hour on a 2-core machine.
#
# Only committed work is tested: the clones are of HEAD.
#
# Environment: GO (the go command), TOOLSERVER_FLAGS (e.g. -best-effort
# where no writable cgroup exists), MOUNT_LOOP=0 (no mount loop), KEEP=1 keeps the temporary directory
# (it is kept anyway when a clone fails, for its log), SUITE (what runs in
# each clone, default "make test"; e.g. SUITE='go test -count=1 -run
# TestSession .' tries the script in minutes).
set -euo pipefail

GO=${GO:-go}
SUITE=${SUITE:-make test GO=$GO}
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/busy-host.XXXXXX")
pids=()

cleanup() {
	# The client loop first, then sandbox serve (SIGTERM: it ends its
	# runs and closes its sandboxes).
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill "${pids[i]}" 2>/dev/null || true
	done
	wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

command -v curl >/dev/null || { echo "busy-host: needs curl (apt-get install curl)" >&2; exit 2; }

echo "+ git clone $repo (HEAD $(git -C "$repo" rev-parse --short HEAD)) into $tmp/a and $tmp/b"
git clone --quiet "$repo" "$tmp/a"
git clone --quiet "$repo" "$tmp/b"

echo "+ $GO build -o $tmp/sandbox ./cmd/sandbox"
(cd "$tmp/a" && "$GO" build -o "$tmp/sandbox" ./cmd/sandbox)
# shellcheck disable=SC2086 # TOOLSERVER_FLAGS is a list of flags
"$tmp/sandbox" serve -addr 127.0.0.1:0 -log-format json -pool 2 ${TOOLSERVER_FLAGS:-} 2>"$tmp/toolserver.log" &
pids+=($!)
addr=
for _ in $(seq 600); do
	addr=$(sed -n 's/.*"msg":"listening","addr":"\([^"]*\)".*/\1/p' "$tmp/toolserver.log" | head -1)
	[ -n "$addr" ] && break
	kill -0 "${pids[0]}" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$addr" ]; then
	echo "busy-host: sandbox serve did not start; its log:" >&2
	cat "$tmp/toolserver.log" >&2
	exit 2
fi
echo "+ sandbox serve listens on $addr; a client posts runs to it in a loop"

# The stream of runs: a command, a daemon its run must kill, a streamed
# answer and a run with its own limits (a Sandbox of its own each), one
# after another, for as long as the tests last.
(
	bodies=(
		'{"command":["sh","-c","echo hello; sleep 0.2"]}'
		'{"command":["sh","-c","sleep 30 & echo started"],"limits":{"timeout":"2s"}}'
		'{"language":"sh","code":"seq 1000","stream":true}'
		'{"command":["sh","-c","head -c 100000 /dev/zero | wc -c"],"limits":{"memory":"64M","pids":32}}'
	)
	while :; do
		for body in "${bodies[@]}"; do
			curl -s -o /dev/null -m 60 "http://$addr/v1/runs" -H 'Content-Type: application/json' -d "$body" || sleep 1
		done
	done
) &
pids+=($!)

# Another program's mounts coming and going in the host's mount table.
if [ "${MOUNT_LOOP:-1}" != 0 ] && [ "$(id -u)" -eq 0 ]; then
	echo "+ scripts/mount-loop.sh (a tmpfs mounted and unmounted in a loop)"
	"$repo/scripts/mount-loop.sh" 2>"$tmp/mount-loop.log" &
	pids+=($!)
fi

echo "+ $SUITE in $tmp/a and in $tmp/b at once (logs: $tmp/a.log, $tmp/b.log)"
start=$(date +%s)
suites=()
for c in a b; do
	(
		set +e
		cd "$tmp/$c" || exit
		# shellcheck disable=SC2086 # SUITE is a command line
		$SUITE >"$tmp/$c.log" 2>&1
		echo $? >"$tmp/$c.rc"
	) &
	suites+=($!)
done
wait "${suites[@]}" || true
elapsed=$(( $(date +%s) - start ))

runs=$(grep -c '"msg":"run"' "$tmp/toolserver.log" || true)
rc_a=$(cat "$tmp/a.rc" 2>/dev/null || echo "?")
rc_b=$(cat "$tmp/b.rc" 2>/dev/null || echo "?")
echo "busy-host: after ${elapsed}s, $SUITE in clone a exited $rc_a, in clone b $rc_b; sandbox serve served $runs runs meanwhile"
status=0
for c in a b; do
	rc=$(cat "$tmp/$c.rc" 2>/dev/null || echo "?")
	if [ "$rc" != 0 ]; then
		status=1
		echo "--- clone $c: the failures in $tmp/$c.log:"
		grep -E -- '^(--- FAIL|FAIL|panic:)|_test\.go:[0-9]+:' "$tmp/$c.log" | head -40 || tail -40 "$tmp/$c.log"
	fi
done
if [ "$status" = 0 ] && [ "${KEEP:-}" != 1 ]; then
	rm -rf "$tmp"
else
	echo "busy-host: logs kept in $tmp"
fi
exit "$status"
