#!/usr/bin/env bash
# vm/run.sh: the kernel test tier (make test-vm). Boots a Debian kernel under
# qemu with software emulation (TCG: the CI machines' nested KVM cannot run
# this kernel at a usable speed) on a pure cgroup v2 hierarchy, runs the root
# package's tests in it twice (as root, and as an unprivileged user with a
# delegated cgroup subtree), and exits 0 only when both runs passed. See
# vm/README.md.
#
# Everything it needs comes from Debian's packages: qemu-system-x86 is
# installed (as root), the kernel and busybox-static are only downloaded and
# unpacked into a cache, so the host's /boot, initramfs and bootloader are
# never touched.
#
# Environment (all optional):
#   VM_TESTS      -test.run regex (default below: every test); empty or
#                 "all": every test
#   VM_TIMEOUT    wall-clock limit for the whole VM, seconds or with an
#                 s/m/h suffix (default 45m); qemu is killed when it passes
#   VM_TEST_TIMEOUT  -test.timeout of each of the two runs (default 40m)
#   VM_HANG_AFTER seconds after which a run still going gets a report of
#                 every process's state in the console log (default: its
#                 -test.timeout plus 90)
#   VM_KERNEL_PKG pin the kernel package (default: what linux-image-amd64
#                 depends on)
#   VM_MODULES    extra kernel modules to load in the VM, by name
#   VM_LOG        console log (default vm/out/console.log)
#   VM_CACHE      cache directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/fumehood-sandbox-vm)
#   GO            the go command (default go)
#   VM_BINARY     a static test binary to run instead of building the root
#                 package's (e.g. bench/cgroupdrivers' benchmarks)
#   VM_ARGS       more arguments for the test binary, split at spaces
#                 (e.g. -test.bench . -test.benchtime 50x)
set -euo pipefail

vmdir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$vmdir")

# The default test selection. The whole suite as root and rootless takes
# about 9 minutes under TCG on the 2-core CI machine (see vm/README.md), well
# inside VM_TIMEOUT, so the default is every test; set VM_TESTS to a regex to
# narrow it.
default_tests=''
tests=${VM_TESTS-$default_tests}
if [ "$tests" = all ]; then
	tests=''
fi
timeout_spec=${VM_TIMEOUT:-45m}
test_timeout=${VM_TEST_TIMEOUT:-40m}
log=${VM_LOG:-$vmdir/out/console.log}
cache=${VM_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/fumehood-sandbox-vm}
GO=${GO:-go}
export DEBIAN_FRONTEND=noninteractive

# Kernel options the tests rely on. The boot needs an initramfs, a serial
# console, devtmpfs and script interpreters; the library needs every
# namespace, tmpfs, devpts, mount_setattr (5.12+, checked by the library
# itself) and the cgroup v2 controllers it limits. All must be built in
# (=y): most cannot be modules at all, and the rest are needed before the
# init could load one.
required_config=(
	BLK_DEV_INITRD RD_GZIP BINFMT_ELF BINFMT_SCRIPT SERIAL_8250 SERIAL_8250_CONSOLE
	DEVTMPFS TMPFS PROC_FS SYSFS UNIX98_PTYS SHMEM
	NAMESPACES USER_NS PID_NS NET_NS UTS_NS IPC_NS SYSVIPC POSIX_MQUEUE
	CGROUPS MEMCG SWAP CGROUP_PIDS CGROUP_SCHED FAIR_GROUP_SCHED CFS_BANDWIDTH
	SECCOMP SECCOMP_FILTER UNIX INET
)

say() { echo "vm: $*"; }
die() {
	echo "vm: error: $*" >&2
	exit 1
}
is_root() { [ "$(id -u)" -eq 0 ]; }

# seconds SPEC: a duration given as N, Ns, Nm or Nh, in seconds.
seconds() {
	case $1 in
	*[!0-9smh]* | '' | [smh]*) die "bad duration: $1 (want e.g. 2700, 45m, 1h)" ;;
	*s) echo "${1%s}" ;;
	*m) echo $((${1%m} * 60)) ;;
	*h) echo $((${1%h} * 3600)) ;;
	*) echo "$1" ;;
	esac
}
timeout_s=$(seconds "$timeout_spec")

# apt_install PKG...: install host packages, refreshing the package lists
# once if a package is unknown (fresh machines often have none).
apt_install() {
	if ! is_root; then
		die "missing $*: install with 'apt-get install $*' as root, or run make test-vm as root"
	fi
	say "apt-get install $*"
	if ! apt-get install -y -q --no-install-recommends "$@"; then
		apt-get update -q
		apt-get install -y -q --no-install-recommends "$@"
	fi
}

# fetch_deb PKG: print the path of PKG's .deb (the candidate version) in the
# cache, downloading it on first use. apt-get download needs the package
# lists, so refresh them once when PKG is unknown or its candidate is gone
# from the mirror. Offline with a cached .deb, use the newest cached one.
fetch_deb() {
	local pkg=$1 ver deb dl attempt
	mkdir -p "$cache/debs"
	for attempt in 1 2; do
		ver=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')
		if [ -n "$ver" ] && [ "$ver" != "(none)" ]; then
			# Debian's file names drop the epoch and escape nothing else here.
			deb="$cache/debs/${pkg}_${ver#*:}_amd64.deb"
			if [ -s "$deb" ]; then
				echo "$deb"
				return
			fi
			# apt downloads as the user _apt when run as root; give it a
			# directory it can reach (the cache may be under /root).
			dl=$(mktemp -d "${TMPDIR:-/tmp}/fumehood-vm-dl.XXXXXX")
			if is_root && id -u _apt >/dev/null 2>&1; then
				chown _apt "$dl"
			fi
			if (cd "$dl" && apt-get download -q "$pkg=$ver" >&2); then
				mv "$dl"/*.deb "$deb.tmp"
				mv "$deb.tmp" "$deb"
				rm -rf "$dl"
				echo "$deb"
				return
			fi
			rm -rf "$dl"
		fi
		if [ "$attempt" = 1 ] && is_root; then
			say "refreshing package lists to find $pkg" >&2
			apt-get update -q >&2 || true
		fi
	done
	deb=$(find "$cache/debs" -maxdepth 1 -name "${pkg}_*.deb" | sort -V | tail -n 1)
	if [ -n "$deb" ]; then
		say "cannot download $pkg; using the cached $(basename "$deb")" >&2
		echo "$deb"
		return
	fi
	die "cannot download $pkg from Debian's archive (as root, apt-get update first)"
}

# ---- host tools ------------------------------------------------------------

for tool in apt-get apt-cache dpkg-deb tar gzip; do
	command -v "$tool" >/dev/null || die "$tool not found: this script needs a Debian-based host"
done
if ! command -v qemu-system-x86_64 >/dev/null; then
	apt_install qemu-system-x86
fi
# mkfs.ext4 formats the VM's scratch disk (below).
if ! command -v mkfs.ext4 >/dev/null && ! [ -x /sbin/mkfs.ext4 ]; then
	apt_install e2fsprogs
fi
qemu_version=$(qemu-system-x86_64 --version | head -n 1) || die "qemu-system-x86_64 --version failed"
say "$qemu_version"

# ---- busybox ---------------------------------------------------------------
# busybox-static gives the VM its shell and every program the tests run
# inside sandboxes. Unpacked from its .deb rather than installed, so that a
# host with the dynamic busybox package keeps it.
bb_deb=$(fetch_deb busybox-static)
bb_dir="$cache/$(basename "$bb_deb" .deb)"
if [ ! -x "$bb_dir/bin/busybox" ]; then
	rm -rf "$bb_dir"
	dpkg-deb -x "$bb_deb" "$bb_dir.tmp"
	mv "$bb_dir.tmp" "$bb_dir"
fi
busybox="$bb_dir/bin/busybox"
say "busybox: $(basename "$bb_deb")"

# ---- kernel ----------------------------------------------------------------
# The package linux-image-amd64 is a metapackage; the kernel is what it
# depends on (linux-image-<abi>-amd64). Only boot/ is unpacked: the modules
# tree is 400 MB and the tests need no module (VM_MODULES unpacks single ones).
kpkg=${VM_KERNEL_PKG:-}
if [ -z "$kpkg" ]; then
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}')
	if [ -z "$kpkg" ] && is_root; then
		say "refreshing package lists to find linux-image-amd64"
		apt-get update -q
		kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}')
	fi
	if [ -z "$kpkg" ]; then
		# Offline and without lists: fall back to a kernel already cached.
		cached=$(find "$cache/debs" -maxdepth 1 -name 'linux-image-*-amd64_*.deb' 2>/dev/null | sort -V | tail -n 1)
		[ -n "$cached" ] || die "cannot find the kernel package: apt-cache depends linux-image-amd64 names none (apt-get update as root)"
		kpkg=$(basename "$cached" | cut -d_ -f1)
	fi
fi
k_deb=$(fetch_deb "$kpkg")
k_dir="$cache/$(basename "$k_deb" .deb)"
if ! compgen -G "$k_dir/boot/vmlinuz-*" >/dev/null; then
	rm -rf "$k_dir" "$k_dir.tmp"
	mkdir -p "$k_dir.tmp"
	dpkg-deb --fsys-tarfile "$k_deb" | tar -x -C "$k_dir.tmp" --wildcards './boot/*'
	mv "$k_dir.tmp" "$k_dir"
fi
vmlinuz=$(compgen -G "$k_dir/boot/vmlinuz-*" | head -n 1)
kver=${vmlinuz##*/vmlinuz-}
kconfig="$k_dir/boot/config-$kver"
[ -f "$kconfig" ] || die "$kconfig missing from $(basename "$k_deb")"
say "kernel: $kver ($(basename "$k_deb"))"

# Under TCG, the bzImage spends about 4 s unpacking itself before the
# kernel starts. The uncompressed ELF inside it has a PVH entry point
# (CONFIG_PVH) that qemu -kernel boots directly, so unpack it once on the
# host: the payload is the xz stream that starts at the first xz magic.
# Without xz, or if that fails, boot the bzImage.
kernel=$vmlinuz
vmlinux="$k_dir/vmlinux-$kver"
if [ ! -s "$vmlinux" ] && grep -qx 'CONFIG_PVH=y' "$kconfig" && command -v xz >/dev/null; then
	offset=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
	if [ -n "$offset" ]; then
		# xz stops with an error at the bzImage's trailer after the stream.
		tail -c +$((offset + 1)) "$vmlinuz" | xz -dc >"$vmlinux.tmp" 2>/dev/null || true
		if [ "$(head -c 4 "$vmlinux.tmp" | od -An -c | tr -d ' ')" = '177ELF' ]; then
			mv "$vmlinux.tmp" "$vmlinux"
		fi
	fi
	rm -f "$vmlinux.tmp"
fi
if [ -s "$vmlinux" ]; then
	kernel=$vmlinux
fi

missing=()
for opt in "${required_config[@]}"; do
	if ! grep -qx "CONFIG_$opt=y" "$kconfig"; then
		missing+=("CONFIG_$opt ($(grep -E "^(# )?CONFIG_${opt}[= ]" "$kconfig" || echo unset))")
	fi
done
if [ "${#missing[@]}" -gt 0 ]; then
	die "kernel $kver lacks built-in options the VM needs: ${missing[*]}"
fi

# ---- build -----------------------------------------------------------------

work=$(mktemp -d "${TMPDIR:-/tmp}/fumehood-vm.XXXXXX")
qemu_pid='' tail_pid=''
# stop_qemu: end the qemu this script started (by its pid): SIGTERM, which
# qemu handles by quitting, then SIGKILL if it is still there after 10 s.
stop_qemu() {
	[ -n "$qemu_pid" ] || return 0
	kill "$qemu_pid" 2>/dev/null || return 0
	for _ in $(seq 20); do
		kill -0 "$qemu_pid" 2>/dev/null || return 0
		sleep 0.5
	done
	kill -KILL "$qemu_pid" 2>/dev/null || true
}
cleanup() {
	# Stop only what this script started, by pid.
	stop_qemu
	if [ -n "$tail_pid" ] && kill -0 "$tail_pid" 2>/dev/null; then
		kill "$tail_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The test binary must be static: the VM has no libc. It is also the
# sandbox's own re-exec target, so nothing else of the library is needed.
if [ -n "${VM_BINARY:-}" ]; then
	say "test binary: $VM_BINARY"
	cp "$VM_BINARY" "$work/sandbox.test"
else
	say "CGO_ENABLED=0 GOARCH=amd64 $GO test -c -o sandbox.test ."
	(cd "$repo" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$GO" test -c -o "$work/sandbox.test" .)
fi

root="$work/root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,root,home,tests,vmtest}
chmod 1777 "$root/tmp"
chmod 700 "$root/root"
cp "$busybox" "$root/bin/busybox"
# The applet links, where busybox itself would put them (bin/sh,
# usr/bin/head, ...); the sandbox binds these directories from the VM's root.
"$busybox" --list-full | while read -r applet; do
	case $applet in */*) ;; *) continue ;; esac
	[ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
done
install -m 0755 "$work/sandbox.test" "$root/tests/sandbox.test"
if [ -d "$repo/testdata" ]; then
	cp -r "$repo/testdata" "$root/tests/"
fi
install -m 0755 "$vmdir/init-stage1.sh" "$root/init"
install -m 0755 "$vmdir/init-stage2.sh" "$root/vmtest/init2"
install -m 0755 "$vmdir/run-tests.sh" "$root/vmtest/run-tests"
# Settings travel as files, not on the kernel command line, which would
# mangle a regex with spaces or quotes.
printf '%s\n' "$tests" >"$root/vmtest/tests-regex"
printf '%s\n' "$test_timeout" >"$root/vmtest/test-timeout"
printf '%s\n' "${VM_ARGS:-}" >"$root/vmtest/test-args"
# A run still going this long after its -test.timeout has not been ended
# by Go's own timeout: the VM's init then prints what every process is
# doing (see hang_report in init-stage2.sh).
seconds "${VM_HANG_AFTER:-$(($(seconds "$test_timeout") + 90))}" >"$root/vmtest/hang-after"

# The scratch disk: an ext4 file system for the tests' temporary files.
# The VM's own tree is tmpfs, which keeps no user xattrs before Linux 6.6;
# on ext4 an image store keeps its layers in overlayfs's form, so the
# overlay of an image's layers is tested on this kernel too. Its modules
# (ext4 checks its metadata with crc32c), and overlayfs, are loaded with
# any VM_MODULES.
scratch="$work/scratch.ext4"
truncate -s 4G "$scratch"
PATH=$PATH:/sbin:/usr/sbin mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "$scratch" ||
	die "mkfs.ext4 of the scratch disk failed"
modules="virtio_pci virtio_blk crc32c_generic ext4 overlay ${VM_MODULES:-}"

# Modules, with the modules they depend on, in load order.
: >"$root/vmtest/modules"
if [ -n "$modules" ]; then
	list="$k_dir/modules.list"
	if [ ! -s "$list" ]; then
		dpkg-deb --fsys-tarfile "$k_deb" | tar -t | grep -E '\.ko(\.xz|\.zst)?$' >"$list.tmp"
		mv "$list.tmp" "$list"
	fi
	declare -A loaded=()
	# add_module NAME: depth first, so dependencies come before their users.
	add_module() {
		local name=${1//-/_} path file dep
		[ -z "${loaded[$name]:-}" ] || return 0
		loaded[$name]=1
		path=$(awk -v n="$name" '{ b = $0; sub(/.*\//, "", b); sub(/\.ko.*$/, "", b); gsub(/-/, "_", b); if (b == n) { print; exit } }' "$list")
		[ -n "$path" ] || die "module $name is not in $(basename "$k_deb")"
		[ -f "$k_dir/$path" ] || dpkg-deb --fsys-tarfile "$k_deb" | tar -x -C "$k_dir" "$path"
		file="$root/vmtest/$name.ko"
		case $path in
		*.ko.xz) "$busybox" xzcat "$k_dir/$path" >"$file" ;;
		*.ko.zst) zstd -dcq "$k_dir/$path" >"$file" || die "zstd is needed to unpack $path" ;;
		*) cp "$k_dir/$path" "$file" ;;
		esac
		# A module's .modinfo section lists what it needs as depends=a,b.
		for dep in $(tr '\0' '\n' <"$file" | sed -n 's/^depends=//p' | tr ',' ' '); do
			add_module "$dep"
		done
		echo "$name" >>"$root/vmtest/modules"
	}
	for m in $modules; do
		add_module "$m"
	done
	say "modules: $(tr '\n' ' ' <"$root/vmtest/modules")"
fi

# newc cpio owned by root whoever builds it; gzip, as the kernel unpacks it.
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | "$busybox" cpio -o -H newc -R 0:0 2>/dev/null) | gzip -6 >"$work/initramfs.cpio.gz"
say "initramfs: $(du -h "$work/initramfs.cpio.gz" | cut -f1)"

# ---- boot ------------------------------------------------------------------
# TCG, not KVM (vm/README.md says why). -cpu max gives the guest RDRAND, so
# the kernel's RNG is ready at once and Go's getrandom never blocks.
# mitigations=off: the guest is throw-away and speculation workarounds only
# slow emulation down.
# panic=-1 with -no-reboot: if an init dies, the kernel panics, reboots,
# and qemu exits instead of hanging until the timeout.
mkdir -p "$(dirname "$log")"
: >"$log"
# shellcheck disable=SC2054 # the commas are qemu's option syntax
qemu=(
	qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m 2048 -smp 2
	-nodefaults -no-user-config -display none -serial stdio -no-reboot
	-kernel "$kernel" -initrd "$work/initramfs.cpio.gz"
	-drive "file=$scratch,if=virtio,format=raw,cache=unsafe"
	-append "console=ttyS0 panic=-1 quiet mitigations=off rdinit=/init"
)
say "tests: ${tests:-all}; timeout ${timeout_s}s; console log: $log"
say "${qemu[*]}"
start=$(date +%s%N)
"${qemu[@]}" </dev/null >"$log" 2>&1 &
qemu_pid=$!
# Show the console as it comes; tail stops by itself when qemu is gone.
tail -n +1 -f --pid="$qemu_pid" "$log" &
tail_pid=$!

ms_since_start() { echo $((($(date +%s%N) - start) / 1000000)); }
boot_ms='' marker_ms='' timed_out=''
while kill -0 "$qemu_pid" 2>/dev/null; do
	now_ms=$(ms_since_start)
	if [ -z "$boot_ms" ] && grep -q '^vm: stage 2' "$log"; then
		boot_ms=$now_ms
	fi
	if [ -z "$marker_ms" ] && grep -q '^VM-TEST-RESULT' "$log"; then
		marker_ms=$now_ms
	fi
	if [ "$now_ms" -ge $((timeout_s * 1000)) ]; then
		timed_out=1
		stop_qemu
		break
	fi
	# The init powers off right after the marker; if the power-off does not
	# take, do not wait for the full timeout.
	if [ -n "$marker_ms" ] && [ "$now_ms" -ge $((marker_ms + 60000)) ]; then
		say "qemu still running 60 s after the result line: stopping it"
		stop_qemu
		break
	fi
	sleep 0.5
done
qemu_rc=0
wait "$qemu_pid" || qemu_rc=$?
qemu_pid=''
wait "$tail_pid" || true
tail_pid=''
total_ms=$(ms_since_start)

# ---- report ----------------------------------------------------------------
# The serial console ends lines with \r\n.
clean=$(tr -d '\r' <"$log")
secs() { printf '%d.%01d s' $(($1 / 1000)) $((($1 % 1000) / 100)); }
echo
say "==== summary ===="
if [ -n "$boot_ms" ]; then
	say "boot to second-stage init: $(secs "$boot_ms") (guest uptime $(sed -n 's/^vm: stage 2 .*uptime \([0-9.]*\).*/\1/p' <<<"$clean" | head -n 1) s)"
fi
say "total VM time: $(secs "$total_ms") (qemu exit status $qemu_rc)"
grep -E '^vm: (run|===) ' <<<"$clean" || true
# Failed tests and panics, by run: the init announces each run with
# "vm: === run NAME".
awk '/^vm: === run / { run = $4 } /^ *--- FAIL|^panic: / { print "vm: " run ": " $0 }' <<<"$clean"
if [ -n "$timed_out" ]; then
	die "timed out after ${timeout_s}s (VM_TIMEOUT=$timeout_spec); qemu killed. Console log: $log"
fi
result=$(grep -E '^VM-TEST-RESULT ' <<<"$clean" | tail -n 1 || true)
if [ -z "$result" ]; then
	grep -E '^VM-TEST-SETUP-FAILED' <<<"$clean" >&2 || true
	die "the VM stopped without a result line (setup failure or kernel panic); see $log"
fi
say "$result"
root_rc=$(sed -n 's/.* root=\([^ ]*\).*/\1/p' <<<"$result")
rootless_rc=$(sed -n 's/.* rootless=\([^ ]*\).*/\1/p' <<<"$result")
failed=()
[ "$root_rc" = 0 ] || failed+=("as root (exit $root_rc)")
[ "$rootless_rc" = 0 ] || failed+=("as sbxtest with a delegated cgroup (exit $rootless_rc)")
if [ "${#failed[@]}" -gt 0 ]; then
	die "tests failed in the VM: ${failed[*]}. Console log: $log"
fi
say "ok: both runs passed on kernel $kver with cgroup v2"
