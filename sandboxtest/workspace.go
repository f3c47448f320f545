package sandboxtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// workspaceDir makes a directory with tb.TempDir that the sandbox's host
// uid and gid can reach and write.
//
// The sandbox opens the directory as its own host user, not as the test's:
// when the test runs as root that is nobody (65534), so the directory is
// given to that user. To reach it, that user must also pass through the
// directory tb.TempDir makes its directories in, which os.MkdirTemp made
// 0700 for the test's user; it gets search permission for others, so it
// can be passed through but not listed. That directory belongs to the
// test and is removed with it; the directories above it are left as they
// are, and where one cannot be passed through, Run's error says so.
func workspaceDir(tb testing.TB, uid, gid int) (string, error) {
	dir := tb.TempDir()
	if uid == os.Getuid() && gid == os.Getgid() {
		return dir, nil // the test's own, as the sandbox's user is
	}
	if err := reachable(filepath.Dir(dir)); err != nil {
		return "", err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return "", fmt.Errorf("workspace: give %s to the sandbox's host uid %d/gid %d: %w", dir, uid, gid, err)
	}
	return dir, nil
}

// reachable adds search permission for others to dir if it lacks it.
func reachable(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if mode := fi.Mode().Perm(); mode&0o001 == 0 {
		if err := os.Chmod(dir, mode|0o001); err != nil {
			return fmt.Errorf("workspace: let the sandbox pass through %s: %w", dir, err)
		}
	}
	return nil
}
