package forkplan

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestReleaseAfterStart: a plan its maker releases while its Start may
// still be going on (once the child runs) leaves the next plan without
// its steps, and the child runs what it was given.
func TestReleaseAfterStart(t *testing.T) {
	inModes(t, func(t *testing.T, shared bool) {
		for range 20 {
			r, w := reportPipe(t)
			p := New(int(w.Fd()))
			msg := []byte("ran\n")
			p.Call(Where{Op: "write"}, unix.SYS_WRITE, Val(w.Fd()), Buf(msg), Val(len(msg)))
			p.Call(Where{Op: "exit"}, unix.SYS_EXIT_GROUP, Val(0))
			buf := make([]byte, 16)
			var n int
			done := make(chan struct{})
			go func() {
				// Released once the child runs, as a launcher does
				// once it has heard from it: its memory stays the
				// child's until Start has returned.
				n, _ = r.Read(buf)
				p.Release()
				close(done)
			}()
			ws := start(t, p, 0, shared)
			w.Close()
			<-done
			r.Close()
			if !ws.Exited() || ws.ExitStatus() != 0 || string(buf[:n]) != "ran\n" {
				t.Fatalf("child: status %v, wrote %q; want exit 0 and %q", ws, buf[:n], msg)
			}
			if p.ops != nil || p.where != nil {
				t.Fatalf("released plan still holds %d steps", len(p.ops))
			}
			if q := New(0); len(q.ops) != 0 || len(q.where) != 0 || len(q.keep) != 0 {
				t.Fatalf("a new plan starts with %d steps, %d kept", len(q.ops), len(q.keep))
			}
		}
	})
}
