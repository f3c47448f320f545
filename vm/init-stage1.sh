#!/bin/sh
# vm/init-stage1.sh, installed as /init in the VM's initramfs: PID 1, first
# stage. It only moves the system out of the initramfs. The library calls
# pivot_root, which fails with EINVAL while the root is the initramfs
# (rootfs can never be unmounted), so this copies the tree into a tmpfs and
# switch_roots into it; the second stage (/vmtest/init2) does the real work.
# busybox sh: POSIX only.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

# devtmpfs first: /dev/console is where everything we print must go, and
# the kernel may not have found one to open for us in the initramfs.
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1

fail() {
	echo "VM-TEST-SETUP-FAILED stage 1: $*"
	poweroff -f
}

mkdir -p /proc
mount -t proc proc /proc && echo "vm: stage 1 (initramfs), uptime $(cut -d' ' -f1 /proc/uptime) s"
umount /proc
mkdir -p /newroot || fail "mkdir /newroot"
mount -t tmpfs -o mode=0755 newroot /newroot || fail "mount tmpfs /newroot"
for entry in /*; do
	case $entry in
	/newroot | /dev | /proc | /sys) ;;
	*) cp -a "$entry" /newroot/ || fail "copy $entry" ;;
	esac
done
mkdir -p /newroot/dev /newroot/proc /newroot/sys
# Keep devtmpfs (and our open console) across the switch.
mount --move /dev /newroot/dev || fail "move /dev"
# shellcheck disable=SC2093 # the next line runs only if the exec failed
exec switch_root /newroot /vmtest/init2
fail "switch_root"
