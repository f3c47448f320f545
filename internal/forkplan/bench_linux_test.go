package forkplan

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// benchHeap is held so the collector keeps it while a benchmark runs.
var benchHeap [][]byte

// BenchmarkStart is Start of a plan that execs /bin/true, and the wait for
// it, from a process holding a small heap or 1 GiB of touched heap: a
// copying clone's cost grows with the caller's page tables, a shared one's
// should not.
func BenchmarkStart(b *testing.B) {
	if _, err := os.Stat("/bin/true"); err != nil {
		b.Skip("no /bin/true on this host")
	}
	for _, heap := range []int{0, 1 << 30} {
		for _, shared := range []bool{false, true} {
			mode := "copy"
			if shared {
				mode = "shared"
			}
			b.Run(fmt.Sprintf("%s/heap=%dMiB", mode, heap>>20), func(b *testing.B) {
				benchHeap = touched(heap)
				defer func() { benchHeap = nil }()
				p := New(2)
				p.Call(Where{Op: "execve", Path: "/bin/true"}, unix.SYS_EXECVE, Str("/bin/true"), Strs([]string{"true"}), Strs(nil))
				for b.Loop() {
					pid, err := p.Start(Clone{CgroupFD: -1, Shared: shared})
					if err != nil {
						b.Fatal(err)
					}
					var ws syscall.WaitStatus
					if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
						b.Fatalf("wait4: %v, status %v", err, ws)
					}
				}
			})
		}
	}
}

// touched is size bytes of heap in 1 MiB pieces, every page written.
func touched(size int) [][]byte {
	var h [][]byte
	for ; size > 0; size -= 1 << 20 {
		c := make([]byte, 1<<20)
		for i := 0; i < len(c); i += 4096 {
			c[i] = 1
		}
		h = append(h, c)
	}
	return h
}
