package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// bwrapCommand returns bubblewrap's argv for /bin/true with the isolation a
// sandbox has: every namespace, /usr read-only, /bin, /sbin and /lib* as the
// symlinks or directories they are on this host, a new /proc, a minimal
// /dev and a tmpfs /tmp. It installs bubblewrap first if it is missing.
func bwrapCommand() ([]string, error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		if err := installBwrap(); err != nil {
			return nil, err
		}
		if bwrap, err = exec.LookPath("bwrap"); err != nil {
			return nil, fmt.Errorf("bubblewrap installed, yet: %w", err)
		}
	}
	argv := []string{bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return nil, err
			}
			argv = append(argv, "--symlink", target, d)
		case fi.IsDir():
			argv = append(argv, "--ro-bind", d, d)
		}
	}
	return append(argv, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "/bin/true"), nil
}

// installBwrap installs bubblewrap with apt-get, non-interactively, and
// refreshes the package lists once if the first attempt fails.
func installBwrap() error {
	if os.Geteuid() != 0 {
		return errors.New("bwrap is not installed; run as root, or: apt-get install -y bubblewrap")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("bwrap is not installed and there is no apt-get to install it: %w", err)
	}
	if aptGet("install", "-y", "-q", "bubblewrap") == nil {
		return nil
	}
	if err := aptGet("update", "-q"); err != nil {
		return err
	}
	return aptGet("install", "-y", "-q", "bubblewrap")
}

// aptGet runs apt-get with its output on stderr, so that stdout holds only
// the table.
func aptGet(args ...string) error {
	fmt.Fprintln(os.Stderr, "+ apt-get "+strings.Join(args, " "))
	cmd := exec.Command("apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("apt-get %s: %w", args[0], err)
	}
	return nil
}
