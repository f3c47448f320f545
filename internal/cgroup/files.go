//go:build linux

package cgroup

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// write writes value to the file name in the cgroup directory dir, in one
// write(2), which is how cgroup files take a setting. A cgroup's files
// exist from its mkdir and cannot be created or truncated, so the open
// has no O_CREAT or O_TRUNC and nothing is checked before it.
func write(dir, name, value string) error {
	file := dir + "/" + name
	fd, err := unix.Open(file, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = retryEINTR(func() error {
			_, err := unix.Write(fd, []byte(value))
			return err
		})
		unix.Close(fd)
	}
	if err != nil {
		return fmt.Errorf("cgroup %s: write %s: %w", file, value, err)
	}
	return nil
}

// retryEINTR calls f again while it fails with EINTR. Some cgroup writes
// give up when a signal is pending (a v1 memory limit being shrunk), and
// the Go runtime signals its threads to preempt them: CI met
// "interrupted system call" from a run's cgroup set-up.
func retryEINTR(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}

// readFile returns the contents of a cgroup file that holds one record
// (a value, or flat-keyed lines: every file Usage reads), or nil if it
// cannot be read. It is os.ReadFile less the fstat for a size (cgroup
// files report 0 or 4096), the os.File around the fd, and the read that
// returns 0: a one-record file's read fills the buffer or returns all
// there is. (cgroup.procs is many records: read it with os.ReadFile.)
func readFile(file string) []byte {
	fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err != nil {
			return nil
		}
		buf = buf[:len(buf)+n]
		if len(buf) < cap(buf) {
			return buf
		}
		buf = append(buf, 0)[:len(buf)] // full: grow, read on
	}
}

// readKeyed reads one "key value" line's value from a flat-keyed file; a
// missing file or key is 0.
func readKeyed(file, key string) uint64 {
	for _, line := range strings.Split(string(readFile(file)), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// readInt reads a file holding one number; missing or "max" is 0.
func readInt(file string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(string(readFile(file))), 10, 64)
	return n
}
