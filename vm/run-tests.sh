#!/bin/sh
# vm/run-tests.sh, installed as /vmtest/run-tests: runs the test binary for
# one run (argument: root or rootless) as whoever calls it, in whatever
# cgroup it was started in, with a clean environment and a TMPDIR that
# the caller owns. The selection and timeout come from files vm/run.sh
# wrote into the initramfs. busybox sh: POSIX only.
set -u
run=$1
home=$(awk -F: -v uid="$(id -u)" '$3 == uid { print $6 }' /etc/passwd)
# On the scratch disk (ext4, as a host's /tmp usually is). As root, the
# shared directory, as a host's /tmp: the sandbox's host uid (65534) must
# reach what the tests put there. Rootless, a private directory, as make
# test-rootless gives.
if [ "$run" = root ]; then
	tmp=/scratch
else
	tmp=/scratch/$(id -un)
	mkdir -p "$tmp"
	chmod 700 "$tmp"
fi

set -- -test.v -test.count=1 -test.short -test.timeout="$(cat /vmtest/test-timeout)"
regex=$(cat /vmtest/tests-regex)
if [ -n "$regex" ]; then
	set -- "$@" -test.run="$regex"
fi
# More arguments (VM_ARGS), split at spaces, not globbed.
set -f
# shellcheck disable=SC2046
set -- "$@" $(cat /vmtest/test-args)
set +f
echo "vm: $(id)"
# shellcheck disable=SC3045 # busybox ash has ulimit -n
echo "vm: cgroup $(cut -d: -f3 /proc/self/cgroup), RLIMIT_NOFILE $(ulimit -n), TMPDIR $tmp"
echo "vm: /tests/sandbox.test $*"
# The package directory's testdata, if any, sits beside the binary.
cd /tests || exit 2
exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$home" USER="$(id -un)" LOGNAME="$(id -un)" \
	TMPDIR="$tmp" /tests/sandbox.test "$@"
