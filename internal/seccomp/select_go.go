//go:build !(libseccomp && linux && cgo)

package seccomp

import "golang.org/x/net/bpf"

// BuildCompiler names the compiler CompileForBuild uses in this build:
// "libseccomp" when built with the tag libseccomp (on Linux, with cgo),
// "go" otherwise.
const BuildCompiler = "go"

// CompileForBuild checks f and compiles it with this build's compiler:
// CompileLibseccomp when built with the tag libseccomp (on Linux, with
// cgo), Compile otherwise (CGO_ENABLED=0 builds, and -tags libseccomp
// without cgo). Both decide every syscall alike; see BuildCompiler.
func CompileForBuild(f Filter) ([]bpf.Instruction, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	return Compile(f)
}
