#!/usr/bin/env bash
# Shows that the escape suite's tests can fail: each *.patch here removes
# one protection of the sandbox; the script applies it to a copy of the
# tree, runs the test named on the patch's "Test:" line, and expects that
# test to FAIL. A mutant whose test still passes means the test no longer
# checks its protection, and the script exits 1. The tree itself is never
# changed. A patch's "Dir:" line names the package directory its test is
# in (the root package if none); its "Want:" line, if any, a text the
# failing test's output must hold: the failure the protection prevents; a patch given by a path that exists is
# taken from there, any other name from mutants/. Usage:
# mutants/run.sh [name.patch ...]
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
	if [ -f "$p" ]; then
		p=$(realpath --relative-to=. "$p")
	else
		p=mutants/$(basename "$p")
	fi
	test=$(sed -n 's/^Test: *//p' "$p" | head -1)
	dir=$(sed -n 's/^Dir: *//p' "$p" | head -1)
	dir=${dir:-.}
	want=$(sed -n 's/^Want: *//p' "$p" | head -1)
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
	echo "+ (cd $dir && $GO test -count=1 -run '^$test\$' .)"
	if out=$(cd "$tree/$dir" && "$GO" test -count=1 -run "^$test\$" . 2>&1); then
		# A test that skipped (what it needs is missing) passed nothing.
		if skipped=$(cd "$tree/$dir" && "$GO" test -count=1 -v -run "^$test\$" . 2>&1) && grep -q -- "--- SKIP: $test" <<<"$skipped"; then
			echo "$skipped" | tail -5
			echo "$p: $test skipped, so the mutant was not tried: give it what it needs" >&2
			exit 2
		fi
		echo "$out" | tail -5
		echo "SURVIVED: with the protection removed, $test still passes" >&2
		survived=1
	# Here-strings and awk, not pipes into grep -q or head: with pipefail,
	# a reader that stops early makes the writer's SIGPIPE the status.
	elif grep -q -- "--- FAIL: $test" <<<"$out"; then
		if [ -n "$want" ]; then
			if ! grep -F -m1 -- "$want" <<<"$out" | cut -c1-400; then
				echo "$out" | tail -20
				echo "$p: $test failed, but its output does not say $want (the patch's \"Want:\" line)" >&2
				exit 2
			fi
		else
			awk '/^[[:space:]]+[a-z0-9_]+_test\.go:[0-9]+:/ && n++ < 4' <<<"$out"
		fi
		echo "killed: $test fails without the protection, as it should"
	else
		echo "$out" | tail -20
		echo "$p: the mutant did not build or $test did not run" >&2
		exit 2
	fi
done
exit $survived
