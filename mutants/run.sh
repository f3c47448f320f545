#!/usr/bin/env bash
# Shows that the escape suite's tests can fail: each *.patch here removes
# one protection of the sandbox; the script applies it to a copy of the
# tree, runs the test named on the patch's "Test:" line, and expects that
# test to FAIL. A mutant whose test still passes means the test no longer
# checks its protection, and the script exits 1. The tree itself is never
# changed. Usage: mutants/run.sh [name.patch ...]
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
patches=("$@")
if [ ${#patches[@]} -eq 0 ]; then
	patches=(mutants/*.patch)
fi
work=$(mktemp -d /tmp/sandbox-mutants.XXXXXX)
trap 'rm -rf "$work"' EXIT
survived=0
for p in "${patches[@]}"; do
	p=mutants/$(basename "$p")
	test=$(sed -n 's/^Test: *//p' "$p" | head -1)
	what=$(sed -n '1p' "$p")
	if [ -z "$test" ]; then
		echo "$p: no \"Test:\" line" >&2
		exit 2
	fi
	tree="$work/$(basename "$p" .patch)"
	mkdir -p "$tree"
	tar --exclude=./.git -cf - . | tar -C "$tree" -xf -
	if ! (cd "$tree" && git apply "$OLDPWD/$p"); then
		echo "$p: does not apply to this tree any more; update it" >&2
		exit 2
	fi
	echo "+ mutant $(basename "$p"): $what"
	# The default policy's program is generated ahead (go generate); a
	# mutant of the policy is run as a change to it would be, regenerated.
	if ! (cd "$tree" && "$GO" generate . >/dev/null); then
		echo "$p: go generate failed in the mutant's tree" >&2
		exit 2
	fi
	echo "+ $GO test -count=1 -run '^$test\$' ."
	if out=$(cd "$tree" && "$GO" test -count=1 -run "^$test\$" . 2>&1); then
		echo "$out" | tail -5
		echo "SURVIVED: with the protection removed, $test still passes" >&2
		survived=1
	# Here-strings and awk, not pipes into grep -q or head: with pipefail,
	# a reader that stops early makes the writer's SIGPIPE the status.
	elif grep -q -- "--- FAIL: $test" <<<"$out"; then
		awk '/^[[:space:]]+[a-z_]+_test\.go:[0-9]+:/ && n++ < 4' <<<"$out"
		echo "killed: $test fails without the protection, as it should"
	else
		echo "$out" | tail -20
		echo "$p: the mutant did not build or $test did not run" >&2
		exit 2
	fi
done
exit $survived
