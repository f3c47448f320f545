//go:build !amd64 && !arm64

package seccomp

// NativeArch is 0: this GOARCH has no syscall table here, so no policy
// can be built for it.
const NativeArch = 0

// MaxNr is 0 for want of a table.
const MaxNr = 0

// numberTable is empty for want of a table.
func numberTable() map[string]uint32 { return map[string]uint32{} }
