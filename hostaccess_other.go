//go:build !linux

package sandbox

// checkWritableBy has nothing to check where no sandbox runs.
func checkWritableBy(option, p string, uid, gid int) error { return nil }
