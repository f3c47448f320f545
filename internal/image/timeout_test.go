package image

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPullTimeout: a registry that stalls on a layer fails the pull when
// Timeout runs out, with an error that names the image and the timeout
// and matches ErrTimeout, and the store holds nothing of it, though one
// layer was whole; ctx's own deadline is context.DeadlineExceeded alone.
func TestPullTimeout(t *testing.T) {
	img := imageOf(t, "", baseLayers(t)...)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	second, err := layers[1].Digest()
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, "", "")
	ref := reg.push(t, "test/base:v1", img, nil)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // before the server's Close, which waits for handlers
	reg.wrap = func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+second.String()) {
			select {
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		next.ServeHTTP(w, r)
	}

	s, _ := newStore(t)
	o := local()
	o.Timeout = 300 * time.Millisecond
	_, err = s.Pull(ctxT(t), ref, o)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "300ms") {
		t.Errorf("Pull: %v; want ErrTimeout and context.DeadlineExceeded, naming %s and 300ms", err, ref)
	}
	t.Log(err)
	if s.unpacked.Load() != 1 {
		t.Errorf("%d layers unpacked before the stall, want 1", s.unpacked.Load())
	}
	checkEmpty(t, s)

	// The caller's deadline, shorter than Timeout, is the caller's.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	o.Timeout = time.Hour
	_, err = s.Pull(ctx, ref, o)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		t.Errorf("Pull past ctx's deadline: %v; want context.DeadlineExceeded and not ErrTimeout", err)
	}
	checkEmpty(t, s)
}

// TestPullTimeoutDefault: a Timeout of zero is DefaultTimeout.
func TestPullTimeoutDefault(t *testing.T) {
	if got := (PullOptions{}).withDefaults().Timeout; got != DefaultTimeout {
		t.Errorf("default Timeout %v, want %v", got, DefaultTimeout)
	}
}
