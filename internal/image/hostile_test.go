package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fumehood/sandbox/internal/testsupport/imagetest"
)

// TestHostileLayers pulls images whose layers try to reach outside their
// root, or to carry what a sandbox must not get. Each is refused or
// neutralised; nothing is written outside the store (a canary directory
// next to it stays empty, /etc/passwd unchanged), and Prune leaves the
// store empty after.
func TestHostileLayers(t *testing.T) {
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat("../", 12)
	type layers = [][]imagetest.Entry
	tests := []struct {
		name   string
		layers func(canary string) layers
		// refused: the error names this; else the root must be want.
		refused string
		want    map[string]string
		o       PullOptions
	}{
		{name: "dot-dot", refused: "outside the layer", layers: func(c string) layers {
			return layers{{file(deep+c[1:]+"/x", 0o644, "out")}}
		}},
		{name: "dot-dot inside a name", refused: "outside the layer", layers: func(c string) layers {
			return layers{{file("a/../../x", 0o644, "out")}}
		}},
		{name: "absolute", refused: "absolute path", layers: func(c string) layers {
			return layers{{file("/etc/passwd", 0o644, "root::0:0::/:/bin/sh\n")}}
		}},
		{name: "absolute into canary", refused: "absolute path", layers: func(c string) layers {
			return layers{{file(c+"/x", 0o644, "out")}}
		}},
		{name: "through a symlink to /", refused: "escapes", layers: func(c string) layers {
			return layers{{symlink("evil", "/"), file("evil"+c+"/x", 0o644, "out")}}
		}},
		{name: "through a symlink to the canary", refused: "escapes", layers: func(c string) layers {
			return layers{{symlink("evil", c), file("evil/x", 0o644, "out")}}
		}},
		{name: "through a relative symlink", refused: "escapes", layers: func(c string) layers {
			return layers{{symlink("evil", deep+c[1:]), file("evil/x", 0o644, "out")}}
		}},
		{name: "a directory over a symlink out replaces it",
			want: map[string]string{"evil": "dir 0755", "evil/x": "file 0644 in"},
			layers: func(c string) layers {
				return layers{{symlink("evil", c), dir("evil/", 0o755), file("evil/x", 0o644, "in")}}
			}},
		{name: "hard link to /etc/shadow", refused: "hard link", layers: func(c string) layers {
			return layers{{hardlink("shadow", "/etc/shadow")}}
		}},
		{name: "hard link that climbs", refused: "hard link", layers: func(c string) layers {
			return layers{{hardlink("x", "../../x")}}
		}},
		{name: "hard link to a missing file", refused: "no such file", layers: func(c string) layers {
			return layers{{hardlink("x", "missing")}}
		}},
		{name: "hard link through a symlink out", refused: "escapes", layers: func(c string) layers {
			return layers{{symlink("evil", "/etc"), hardlink("x", "evil/passwd")}}
		}},
		{name: "whiteout of the parent", refused: "whiteout", layers: func(c string) layers {
			return layers{{file("etc/.wh...", 0o644, "")}}
		}},
		{name: "symlink out in a lower layer, written through above",
			want: map[string]string{"lib": "dir 0755", "lib/x": "file 0644 in"},
			layers: func(c string) layers {
				return layers{{symlink("lib", c)}, {file("lib/x", 0o644, "in")}}
			}},
		{name: "device nodes", want: map[string]string{"dev": "dir 0755"}, layers: func(c string) layers {
			return layers{{dir("dev/", 0o755), imagetest.Entry{Name: "dev/mem", Type: tar.TypeChar, Mode: 0o666},
				imagetest.Entry{Name: "dev/sda", Type: tar.TypeBlock, Mode: 0o666}}}
		}},
		{name: "set-id bits", want: map[string]string{"su": "file 0755 x", "sg": "file 0755 x", "d": "dir 0755"},
			layers: func(c string) layers {
				return layers{{file("su", 0o4755, "x"), file("sg", 0o6751, "x"), dir("d/", 0o2755)}}
			}},
		{name: "0000 directories",
			want: map[string]string{"a": "dir 0755", "a/b": "dir 0755", "a/b/f": "file 0444 "},
			layers: func(c string) layers {
				return layers{{dir("a/", 0), dir("a/b/", 0), file("a/b/f", 0, "")}}
			}},
		{name: "decompression bomb", refused: "more than 1048576 bytes",
			o: PullOptions{MaxUnpackedBytes: 1 << 20},
			layers: func(c string) layers {
				return layers{{file("zeros", 0o644, string(make([]byte, 16<<20)))}}
			}},
		{name: "too many bytes fetched", refused: "MaxBytes",
			o: PullOptions{MaxBytes: 100},
			layers: func(c string) layers {
				return layers{{file("f", 0o644, "a few hundred bytes once in a tar")}}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, canary := newStore(t)
			var tars [][]byte
			for _, l := range tc.layers(canary) {
				tars = append(tars, imagetest.Layer(t, "", l...))
			}
			src := filepath.Join(t.TempDir(), "layout")
			writeLayout(t, src, imageOf(t, "", tars...), "v1")
			tc.o.Keychain = noKeychain
			img, err := s.Pull(ctxT(t), "oci:"+src, tc.o)
			if tc.refused != "" {
				want := ErrBadImage
				if strings.Contains(tc.name, "bomb") || strings.Contains(tc.name, "fetched") {
					want = ErrTooLarge
				}
				if !errors.Is(err, want) || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "oci:"+src) {
					t.Fatalf("got %v, want %v naming the image and %q", err, want, tc.refused)
				}
				checkEmpty(t, s)
			} else {
				if err != nil {
					t.Fatal(err)
				}
				checkTree(t, img.Root, tc.want)
			}
			if b, _ := os.ReadFile("/etc/passwd"); !bytes.Equal(b, passwd) {
				t.Fatal("/etc/passwd changed")
			}
			if _, err := s.Prune(ctxT(t), nil); err != nil {
				t.Fatal(err)
			}
			checkEmpty(t, s)
		})
	}
}

// TestHostErrors: a full disk while unpacking is not the image's fault.
func TestHostErrors(t *testing.T) {
	err := badEntry("f", &os.PathError{Op: "write", Path: "f", Err: syscall.ENOSPC})
	if errors.Is(err, ErrBadImage) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("ENOSPC: %v", err)
	}
	if err := badEntry("f", errClimbs); !errors.Is(err, ErrBadImage) {
		t.Errorf("a climbing name: %v", err)
	}
}
