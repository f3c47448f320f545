//go:build !amd64 || (libseccomp && linux && cgo)

package sandbox

// defaultProg is nil where no program of the default policy is generated
// (architectures other than amd64) or where libseccomp compiles it
// (-tags libseccomp): defaultFilter compiles the policy instead.
var defaultProg []byte

const defaultProgNotify = false
