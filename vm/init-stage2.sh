#!/bin/sh
# vm/init-stage2.sh, installed as /vmtest/init2: PID 1 after switch_root.
# Sets up a small host the way a systemd machine on a pure cgroup v2
# hierarchy looks to the library, runs the tests as root and then as the
# unprivileged user sbxtest in a delegated cgroup subtree, prints
#   VM-TEST-RESULT root=<exit code> rootless=<exit code>
# and powers off. vm/run.sh reads that line from the serial console.
# busybox sh: POSIX only.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
umask 022

up() { cut -d' ' -f1 /proc/uptime; }
fail() {
	echo "VM-TEST-SETUP-FAILED stage 2: $*"
	poweroff -f
}

mount -t proc -o nosuid,nodev,noexec proc /proc || fail "mount /proc"
echo "vm: stage 2 (tmpfs root), uptime $(up) s, kernel $(uname -r)"
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys || fail "mount /sys"
mkdir -p /dev/pts /dev/shm
mount -t devpts -o nosuid,noexec,gid=5,mode=0620,ptmxmode=0666 devpts /dev/pts || fail "mount /dev/pts"
mount -t tmpfs -o nosuid,nodev,mode=1777 shm /dev/shm || fail "mount /dev/shm"
# The options systemd mounts cgroup2 with: nsdelegate makes a cgroup
# namespace a delegation boundary, memory_recursiveprot is the default of
# every current distribution.
mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup ||
	fail "mount cgroup2 at /sys/fs/cgroup"
mount -t tmpfs -o nosuid,nodev,mode=1777 tmp /tmp || fail "mount /tmp"

# Extra kernel modules (VM_MODULES), dependencies first.
while read -r module; do
	insmod "/vmtest/$module.ko" || fail "insmod $module"
	echo "vm: loaded module $module"
done </vmtest/modules

# The scratch disk (vm/run.sh): the tests' temporary files go there. The
# kernel makes /dev/vda once virtio_blk has found the disk.
for _ in $(seq 50); do
	[ -b /dev/vda ] && break
	sleep 0.1
done
mkdir -p /scratch
mount -t ext4 -o nosuid,nodev /dev/vda /scratch || fail "mount the scratch disk /dev/vda at /scratch"
chmod 1777 /scratch

# A minimal /etc for the test process itself (the library generates the
# sandbox's own). nobody/nogroup: as root the sandbox maps to 65534.
cat >/etc/passwd <<'EOF'
root:x:0:0:root:/root:/bin/sh
sbxtest:x:1001:1001:sandbox tests:/home/sbxtest:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >/etc/group <<'EOF'
root:x:0:
tty:x:5:
sbxtest:x:1001:
nogroup:x:65534:
EOF
printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n' >/etc/hosts
echo vmtest >/etc/hostname
hostname vmtest
mkdir -p /home/sbxtest/tmp
chown -R 1001:1001 /home/sbxtest
chmod 700 /home/sbxtest /home/sbxtest/tmp

# Raise the hard limit so that both runs inherit a roomy one; the kernel's
# default of 1024/4096 is what a bare init gets, not what a host gives.
# shellcheck disable=SC3045 # busybox ash has ulimit -n
ulimit -n 65536 || fail "ulimit -n 65536"
ip link set lo up || fail "ip link set lo up"
# Debian's kernels gate unprivileged user namespaces behind this sysctl
# (on by default since Debian 11); make sure.
if [ -f /proc/sys/kernel/unprivileged_userns_clone ]; then
	echo 1 >/proc/sys/kernel/unprivileged_userns_clone
fi

# ---- cgroups ---------------------------------------------------------------
# Enable the controllers the library limits for the whole tree (io where
# the kernel has it), then give each run a cgroup of its own, so the root
# cgroup keeps no test process (the no-internal-processes rule would stop
# controllers being enabled below a cgroup that holds processes).
cg=/sys/fs/cgroup
available=" $(cat $cg/cgroup.controllers) "
controllers=''
for c in memory pids cpu io; do
	case $available in
	*" $c "*) controllers="$controllers +$c" ;;
	*) case $c in io) ;; *) fail "cgroup controller $c missing (have:$available)" ;; esac ;;
	esac
done
echo "$controllers" >$cg/cgroup.subtree_control || fail "enable$controllers at $cg"
echo "vm: cgroup v2 at $cg, controllers enabled:$controllers"

# in_cgroup DIR CMD...: run CMD inside cgroup DIR (a shell moves itself
# there, then execs CMD), with no stdin.
in_cgroup() {
	sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$@" </dev/null
}

# Root: a leaf cgroup, like a root service's on a systemd host.
mkdir $cg/root-tests || fail "mkdir $cg/root-tests"

# sbxtest: a delegated subtree, as systemd delegates one (Delegate=yes, the
# user@.service of a logged-in user): the user owns the directory and the
# files that govern its inside (cgroup.procs, cgroup.threads,
# cgroup.subtree_control, and whatever else the kernel lists in
# /sys/kernel/cgroup/delegate), but not the files that set the limits of
# the subtree itself. Its processes start in the leaf "shell"; the user may
# create and control cgroups anywhere below sbxtest.
mkdir -p $cg/sbxtest/shell || fail "mkdir $cg/sbxtest/shell"
echo "$controllers" >$cg/sbxtest/cgroup.subtree_control || fail "enable$controllers in $cg/sbxtest"
delegated='cgroup.procs cgroup.threads cgroup.subtree_control'
if [ -f /sys/kernel/cgroup/delegate ]; then
	delegated="$delegated $(cat /sys/kernel/cgroup/delegate)"
fi
chown sbxtest:sbxtest $cg/sbxtest || fail "chown $cg/sbxtest"
for f in $delegated; do
	if [ -e "$cg/sbxtest/$f" ]; then
		chown sbxtest:sbxtest "$cg/sbxtest/$f" || fail "chown $cg/sbxtest/$f"
	fi
done
chown -R sbxtest:sbxtest $cg/sbxtest/shell || fail "chown -R $cg/sbxtest/shell"

# hang_report: what every process is doing, for a run that outlived its
# own -test.timeout: a test binary whose runtime is wedged cannot time
# itself out. Each process's state, and each thread's wait channel and
# kernel stack, then SIGQUIT to the Go processes among them (the test
# binary and its spawner), which print their goroutines. The report goes
# to the kernel log at a level the console shows, not to the console's
# tty: a run stuck writing to that tty would hold a report back too.
hang_report() {
	# Unlimited: /dev/kmsg allows 10 lines per 5 s by default.
	echo on >/proc/sys/kernel/printk_devkmsg
	{
		echo "vm: === a run outlived its -test.timeout; the processes:"
		for d in /proc/[0-9]*; do
			pid=${d#/proc/}
			# Kernel threads have no command line (and /proc files
			# have no size, so read it).
			[ -n "$(tr -d '\000' <"$d/cmdline" 2>/dev/null)" ] || continue
			echo "vm: pid $pid ($(cat "$d/comm" 2>/dev/null)) $(grep -E '^(State|PPid|Threads):' "$d/status" 2>/dev/null | tr '\t\n' '  ')"
			for t in "$d"/task/*; do
				echo "vm:   task ${t##*/} $(grep '^State:' "$t/status" 2>/dev/null | tr '\t' ' ') wchan=$(cat "$t/wchan" 2>/dev/null)"
				sed 's/^/vm:     /' "$t/stack" 2>/dev/null
			done
		done
	} | while IFS= read -r line; do
		echo "<2>$line" >/dev/kmsg
	done
	for d in /proc/[0-9]*; do
		case $(readlink "$d/exe" 2>/dev/null) in
		/tests/sandbox.test* | /memfd:*) kill -QUIT "${d#/proc/}" 2>/dev/null ;;
		esac
	done
}

# watched CMD...: CMD, with hang_report after /vmtest/hang-after seconds.
watched() {
	(
		sleep "$(cat /vmtest/hang-after)"
		hang_report
	) &
	watchdog=$!
	"$@"
	rc=$?
	kill $watchdog 2>/dev/null
	return $rc
}

# ---- the runs --------------------------------------------------------------

echo "vm: === run root (uid 0, cgroup /root-tests), uptime $(up) s"
watched in_cgroup $cg/root-tests /vmtest/run-tests root
root_rc=$?
echo "vm: run root exited $root_rc, uptime $(up) s"

echo "vm: === run rootless (uid 1001 sbxtest, delegated cgroup /sbxtest, in /sbxtest/shell), uptime $(up) s"
watched in_cgroup $cg/sbxtest/shell su -s /bin/sh sbxtest -c '/vmtest/run-tests rootless'
rootless_rc=$?
echo "vm: run rootless exited $rootless_rc, uptime $(up) s"

# What the runs left in the cgroup tree (for the log; the tests assert
# their own cleanup).
echo "vm: cgroups after the runs:"
(cd $cg && find . -mindepth 1 -type d | sed 's/^\./  /')

# Keep kernel messages from splitting the result line.
dmesg -n 1
echo "VM-TEST-RESULT root=$root_rc rootless=$rootless_rc"
poweroff -f
