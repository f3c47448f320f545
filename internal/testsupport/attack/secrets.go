//go:build linux

package attack

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// secrets reads whatever the sandbox lets it read of the host's secrets and
// dumps every byte it gets (up to dumpCap) to standard output, so the test
// can look for its own secret in it: password hashes, keys in home
// directories, the kernel's memory and log (CVE-2017-1000405 and the like
// made /proc/kcore and the kernel log the first stop of a container
// escape), keyrings, the scheduler's view of every host task, firmware
// tables, other processes' environments (where tokens live), and the
// host's network addresses.
//
// args are host paths the test made and did not bind; the attack tries
// them directly and through the /proc links that could lead outside.
func secrets(r *Report, args []string) {
	d := &dumper{w: bufio.NewWriter(os.Stdout), left: dumpCap}
	defer d.w.Flush()
	for _, p := range args {
		for _, v := range []string{p, "/proc/self/root" + p, "/proc/1/root" + p, "/proc/1/cwd/../../../../../.." + p} {
			r.Try("read host file "+v, d.tree(v, 0))
		}
	}
	// Files and trees of the host that must be absent or unreadable: any
	// byte read is a leak.
	for _, p := range []string{
		"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh", "/root", "/home",
		"/proc/kcore", "/proc/kmsg", "/dev/kmsg", "/proc/keys", "/proc/sched_debug", "/proc/timer_list",
		"/proc/latency_stats", "/sys/firmware", "/sys/kernel/debug", "/sys/kernel/security", "/sys/class/net",
		"/sys/fs/cgroup", "/var/log", "/var/run/secrets", "/run/secrets", "/boot", "/dev/mem", "/dev/sda",
	} {
		r.Try("read "+p, d.tree(p, 0))
	}
	buf := make([]byte, 1<<16)
	n, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err == nil && n == 0 {
		err = errors.New("read nothing")
	}
	if err == nil {
		d.dump("syslog(2)", buf[:n])
	}
	r.Try("syslog read all", err)

	// What the sandbox does show, dumped for the test to search: its own
	// environment, processes, mounts, network and scratch space.
	d.dump("environment", []byte(strings.Join(os.Environ(), "\n")))
	for _, pid := range procPids() {
		for _, f := range []string{"environ", "cmdline", "status", "mountinfo", "cgroup"} {
			d.tree("/proc/"+pid+"/"+f, 0)
		}
	}
	for _, p := range []string{"/etc", "/tmp", "/workspace", "/run", "/var", "/mnt", "/media", "/srv", "/opt",
		"/proc/net", "/proc/cmdline", "/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname",
		"/proc/sysvipc", "/dev/shm"} {
		d.tree(p, 0)
	}
	r.See("dumped", "%d", dumpCap-d.left)
	if b, err := os.ReadFile("/etc/passwd"); err == nil {
		r.See("passwd", "%s", b)
	} else {
		r.See("passwd", "%v", errName(err))
	}
	netView(r)
}

// netView records which interfaces and addresses the sandbox sees, by the
// kernel's netlink answer and by /proc/net.
func netView(r *Report) {
	var names, addrs []string
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			names = append(names, i.Name)
			as, _ := i.Addrs()
			for _, a := range as {
				addrs = append(addrs, a.String())
			}
		}
	} else {
		r.See("interfaces error", "%v", err)
	}
	r.See("interfaces", "%s", strings.Join(names, " "))
	r.See("addrs", "%s", strings.Join(addrs, " "))
	// /proc/net/dev: two header lines, then "name: counters".
	if b, err := os.ReadFile("/proc/net/dev"); err == nil {
		var devs []string
		for _, l := range strings.Split(string(b), "\n")[2:] {
			if name, _, ok := strings.Cut(l, ":"); ok {
				devs = append(devs, strings.TrimSpace(name))
			}
		}
		r.See("proc net dev", "%s", strings.Join(devs, " "))
	}
	if b, err := os.ReadFile("/proc/net/route"); err == nil {
		r.See("proc net route", "%d routes", strings.Count(string(b), "\n")-1)
	}
}

// dumpCap bounds what secrets writes to standard output.
const dumpCap = 4 << 20

// fileCap bounds what is read of one file (the helper binary, big
// libraries under /opt, are not what it is looking for).
const fileCap = 64 << 10

// dumper writes files to standard output, each under a "==> path <=="
// header, until its budget is spent.
type dumper struct {
	w    *bufio.Writer
	left int
}

// tree dumps path, a file or a directory read recursively a few levels
// deep. It returns nil when it read at least one byte, else why not.
func (d *dumper) tree(path string, depth int) error {
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink != 0 && depth > 0 {
		return errors.New("symlink not followed")
	}
	if st, err = os.Stat(path); err != nil {
		return err
	}
	if !st.IsDir() {
		if !st.Mode().IsRegular() && !strings.HasPrefix(path, "/dev/") && !strings.HasPrefix(path, "/proc/") {
			return fmt.Errorf("not a regular file: %v", st.Mode())
		}
		b, err := readCapped(path)
		if len(b) > 0 {
			d.dump(path, b)
			return nil
		}
		if err == nil {
			err = errors.New("read nothing")
		}
		return err
	}
	if depth >= 4 {
		return errors.New("too deep")
	}
	des, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	var first error
	var read bool
	for _, de := range des {
		if d.left <= 0 {
			break
		}
		if err := d.tree(filepath.Join(path, de.Name()), depth+1); err == nil {
			read = true
		} else if first == nil {
			first = err
		}
	}
	if read {
		return nil
	}
	if first == nil {
		first = errors.New("nothing readable")
	}
	return first
}

// readCapped reads up to fileCap bytes of path without blocking on a
// device or pipe that never ends.
func readCapped(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, fileCap))
	if errors.Is(err, unix.EAGAIN) {
		err = nil
	}
	return b, err
}

// dump writes one named blob, within the budget.
func (d *dumper) dump(name string, b []byte) {
	if d.left <= 0 {
		return
	}
	if len(b) > d.left {
		b = b[:d.left]
	}
	d.left -= len(b)
	fmt.Fprintf(d.w, "==> %s <==\n", name)
	d.w.Write(b)
	d.w.WriteString("\n")
}

func init() { register("secrets", secrets) }
