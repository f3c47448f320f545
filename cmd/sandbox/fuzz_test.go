package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fumehood/sandbox"
)

// FuzzParseSize: a size either parses to a non-negative byte count that
// formatSize writes back in a form that parses to the same count, or is an
// error with a zero count.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4096", "100k", "512M", "1GiB", "1.5G", "12X", "-1", "9223372036854775807", "8E", "1e3K", ".5k", "0x10", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			if n != 0 {
				t.Fatalf("parseSize(%q) = %d, %v", s, n, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("parseSize(%q) = %d, negative", s, n)
		}
		back, err := parseSize(formatSize(n))
		if err != nil || back != n {
			t.Fatalf("parseSize(%q) = %d; formatSize gives %q, which parses to %d, %v", s, n, formatSize(n), back, err)
		}
	})
}

// FuzzParseBind: an accepted SRC[:DST] has an absolute, clean source and a
// target that is empty or absolute; the writable flag is kept.
func FuzzParseBind(f *testing.F) {
	for _, s := range []string{"/opt", "./data:/data", "a:b", ":", "/x:", "rel/../..:/y", "/a:/b:/c"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, spec string, writable bool) {
		b, err := parseBind(spec, writable)
		if err != nil {
			return
		}
		if !filepath.IsAbs(b.Source) || filepath.Clean(b.Source) != b.Source {
			t.Fatalf("parseBind(%q).Source = %q, want a clean absolute path", spec, b.Source)
		}
		if b.Target != "" && !strings.HasPrefix(b.Target, "/") {
			t.Fatalf("parseBind(%q).Target = %q, want empty or absolute", spec, b.Target)
		}
		if b.Writable != writable {
			t.Fatalf("parseBind(%q) lost the writable flag", spec)
		}
	})
}

// FuzzParseRun: any command line either is refused with an error or gives
// Options that New either accepts or refuses with an OptionError naming
// an Options field; nothing panics.
func FuzzParseRun(f *testing.F) {
	for _, s := range []string{
		"--memory 512M --cpus 0.5 --pids 64 -- true",
		"--ro-bind /opt --bind /tmp:/data --env A=b -- sh -c x",
		"--net allow:pypi.org,*.example.com:8000-8100 -- true",
		"--workspace-size 0K -- true", "--timeout -1s -- true", "--seccomp unconfined --seccomp-kill -- true",
		"--net host --net none -- x", "--cpus NaN -- x", "--hostname a/b -- x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		for _, a := range args {
			if strings.Contains(a, "json") || strings.HasSuffix(a, ".json") {
				return // --seccomp FILE reads files; keep the fuzzer off the disk
			}
		}
		cfg, err := parseRun(args)
		if err != nil {
			return
		}
		err = sandbox.New(cfg.opts).Err()
		if err == nil {
			return
		}
		var oe *sandbox.OptionError
		if !errors.As(err, &oe) || !strings.HasPrefix(oe.Option, "Options.") || !errors.Is(err, sandbox.ErrInvalidOption) {
			t.Fatalf("%q: New says %v, want an OptionError naming an Options field", line, err)
		}
	})
}
