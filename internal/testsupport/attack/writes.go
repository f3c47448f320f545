//go:build linux

package attack

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// writes tries to change the kernel and the host through the files that
// control them, to make device nodes, to write where the root is
// read-only, and to gain privilege through setuid binaries. Modelled on:
// core_pattern and uevent_helper escapes (a pipe handler the kernel runs
// as host root, CVE-2022-0492's release_agent is the cgroup twin),
// sysrq-trigger, raw disk and memory devices reached by mknod, overwriting
// the runtime binary (CVE-2019-5736) and setuid helpers (CVE-2021-4034,
// pkexec).
//
// Dangerous files are only opened for writing, never written: the open is
// the proof. The few writes go to the sandbox's own files.
func writes(r *Report, _ []string) {
	for _, p := range []string{
		"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname",
		"/proc/sys/kernel/modprobe", "/proc/sys/kernel/sysrq", "/proc/sys/kernel/ns_last_pid",
		"/proc/sys/kernel/randomize_va_space", "/proc/sys/vm/drop_caches", "/proc/sys/vm/overcommit_memory",
		"/proc/sys/fs/suid_dumpable", "/proc/sys/fs/binfmt_misc/register", "/proc/sys/user/max_user_namespaces",
		"/proc/sys/net/ipv4/ip_forward", "/proc/sysrq-trigger",
		"/sys/kernel/uevent_helper", "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/power/state",
		"/sys/fs/cgroup/release_agent", "/sys/fs/cgroup/cgroup.procs",
		"/dev/mem", "/dev/kmem", "/dev/port", "/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/kmsg",
		// The runtime's binary, as the program sees its own executable.
		"/proc/self/exe", "/proc/1/exe",
	} {
		r.Try("open for writing "+p, openWrite(p))
	}
	// Lowering its own OOM score needs CAP_SYS_RESOURCE; the write
	// touches only this process.
	r.Try("write -1000 to /proc/self/oom_score_adj", os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0))
	devices(r)
	for _, dir := range []string{"/", "/usr", "/usr/bin", "/etc", "/bin", "/sbin", "/lib", "/proc", "/proc/sys",
		"/dev", "/opt/sbxtest"} {
		r.Try("create a file in "+dir, create(filepath.Join(dir, "sbxtest-write")))
	}
	r.Try("unlink /etc/hostname", unix.Unlink("/etc/hostname"))
	r.Try("chmod /etc/passwd", unix.Chmod("/etc/passwd", 0o666))
	setuid(r)
}

// devices makes device nodes where the program can write, and opens them:
// mknod needs CAP_MKNOD, and even a node that exists on a nodev mount
// cannot be opened.
func devices(r *Report) {
	for _, dir := range []string{"/tmp", "/workspace", "/dev/shm"} {
		for _, n := range []struct {
			name string
			mode uint32
			dev  int
		}{
			{"mem", unix.S_IFCHR, int(unix.Mkdev(1, 1))},
			{"kmsg", unix.S_IFCHR, int(unix.Mkdev(1, 11))},
			{"sda", unix.S_IFBLK, int(unix.Mkdev(8, 0))},
			{"vda", unix.S_IFBLK, int(unix.Mkdev(254, 0))},
		} {
			p := filepath.Join(dir, "sbxtest-"+n.name)
			if r.Try("mknod "+p, unix.Mknod(p, n.mode|0o600, n.dev)) {
				r.Try("open mknod'd "+p, openWrite(p))
				os.Remove(p)
			}
		}
	}
}

// setuid looks for setuid and setgid files, then tries to gain root with
// a setuid copy of its own binary and with the system's setuid-root
// mount: no_new_privs, nosuid mounts and the unmapped host root each
// keep the effective uid where it is.
func setuid(r *Report) {
	var found []string
	for _, dir := range []string{"/usr/bin", "/usr/sbin", "/usr/lib", "/usr/libexec", "/usr/local/bin", "/bin", "/sbin"} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && strings.Count(p, "/") > 4 {
				return filepath.SkipDir
			}
			if info, err := d.Info(); err == nil && info.Mode().Type() == 0 && info.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
				found = append(found, p)
			}
			return nil
		})
	}
	r.See("setuid files", "%s", strings.Join(found, " "))

	copyPath := "/tmp/sbxtest-suid"
	err := copyExe(copyPath)
	if err == nil {
		err = unix.Chmod(copyPath, 0o4755)
	}
	if err != nil {
		r.See("setuid copy", "%v", err)
	} else {
		r.Try("chown the setuid copy to root", unix.Chown(copyPath, 0, 0))
		r.Try("setuid copy raises euid", raised(exec.Command(copyPath, "whoami")))
	}
	mount := ""
	for _, p := range found {
		if filepath.Base(p) == "mount" {
			mount = p
		}
	}
	if mount == "" {
		r.See("setuid mount", "none in the rootfs")
		return
	}
	// mount as root of the sandbox's own mount namespace would change
	// only the sandbox; its success is the proof of privilege.
	target := "/tmp/sbxtest-m"
	os.Mkdir(target, 0o755)
	out, err := exec.Command(mount, "-t", "tmpfs", "none", target).CombinedOutput()
	var tmp, m unix.Stat_t
	if err == nil {
		err = errors.New("mount exited 0")
	}
	if unix.Stat("/tmp", &tmp) == nil && unix.Stat(target, &m) == nil && tmp.Dev != m.Dev {
		err = nil
		unix.Unmount(target, 0)
	}
	r.See("setuid mount said", "%s", strings.TrimSpace(string(out)))
	r.Try("setuid "+mount+" mounts a tmpfs", err)
}

// raised runs cmd, the helper's whoami, and returns nil when it ran with
// an effective uid other than the sandbox's.
func raised(cmd *exec.Cmd) error {
	out, err := cmd.Output()
	if err != nil {
		return err
	}
	rep, err := Parse(out)
	if err != nil {
		return err
	}
	if rep.Seen["euid"] == fmt.Sprint(os.Getuid()) {
		return fmt.Errorf("euid stayed %s (NoNewPrivs %s)", rep.Seen["euid"], rep.Seen["nonewprivs"])
	}
	return nil
}

// whoami reports the identity the process runs with.
func whoami(r *Report, _ []string) {
	r.See("uid", "%d", os.Getuid())
	r.See("euid", "%d", os.Geteuid())
	r.See("egid", "%d", os.Getegid())
	nnp, _ := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	r.See("nonewprivs", "%d", nnp)
}

// copyExe copies the running binary to dst.
func copyExe(dst string) error {
	in, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// openWrite opens path for writing, writes nothing, and closes it.
func openWrite(path string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// create makes path as a new empty file and removes it again.
func create(path string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	unix.Close(fd)
	unix.Unlink(path)
	return nil
}

func init() {
	register("writes", writes)
	register("whoami", whoami)
}
