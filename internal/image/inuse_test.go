package image

import (
	"sync"
	"testing"
)

// TestInUse: an image is in use while a Lease, from another Store on the
// same directory as from another process, holds its root, and not
// before or after; probes at once do not see each other as leases; a
// pruned image is not in use.
func TestInUse(t *testing.T) {
	s, _ := newStore(t)
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/base:v1", imageOf(t, "", baseLayers(t)...), nil)
	if _, err := s.Pull(ctxT(t), ref, local()); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("List: %v, %v", list, err)
	}
	img := list[0]
	inUse := func() bool {
		t.Helper()
		used, err := s.InUse(ctxT(t), img)
		if err != nil {
			t.Fatal(err)
		}
		return used
	}
	if inUse() {
		t.Error("in use before any Lease")
	}

	// Many probes at once, none of them a lease.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wrong := 0
	for range 8 {
		wg.Go(func() {
			for range 50 {
				used, err := s.InUse(ctxT(t), img)
				if used || err != nil {
					mu.Lock()
					wrong++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if wrong > 0 {
		t.Errorf("%d of 400 probes at once said in use (or failed) with no Lease", wrong)
	}

	other, err := Open(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lease, err := other.Use(ctxT(t), &img)
	if err != nil {
		t.Fatal(err)
	}
	if !inUse() {
		t.Error("not in use while a Lease holds it")
	}
	if _, err := s.Prune(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	if !inUse() {
		t.Error("pruned while in use")
	}
	lease.Close()
	if inUse() {
		t.Error("in use after its Lease closed")
	}
	if _, err := s.Prune(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	if inUse() {
		t.Error("a pruned image is in use")
	}
	checkEmpty(t, s)
}
