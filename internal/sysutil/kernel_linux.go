package sysutil

import (
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// kernelRelease is this kernel's release ("6.1.0-18-amd64"), "" where
// uname fails.
var kernelRelease = sync.OnceValue(func() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
})

// KernelAtLeast says whether this kernel is major.minor or later; false
// where its release cannot be read.
func KernelAtLeast(major, minor int) bool {
	return ReleaseAtLeast(kernelRelease(), major, minor)
}

// ReleaseAtLeast compares a kernel release ("6.1.0-18-amd64") with
// major.minor.
func ReleaseAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
