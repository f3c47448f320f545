//go:build !amd64 && !arm64

package seccomp

// NativeArch is 0: this GOARCH has no syscall table here, so no policy
// can be built for it.
const NativeArch = 0

// MaxNr is 0 for want of a table.
const MaxNr = 0

var numbers = map[string]uint32{}
