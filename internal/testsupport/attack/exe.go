//go:build linux

package attack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// exe tries to overwrite the binary that started the sandbox, as in
// CVE-2019-5736: runc's binary was reachable from inside the container as
// /proc/<pid>/exe of the runc process joining it, and a program that
// opened it (O_PATH first, then again for writing through /proc/self/fd
// once runc had exited) replaced runc on the host. Here every executable
// the program can name through /proc is opened for writing in each way
// that attack used.
//
// args, from the test: the host binary's identity as "dev:ino" strings
// (the caller's executable, its sealed copy): finding any of them behind
// a visible exe link or mapping is an attempt that worked, whatever the
// write attempts say.
//
// Nothing is ever written: an open for writing that succeeds is the proof.
// O_TRUNC, which would destroy the file on success, is tried only on files
// that refused a plain open for writing.
func exe(r *Report, args []string) {
	hostIDs := map[string]bool{}
	for _, a := range args {
		hostIDs[a] = true
	}
	self, err := os.Readlink("/proc/self/exe")
	r.See("readlink /proc/self/exe", "%s", orErr(self, err))
	one, err := os.Readlink("/proc/1/exe")
	r.See("readlink /proc/1/exe", "%s", orErr(one, err))

	exes := []string{"/proc/self/exe"}
	for _, pid := range exePids() {
		exes = append(exes, "/proc/"+pid+"/exe")
	}
	maps, err := os.ReadDir("/proc/self/map_files")
	r.See("list /proc/self/map_files", "%s", orErr(fmt.Sprintf("%d entries", len(maps)), err))
	for _, m := range maps {
		exes = append(exes, "/proc/self/map_files/"+m.Name())
	}
	for _, p := range exes {
		writeOpens(r, p)
		r.Try("reach the host binary through "+p, hostBinary(p, hostIDs))
	}
	// The mappings of every file, also those map_files hides: a mapped
	// host binary would show here by its identity.
	r.Try("find the host binary among the mappings", mappedHostBinary(hostIDs))

	// The runc exploit: hold an O_PATH fd of the exe, then reopen it for
	// writing through the magic link.
	for _, p := range []string{"/proc/self/exe", "/proc/1/exe"} {
		// Allowed: an O_PATH fd grants no access by itself.
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			r.See("open "+p+" O_PATH", "%v", errName(err))
			continue
		}
		via := "/proc/self/fd/" + strconv.Itoa(fd)
		r.Try("reopen "+p+" through "+via+" O_WRONLY", openClose(via, unix.O_WRONLY))
		r.Try("reopen "+p+" through "+via+" O_RDWR", openClose(via, unix.O_RDWR))
		unix.Close(fd)
	}
	// And by its own path inside the sandbox, which is what a program
	// would write after reading the link.
	if self != "" {
		writeOpens(r, self)
		r.Try("create a file beside "+self+" to rename over it", createBeside(self))
	}
}

// writeOpens tries to open p for writing: O_WRONLY, O_RDWR and, only if
// both were refused, O_WRONLY|O_TRUNC.
func writeOpens(r *Report, p string) {
	w := r.Try("open "+p+" O_WRONLY", openClose(p, unix.O_WRONLY))
	rw := r.Try("open "+p+" O_RDWR", openClose(p, unix.O_RDWR))
	if !w && !rw {
		r.Try("open "+p+" O_WRONLY|O_TRUNC", openClose(p, unix.O_WRONLY|unix.O_TRUNC))
	}
}

// openClose opens p with flags and closes it again at once.
func openClose(p string, flags int) error {
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// createBeside creates a file in p's directory, the first step of
// replacing p by a rename; should it work, the file is removed again.
func createBeside(p string) error {
	tmp := p + ".sbxtest-new"
	fd, err := unix.Open(tmp, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o755)
	if err != nil {
		return err
	}
	unix.Close(fd)
	unix.Unlink(tmp)
	return nil
}

// hostBinary says whether p is one of the host binaries named in ids
// (nil: it is), by its identity rather than its name.
func hostBinary(p string, ids map[string]bool) error {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return err
	}
	if id := fmt.Sprintf("%d:%d", st.Dev, st.Ino); ids[id] {
		return nil
	}
	return errors.New("not a host binary")
}

// mappedHostBinary reads /proc/self/maps and reports (nil) a mapping of a
// file with one of ids' identities. Its device field is major:minor in hex.
func mappedHostBinary(ids map[string]bool) error {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			continue
		}
		majmin := strings.SplitN(f[3], ":", 2)
		if len(majmin) != 2 {
			continue
		}
		major, _ := strconv.ParseUint(majmin[0], 16, 32)
		minor, _ := strconv.ParseUint(majmin[1], 16, 32)
		if ids[fmt.Sprintf("%d:%s", unix.Mkdev(uint32(major), uint32(minor)), f[4])] {
			return nil
		}
	}
	return errors.New("no mapping of a host binary")
}

// exePids lists the processes visible in /proc.
func exePids() []string {
	des, _ := os.ReadDir("/proc")
	var pids []string
	for _, de := range des {
		if _, err := strconv.Atoi(de.Name()); err == nil {
			pids = append(pids, de.Name())
		}
	}
	return pids
}

// orErr is s, or err's name when there is an error.
func orErr(s string, err error) string {
	if err != nil {
		return errName(err)
	}
	return filepath.Clean(s)
}

func init() { register("exe", exe) }
