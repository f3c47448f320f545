//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"testing"
)

// TestOtherSystems: where no sandbox can run, every way into one is
// refused with ErrNotSupported rather than run unconfined.
func TestOtherSystems(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	// New itself refuses on a GOARCH without a syscall table.
	if err := s.Err(); err != nil && !errors.Is(err, ErrNotSupported) {
		t.Fatalf("New: %v", err)
	}
	if _, err := s.Run(context.Background(), Command("/bin/echo", "hi")); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Run: %v, want ErrNotSupported", err)
	}
	if _, err := s.Snapshot(); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Snapshot: %v, want ErrNotSupported", err)
	}
	if err := s.WriteFile("a", nil, 0o644); !errors.Is(err, ErrNotSupported) {
		t.Errorf("WriteFile: %v, want ErrNotSupported", err)
	}
	if _, _, err := s.Changes(nil); !errors.Is(err, ErrNotSupported) {
		t.Errorf("Changes: %v, want ErrNotSupported", err)
	}
}
