//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkChangesRun is the cost of SessionWorkspace.TrackChanges per Run: a Run
// of true in a session workspace of n files, without it and with it, the
// files in the layer that takes changes ("upper") or beneath a snapshot
// ("snapshot"), in the layered and the flat workspace.
func BenchmarkChangesRun(b *testing.B) {
	for _, flat := range []bool{false, true} {
		for _, n := range []int{0, 10000} {
			for _, mode := range []string{"off", "upper", "snapshot"} {
				layout := map[bool]string{false: "layered", true: "flat"}[flat]
				b.Run(fmt.Sprintf("%s/files=%d/track=%s", layout, n, mode), func(b *testing.B) {
					requireSandbox(b)
					s := newTest(b, Options{Workspace: SessionWorkspace{Size: 1 << 30, TrackChanges: mode != "off"}, Start: Pool{Size: 1}})
					if flat {
						keepFlat(s)
					}
					for i := range n {
						if err := s.WriteFile(fmt.Sprintf("d%02d/f%04d", i%100, i), []byte("0123456789"), 0o644); err != nil {
							b.Fatal(err)
						}
					}
					if mode == "snapshot" {
						if _, err := s.Snapshot(); err != nil {
							b.Fatal(err)
						}
					}
					ctx := context.Background()
					for b.Loop() {
						res, err := s.Run(ctx, Command("true"))
						if err != nil || !res.Success() || len(res.Changes) != 0 {
							b.Fatalf("%v %v %d changes", err, res, len(res.Changes))
						}
					}
				})
			}
		}
	}
}

// BenchmarkChangesMark is the keeper's share alone: recording the
// workspace and comparing it, as a Run with SessionWorkspace.TrackChanges does,
// without the Run.
func BenchmarkChangesMark(b *testing.B) {
	for _, n := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			requireSandbox(b)
			s := newTest(b, Options{Workspace: SessionWorkspace{Size: 1 << 30, TrackChanges: true}})
			for i := range n {
				if err := s.WriteFile(fmt.Sprintf("d%02d/f%04d", i%100, i), []byte("0123456789"), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			kc, err := s.ws.keeper(&s.cfg)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				list, _ := s.runChanges(kc)
				if cs, dropped := list(); len(cs) != 0 || dropped != 0 {
					b.Fatalf("%d changes, %d dropped", len(cs), dropped)
				}
			}
		})
	}
}
