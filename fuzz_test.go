package sandbox

import (
	"errors"
	"path"
	"strings"
	"testing"
)

// FuzzOptions: New never panics, and whatever it refuses it refuses with an
// OptionError that names an Options field and matches ErrInvalidOption.
func FuzzOptions(f *testing.F) {
	f.Add("/usr", "/tmp", "", "/etc/hostname", "/data", "A=b", "box", "pypi.org", int64(1<<20), int64(64<<20), 0.5, int64(64), uint8(0), false)
	f.Add("rel", "", "/nonexistent", "/", "/proc/x", "=x", "a/b", "*.com", int64(-1), int64(0), -1.0, int64(-5), uint8(1), true)
	f.Add("", "", "", "/tmp", "", "K", "", "10.0.0.0/8:5432", int64(0), int64(0), 1e9, int64(0), uint8(2), true)
	f.Fuzz(func(t *testing.T, rootfs, workspace, from, bindSrc, bindDst, env, hostname, egress string,
		memory, wsSize int64, cpus float64, pids int64, network uint8, fresh bool) {
		o := Options{
			Binds:    []Bind{{Source: bindSrc, Target: bindDst}},
			Env:      []string{env},
			Hostname: hostname,
			Limits:   Limits{Memory: memory, CPUs: cpus, Pids: pids},
		}
		if rootfs != "" {
			o.Root = RootDir(rootfs)
		}
		switch {
		case workspace != "":
			o.Workspace = HostWorkspace{Dir: workspace}
		case fresh:
			o.Workspace = FreshWorkspace{Size: wsSize}
		default:
			o.Workspace = SessionWorkspace{Size: wsSize, From: from}
		}
		switch network % 4 {
		case 1:
			var allow []string
			if egress != "" {
				allow = []string{egress}
			}
			o.Network = &Egress{Allow: allow}
		case 2:
			o.Network = HostNetworkUnsafe{}
		}
		s := New(o)
		defer s.Close()
		err := s.Err()
		if err == nil {
			return
		}
		var oe *OptionError
		if !errors.As(err, &oe) || !strings.HasPrefix(oe.Option, "Options.") || !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("New(%+v) = %v, want an OptionError naming an Options field", o, err)
		}
	})
}

// FuzzWorkspacePath: a file operation's name maps to a path inside the
// workspace, or is refused as outside it.
func FuzzWorkspacePath(f *testing.F) {
	for _, s := range []string{"a/b", "/workspace/a", "/workspace", "/workspace/../etc", "/etc/passwd", "../x", "./a/../b", "/workspacex/y", "//workspace//a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		rel, err := workspacePath(name)
		if err != nil {
			if !errors.Is(err, ErrOutsideWorkspace) {
				t.Fatalf("workspacePath(%q) = %v, want ErrOutsideWorkspace", name, err)
			}
			return
		}
		if strings.HasPrefix(rel, "/") {
			t.Fatalf("workspacePath(%q) = %q, absolute", name, rel)
		}
		// An absolute name is accepted only beneath /workspace.
		if strings.HasPrefix(name, "/") {
			if p := path.Clean(name); p != DefaultDir && !strings.HasPrefix(p, DefaultDir+"/") {
				t.Fatalf("workspacePath(%q) = %q, but it names %s", name, rel, p)
			}
		}
	})
}
