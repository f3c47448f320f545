//go:build linux

package attack

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// fds looks for what the process that built the sandbox left open to it,
// as in CVE-2024-21626 (runc "Leaky Vessels"): runc leaked an fd of the
// host's /sys/fs/cgroup into the container, and a working directory set to
// /proc/self/fd/7 put the container's process in the host's tree, from
// where ".." walked to the host's root. Every fd beyond 0, 1 and 2 is
// reported as a leak; from every directory fd and from the working
// directory ".." is walked up as far as it goes, and the top must be the
// sandbox's own "/".
//
// The fds are listed with raw system calls, so that the attack adds none
// but the listing's own.
func fds(r *Report, _ []string) {
	dirfd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.See("open /proc/self/fd", "%v", errName(err))
		return
	}
	names, err := dirNames(dirfd)
	unix.Close(dirfd)
	if err != nil {
		r.See("list /proc/self/fd", "%v", errName(err))
		return
	}
	var open []int
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd == dirfd {
			continue
		}
		open = append(open, fd)
	}
	// An fd that came in through the exec lacks FD_CLOEXEC, or the exec
	// would have closed it; everything the Go runtime opened since
	// (its poller's epoll and eventfd) has it.
	var dirs, inherited []int
	for _, fd := range open {
		target := fdTarget(fd)
		r.See("fd "+strconv.Itoa(fd), "%s", target)
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err == nil && flags&unix.FD_CLOEXEC == 0 {
			inherited = append(inherited, fd)
			if fd > 2 {
				// Whatever it is, the program should not have it.
				r.Try(fmt.Sprintf("find leaked fd %d (%s)", fd, target), nil)
			}
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			dirs = append(dirs, fd)
		}
	}
	r.See("fds", "%v", open)
	r.See("inherited fds", "%v", inherited)

	var root unix.Stat_t
	if err := unix.Stat("/", &root); err != nil {
		r.See("stat /", "%v", errName(err))
		return
	}
	wd, err := unix.Getwd()
	r.See("getcwd", "%s", orErr(wd, err))
	r.Try("getcwd outside the root", unreachable(wd, err))
	r.Try("climb .. from the working directory out of the root", climbOut(unix.AT_FDCWD, ".", &root))
	r.Try("climb .. from /proc/self/cwd out of the root", climbOut(unix.AT_FDCWD, "/proc/self/cwd", &root))
	r.Try("climb .. from /proc/1/cwd out of the root", climbOut(unix.AT_FDCWD, "/proc/1/cwd", &root))
	for _, fd := range dirs {
		n := strconv.Itoa(fd)
		r.Try("climb .. from fd "+n+" out of the root", climbOut(fd, ".", &root))
		r.Try("climb .. from /proc/self/fd/"+n+" out of the root", climbOut(unix.AT_FDCWD, "/proc/self/fd/"+n, &root))
		// The runc exploit's own step: make the directory the working
		// directory, then ask where that is. Changing to one's own
		// directory is no escape; where it leads may be.
		if err := unix.Fchdir(fd); err != nil {
			r.See("fchdir to fd "+n, "%v", errName(err))
		} else {
			wd, err := unix.Getwd()
			r.See("getcwd after fchdir "+n, "%s", orErr(wd, err))
			r.Try("getcwd outside the root after fchdir "+n, unreachable(wd, err))
			r.Try("climb .. after fchdir "+n+" out of the root", climbOut(unix.AT_FDCWD, ".", &root))
		}
		if err := unix.Chdir("/proc/self/fd/" + n); err != nil {
			r.See("chdir /proc/self/fd/"+n, "%v", errName(err))
		} else {
			wd, err := unix.Getwd()
			r.Try("getcwd outside the root after chdir /proc/self/fd/"+n, unreachable(wd, err))
		}
		unix.Chdir("/")
	}
}

// dirNames reads the names in the directory dirfd with getdents64 only.
func dirNames(dirfd int) ([]string, error) {
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(dirfd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// fdTarget is what /proc/self/fd/<fd> links to.
func fdTarget(fd int) string {
	buf := make([]byte, 4096)
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf)
	if err != nil {
		return errName(err)
	}
	return string(buf[:n])
}

// unreachable is nil (an escape) when getcwd answered with a path that is
// not below the root: the kernel then prefixes it with "(unreachable)".
func unreachable(wd string, err error) error {
	if err != nil {
		return err
	}
	if strings.HasPrefix(wd, "/") {
		return errors.New("inside the root: " + wd)
	}
	return nil
}

// climbOut opens p relative to dirfd and walks ".." up to 64 times, until
// it stops moving. It is nil (an escape) when the top it ends at is not the
// sandbox's root.
func climbOut(dirfd int, p string, root *unix.Stat_t) error {
	fd, err := unix.Openat(dirfd, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return err
	}
	for range 64 {
		up, err := unix.Openat(fd, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return err
		}
		fd = up
		var ust unix.Stat_t
		if err := unix.Fstat(fd, &ust); err != nil {
			unix.Close(fd)
			return err
		}
		if ust.Dev == st.Dev && ust.Ino == st.Ino {
			break
		}
		st = ust
	}
	unix.Close(fd)
	if st.Dev == root.Dev && st.Ino == root.Ino {
		return errors.New("ends at the sandbox's root")
	}
	return nil // somewhere else: outside
}

func init() { register("fds", fds) }
