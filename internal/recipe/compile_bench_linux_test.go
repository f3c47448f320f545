package recipe

import (
	"testing"

	"github.com/fumehood/sandbox/internal/wire"
)

// BenchmarkCompile compiles the plan of a sandbox of the default options
// (less the filter), as every cold start does once the host's facts are
// read.
func BenchmarkCompile(b *testing.B) {
	cfg := &wire.Config{
		Spec:    wire.Spec{Hostname: "sandbox", WorkspaceSize: 1 << 30, TmpSize: 1 << 30, NoFile: 1024, HostUID: 65534, HostGID: 65534},
		Program: wire.Program{Path: "/bin/true", Args: []string{"/bin/true"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: wire.DefaultDir},
	}
	fds := Fds{Stdio: [3]int{0, 1, 2}, Conn: 3, Sync: 4, Workspace: -1, Proxy: -1, Shim: -1}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, se := Compile(cfg, fds, nil); se != nil {
			b.Fatal(se)
		}
	}
}
